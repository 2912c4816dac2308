"""A facility's booking-system credentials: verified upstream, stored in the vault, rotated.

:class:`FacilityCredentials` is the one place that turns plaintext credentials into vault
ciphertext and back (:mod:`pmsgate.gateway.vault`, bound to the facility and the field).
Credentials are tried upstream before they are stored (a
:data:`~pmsgate.gateway.verification.Verifier`); a refusal or a failure stores nothing and
is recorded in the audit trail with its cause. A partner facility uses the shared partner api key
(``PMSGATE_PARTNER_API_KEY``); an own facility its own.
"""

from __future__ import annotations

import hmac
import re
from typing import Any

import structlog
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.audit.actions import Actor, AuditAction, Outcome
from pmsgate.audit.trail import AuditTrail
from pmsgate.clock import Clock
from pmsgate.errors import ConfigurationError, InvalidInput, PmsgateError
from pmsgate.gateway.facilities import (
    CLI_ACTOR,
    KINDS,
    MAX_USERNAME,
    Changed,
    FacilityKind,
    FacilityPart,
    FacilityView,
    check_length,
    facility_not_found,
    require_facility,
    subject_of,
)
from pmsgate.gateway.facility_status import CAUSE_RECONNECTED, record_status_change
from pmsgate.gateway.vault import Vault, VaultError, facility_context
from pmsgate.gateway.verification import Verifier, failure_details, refused, verification_error
from pmsgate.integrations.kross.credentials import Credentials
from pmsgate.integrations.kross.errors import KrossError
from pmsgate.storage.facilities import FacilityRepository
from pmsgate.storage.models import Ciphertext, Facility
from pmsgate.storage.webhooks import WebhookRepository, secret_context

log = structlog.get_logger(__name__)

# Stands in for the shared partner key while validating a partner facility's own fields:
# the partner key is configuration, checked when credentials are used.
PLACEHOLDER_API_KEY = "0" * 32

_HEX32 = re.compile(r"^[0-9a-fA-F]{32}$")


def present(secret: SecretStr | None) -> SecretStr | None:
    """None for a missing or blank secret (forms and JSON clients send "" for "none")."""
    if secret is None or not secret.get_secret_value().strip():
        return None
    return secret


def check_kind(kind: str, api_key: SecretStr | None) -> FacilityKind:
    """The facility kind, refused when unknown or when the api key does not fit it."""
    if kind not in KINDS:
        raise InvalidInput(
            "kind must be `partner` or `own`.",
            code="invalid_kind",
            hint="Use `partner` for facilities that use the gateway's shared api key, "
            "`own` for facilities with their own api key.",
        )
    if kind == "own" and api_key is None:
        raise InvalidInput(
            "A facility of kind own needs its api key.",
            code="api_key_required",
            hint="Give the api key from the booking-system panel under Settings → API "
            "(32 hexadecimal characters).",
        )
    if kind == "partner" and api_key is not None:
        raise InvalidInput(
            "A partner facility uses the gateway's shared api key, not its own.",
            code="api_key_not_allowed_for_partner",
            hint="Leave the api key out, or register the facility with kind own.",
        )
    return "own" if kind == "own" else "partner"


class FacilityCredentials(FacilityPart):
    """Verifies, stores (encrypted), reads, replaces and re-encrypts facilities' credentials."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        vault: Vault,
        clock: Clock,
        audit: AuditTrail,
        partner_api_key: SecretStr | None,
        changed: Changed,
    ) -> None:
        super().__init__(sessions, clock, audit, changed)
        self._vault = vault
        self._partner_api_key = partner_api_key

    def __repr__(self) -> str:
        return f"FacilityCredentials(vault={self._vault!r})"

    # --- storing ------------------------------------------------------------------------

    def seal(self, credentials: Credentials, kind: str) -> tuple[Ciphertext, Ciphertext | None]:
        """The password's ciphertext and an own facility's api key's (None for partner)."""
        hotel_id = credentials.hotel_id
        password = self._vault.encrypt(
            credentials.password.get_secret_value(), context=facility_context(hotel_id, "password")
        )
        if kind != "own":
            return password, None
        api_key = self._vault.encrypt(
            credentials.api_key.get_secret_value(), context=facility_context(hotel_id, "api_key")
        )
        return password, api_key

    async def verify_new(
        self, verify: Verifier, credentials: Credentials, kind: FacilityKind, actor: Actor
    ) -> None:
        """Try a new facility's credentials; on any failure record it and store nothing."""
        if kind == "partner":
            credentials = Credentials(
                hotel_id=credentials.hotel_id,
                username=credentials.username,
                password=credentials.password,
                api_key=self._partner_key(),
            )
        try:
            await verify(credentials)
        except (KrossError, PmsgateError) as error:
            # No transaction of ours is open: the event is written in its own.
            await self._audit.record(
                AuditAction.CREDENTIALS_STORED,
                actor=actor,
                subject=subject_of(credentials.hotel_id),
                outcome=Outcome.REFUSED if refused(error) else Outcome.FAILURE,
                details={**failure_details(error), "stored": False},
            )
            log.info(
                "facility_add_unverified",
                hotel_id=credentials.hotel_id,
                reason=error.code,
                refused=refused(error),
            )
            raise verification_error(
                error,
                outcome="nothing was stored",
                retry_hint="Try again in a moment; or add it without trying the credentials "
                '(`pmsgate facilities add … --no-verify`, admin API `"verify": false`): it '
                "is stored as unverified until its first call settles it.",
            ) from None

    # --- reading ------------------------------------------------------------------------

    async def credentials(self, hotel_id: str) -> Credentials:
        """The facility's decrypted booking-system credentials (for the PMS client only)."""
        async with self._sessions() as session:
            row = await require_facility(session, hotel_id)
        password = SecretStr(
            self._vault.decrypt(
                row.password_enc, context=facility_context(row.hotel_id, "password")
            )
        )
        return self._for_row(row, row.username, password, self._stored_api_key(row))

    # --- replacing ----------------------------------------------------------------------

    async def reconnect(
        self,
        hotel_id: str,
        *,
        username: str,
        password: SecretStr,
        api_key: SecretStr | None,
        verify: Verifier,
        actor: Actor = CLI_ACTOR,
    ) -> FacilityView:
        """Replace the credentials after ``verify`` accepted them; back to ``connected``.

        An own facility may omit ``api_key`` to keep its stored one (the usual case:
        only the password changed). Nothing is stored when validation or ``verify`` fails:
        the old credentials (and status) stay. Recorded as ``credentials.changed`` when they
        differ from the stored ones, ``credentials.reconnected`` when the same ones were
        proven again (success, or refused / failure with the cause), plus
        ``facility.status_changed`` when the facility was not connected.
        """
        async with self._sessions() as session:
            row = await require_facility(session, hotel_id)
        api_key = present(api_key)
        if row.kind == "partner" and api_key is not None:
            check_kind("partner", api_key)
        if row.kind == "own" and api_key is None:
            api_key = self._stored_api_key(row)
        credentials = self._for_row(row, username, password, api_key)
        check_length(credentials.username, MAX_USERNAME, "username", "invalid_username")
        action = (
            AuditAction.CREDENTIALS_CHANGED
            if self._differs(row, credentials)
            else AuditAction.CREDENTIALS_RECONNECTED
        )
        # Outside any transaction: no database lock is held while the booking system answers.
        try:
            await verify(credentials)
        except (KrossError, PmsgateError) as error:
            await self._record_refused_reconnect(row, action, actor, error)
            if isinstance(error, KrossError):
                raise verification_error(error) from None
            raise verification_error(
                error, retry_hint="Try again in a moment: nothing was changed."
            ) from None
        view = await self._store_reconnected(row, credentials, action, actor)
        await self._changed()
        log.info("facility_reconnected", hotel_id=hotel_id)
        return view

    async def _record_refused_reconnect(
        self, row: Facility, action: AuditAction, actor: Actor, error: KrossError | PmsgateError
    ) -> None:
        log.info("facility_reconnect_refused", hotel_id=row.hotel_id, reason=error.code)
        await self._audit.record(
            action,
            actor=actor,
            subject=subject_of(row.hotel_id),
            outcome=Outcome.REFUSED if refused(error) else Outcome.FAILURE,
            details={**failure_details(error), "kept": "the previous credentials"},
            facility_id=row.id,
        )

    async def _store_reconnected(
        self, row: Facility, credentials: Credentials, action: AuditAction, actor: Actor
    ) -> FacilityView:
        """Store verified credentials, connected again, with their events: one transaction."""
        now = self._clock.now()
        password_enc, api_key_enc = self.seal(credentials, row.kind)
        values: dict[str, Any] = {
            "username": credentials.username,
            "password_enc": password_enc,
            "status": "connected",
            "last_error": None,
            "updated_at": now,
        }
        if row.status != "connected":
            values["status_changed_at"] = now  # the incident (if any) ends here
        if api_key_enc is not None:
            values["api_key_enc"] = api_key_enc
        async with self._sessions.begin() as session:
            facilities = FacilityRepository(session)
            if not await facilities.update(row.hotel_id, **values):
                raise facility_not_found(row.hotel_id)
            # The old token belongs to the old credentials; the token manager fetches a new one.
            await facilities.delete_token(row.id)
            await facilities.set_integration_status(row.id, "connected", None, now)
            view = FacilityView.of(await require_facility(session, row.hotel_id))
            await self._audit.record_in(
                session,
                action,
                actor=actor,
                subject=subject_of(row.hotel_id),
                details={"kind": row.kind, "username": credentials.username},
                facility_id=row.id,
            )
            if row.status != "connected":
                change = (row.status, "connected")
                await record_status_change(
                    self._audit, session, actor, row, change, CAUSE_RECONNECTED
                )
        return view

    # --- key rotation -------------------------------------------------------------------

    async def rotate_secrets(self) -> int:
        """Re-encrypt every stored secret not under the primary key; how many changed."""
        changed = 0
        # One transaction: a value that no configured key opens aborts the whole rotation.
        async with self._sessions.begin() as session:
            facilities = FacilityRepository(session)
            # (row, its ciphertext attribute, the vault context the value is bound to)
            sealed: list[tuple[object, str, str]] = []
            for row in await facilities.all():
                sealed.append((row, "password_enc", facility_context(row.hotel_id, "password")))
                sealed.append((row, "api_key_enc", facility_context(row.hotel_id, "api_key")))
            for token, hotel_id in await facilities.tokens_with_hotel_ids():
                sealed.append((token, "token_enc", facility_context(hotel_id, "token")))
            for hook in await WebhookRepository(session).subscription_rows():
                sealed.append((hook, "secret_enc", secret_context(hook.id, "secret")))
                sealed.append((hook, "previous_secret_enc", secret_context(hook.id, "previous")))
            for holder, attribute, context in sealed:
                ciphertext = getattr(holder, attribute)
                if ciphertext is not None and self._vault.needs_rotation(ciphertext):
                    setattr(holder, attribute, self._vault.rotate(ciphertext, context=context))
                    changed += 1
        log.info("secrets_rotated", changed=changed, primary_key_id=self._vault.primary_key_id)
        return changed

    # --- helpers ------------------------------------------------------------------------

    def _stored_api_key(self, row: Facility) -> SecretStr | None:
        if row.kind != "own":
            return None
        if row.api_key_enc is None:
            raise ConfigurationError(
                f"Facility {row.hotel_id} is of kind own but has no api key stored.",
                code="api_key_missing",
                hint="Reconnect it with its api key: "
                f"`pmsgate facilities reconnect {row.hotel_id} --api-key-stdin`.",
            )
        return SecretStr(
            self._vault.decrypt(row.api_key_enc, context=facility_context(row.hotel_id, "api_key"))
        )

    def _for_row(
        self, row: Facility, username: str, password: SecretStr, api_key: SecretStr | None
    ) -> Credentials:
        """Validated credentials of the facility; partner facilities get the shared key."""
        if row.kind == "own":
            return Credentials(
                hotel_id=row.hotel_id, username=username, password=password, api_key=api_key
            )
        # The facility's own fields are checked first, so their errors win over configuration.
        Credentials(
            hotel_id=row.hotel_id,
            username=username,
            password=password,
            api_key=PLACEHOLDER_API_KEY,
        )
        return Credentials(
            hotel_id=row.hotel_id,
            username=username,
            password=password,
            api_key=self._partner_key(),
        )

    def _partner_key(self) -> SecretStr:
        if self._partner_api_key is None:
            raise ConfigurationError(
                "The shared partner api key is not configured.",
                code="partner_api_key_missing",
                hint="Set PMSGATE_PARTNER_API_KEY to the partner's 32-hexadecimal api key.",
            )
        if not _HEX32.match(self._partner_api_key.get_secret_value().strip()):
            # A malformed shared key is the operator's fault, not the facility's.
            raise ConfigurationError(
                "PMSGATE_PARTNER_API_KEY is not 32 hexadecimal characters.",
                code="invalid_partner_api_key",
                hint="Copy the partner's api key exactly (32 hexadecimal characters).",
            )
        return self._partner_api_key

    def _differs(self, row: Facility, credentials: Credentials) -> bool:
        """True when ``credentials`` are not the stored ones (compared in memory, never logged)."""
        if row.username != credentials.username:
            return True
        try:
            stored = self._vault.decrypt(
                row.password_enc, context=facility_context(row.hotel_id, "password")
            )
        except VaultError:
            return True  # unreadable (its vault key is gone): whatever comes now is new
        if not hmac.compare_digest(
            stored.encode(), credentials.password.get_secret_value().encode()
        ):
            return True
        if row.kind != "own" or row.api_key_enc is None:
            return False
        stored_key = self._vault.decrypt(
            row.api_key_enc, context=facility_context(row.hotel_id, "api_key")
        )
        return not hmac.compare_digest(
            stored_key.encode(), credentials.api_key.get_secret_value().encode()
        )
