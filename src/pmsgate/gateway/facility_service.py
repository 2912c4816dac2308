"""FacilityService: registration, listing and limits; the one service callers hold.

:class:`FacilityService` registers facilities (each with its first gateway key, handed back
once) and reads them; the rest of what a facility has is each in a module of its own, whose
verbs the service offers as its own attributes:

- its credentials, verified upstream and kept in the vault: :mod:`pmsgate.gateway.credentials`
  (``credentials``, ``reconnect``, ``rotate_secrets``);
- its gateway keys: :mod:`pmsgate.gateway.gateway_keys` (``mint_key``, ``list_keys``,
  ``revoke_key``, ``set_key_scopes``, ``rotate_key``) and the check of a presented key,
  :mod:`pmsgate.gateway.key_check` (``authenticate``, ``flush_key_uses``);
- its status: :mod:`pmsgate.gateway.facility_status` (``mark_error``, ``mark_connected``,
  ``record_auth_attempt``).

What they share (the views, never a secret; the inputs; the errors) is
:mod:`pmsgate.gateway.facilities`. Every change is one transaction: a failing call
leaves nothing half-written.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import structlog
from pydantic import SecretStr
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.audit.actions import Actor, AuditAction
from pmsgate.audit.trail import AuditTrail
from pmsgate.clock import Clock
from pmsgate.errors import InvalidInput
from pmsgate.gateway.credentials import (
    PLACEHOLDER_API_KEY,
    FacilityCredentials,
    check_kind,
    present,
)
from pmsgate.gateway.facilities import (
    CLI_ACTOR,
    MAX_HOTEL_ID,
    MAX_INTEGRATION_ID,
    MAX_NAME,
    MAX_USERNAME,
    FacilityExists,
    FacilityKind,
    FacilityStatus,
    FacilityView,
    FacilityViews,
    Limits,
    NewFacility,
    check_length,
    require_facility,
    subject_of,
)
from pmsgate.gateway.facility_status import FacilityStatuses
from pmsgate.gateway.gateway_keys import GatewayKeys
from pmsgate.gateway.key_cache import KeyChanges
from pmsgate.gateway.key_check import KeyCheck
from pmsgate.gateway.scopes import check_scopes
from pmsgate.gateway.vault import Vault
from pmsgate.gateway.verification import Verifier
from pmsgate.integrations.kross.credentials import Credentials
from pmsgate.storage.facilities import FacilityRepository
from pmsgate.storage.models import Facility

log = structlog.get_logger(__name__)

# The audit trail a service built without one writes to (same database; retention unused here).
_DEFAULT_RETENTION_DAYS = 400


@dataclass(frozen=True)
class _Registration:
    """A new facility's checked values (nothing stored yet)."""

    credentials: Credentials
    kind: FacilityKind
    integration_id: str
    name: str
    limits: Limits
    scopes: list[str]


def _checked(new: NewFacility) -> _Registration:
    """``new``'s values, each checked (kind, credentials, column sizes, scopes)."""
    kind = check_kind(new.kind.strip().lower(), present(new.api_key))
    credentials = Credentials(
        hotel_id=new.hotel_id,
        username=new.username,
        password=new.password,
        api_key=present(new.api_key) if kind == "own" else PLACEHOLDER_API_KEY,
    )
    check_length(credentials.hotel_id, MAX_HOTEL_ID, "hotel_id", "invalid_hotel_id")
    check_length(credentials.username, MAX_USERNAME, "username", "invalid_username")
    integration_id = new.integration_id.strip()
    if not integration_id:
        raise InvalidInput(
            "integration_id is required.",
            code="invalid_integration_id",
            hint="Give the id of the customer's booking-system PMS integration row "
            "(not the student_id).",
        )
    check_length(integration_id, MAX_INTEGRATION_ID, "integration_id", "invalid_integration_id")
    name = new.name.strip()
    check_length(name, MAX_NAME, "name", "invalid_name")
    return _Registration(
        credentials, kind, integration_id, name, new.limits, check_scopes(new.scopes)
    )


class FacilityService:
    """Registers facilities and holds their credentials, gateway keys and status services."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        vault: Vault,
        clock: Clock,
        partner_api_key: SecretStr | None,
        *,
        key_cache_s: float = 0.0,
        audit: AuditTrail | None = None,
        key_changes: KeyChanges | None = None,
    ) -> None:
        self._sessions = sessions
        self._clock = clock
        # Key, credential and status events (docs/audit.md); the container passes its trail.
        self.audit = (
            audit
            if audit is not None
            else AuditTrail(sessions, clock, retention_days=_DEFAULT_RETENTION_DAYS)
        )
        check = KeyCheck(sessions, clock, key_cache_s=key_cache_s, key_changes=key_changes)
        self._check = check
        self._keys = GatewayKeys(sessions, clock, self.audit, check)
        self._credentials = FacilityCredentials(
            sessions, vault, clock, self.audit, partner_api_key, check.changed
        )
        statuses = FacilityStatuses(sessions, clock, self.audit, check.changed)
        # Changes published and heard through Redis (pmsgate.gateway.key_cache); None alone.
        self.key_changes = key_changes

        # Credentials (pmsgate.gateway.credentials).
        self.credentials = self._credentials.credentials
        self.reconnect = self._credentials.reconnect
        self.rotate_secrets = self._credentials.rotate_secrets
        # Gateway keys (pmsgate.gateway.gateway_keys) and their check (key_check).
        self.mint_key = self._keys.mint
        self.list_keys = self._keys.list
        self.revoke_key = self._keys.revoke
        self.set_key_scopes = self._keys.set_scopes
        self.rotate_key = self._keys.rotate
        self.authenticate = check.authenticate
        self.pending_key_uses = check.pending_uses
        self.flush_key_uses = check.flush_uses
        self.aclose = check.aclose
        # Status (pmsgate.gateway.facility_status).
        self.mark_error = statuses.mark_error
        self.mark_connected = statuses.mark_connected
        self.record_auth_attempt = statuses.record_auth_attempt

    def now(self) -> datetime:
        """The service's clock (expiry times are computed on it)."""
        return self._clock.now()

    def __repr__(self) -> str:
        return f"FacilityService({self._credentials!r})"

    # --- registration -------------------------------------------------------------------

    async def add(
        self,
        new: NewFacility,
        *,
        verify: Verifier | None = None,
        unverified: bool = False,
        actor: Actor = CLI_ACTOR,
    ) -> tuple[FacilityView, str]:
        """Register a facility and its first gateway key; the raw key is returned only here.

        With ``verify`` the credentials are tried upstream first (one token request, through
        the facility's limiter: :meth:`Gateway.add_facility`): a refusal or a failure stores
        nothing at all, and the facility starts ``connected``. With ``unverified`` it is
        stored ``unverified`` (an offline set-up; the gateway's first upstream answer settles
        it). With neither, the caller has proven the credentials itself (onboarding tries
        them with its own token request in an earlier step): ``connected``.
        """
        checked = _checked(new)
        hotel_id = checked.credentials.hotel_id
        exists = FacilityExists(f"A facility with hotel_id {hotel_id} already exists.")
        status: FacilityStatus = "unverified" if unverified and verify is None else "connected"
        if verify is not None:
            # Checked before the token request: an add that cannot succeed spends no permit.
            async with self._sessions() as session:
                if await FacilityRepository(session).exists(hotel_id):
                    raise exists
            await self._credentials.verify_new(verify, checked.credentials, checked.kind, actor)
        view, raw_key, prefix = await self._store(
            checked, status, exists, verified=verify is not None, actor=actor
        )
        log.info(
            "facility_added",
            hotel_id=hotel_id,
            kind=checked.kind,
            status=status,
            key_prefix=prefix,
            scopes=checked.scopes,
        )
        return view, raw_key

    async def _store(
        self,
        checked: _Registration,
        status: FacilityStatus,
        exists: FacilityExists,
        *,
        verified: bool,
        actor: Actor,
    ) -> tuple[FacilityView, str, str]:
        """The facility, its first key and their events in one transaction: view, key, prefix."""
        credentials = checked.credentials
        hotel_id = credentials.hotel_id
        now = self._clock.now()
        password_enc, api_key_enc = self._credentials.seal(credentials, checked.kind)
        async with self._sessions.begin() as session:
            facilities = FacilityRepository(session)
            if await facilities.exists(hotel_id):
                raise exists
            row = await self._insert(
                facilities,
                exists,
                Facility(
                    hotel_id=hotel_id,
                    username=credentials.username,
                    kind=checked.kind,
                    password_enc=password_enc,
                    api_key_enc=api_key_enc,
                    integration_id=checked.integration_id,
                    name=checked.name,
                    status=status,
                    status_changed_at=now,
                    last_error=None,
                    limit_per_minute=checked.limits.per_minute,
                    limit_per_hour=checked.limits.per_hour,
                    limit_per_day=checked.limits.per_day,
                    created_at=now,
                    updated_at=now,
                ),
            )
            # The change and its events commit together (or not at all).
            await self.audit.record_in(
                session,
                AuditAction.CREDENTIALS_STORED,
                actor=actor,
                subject=subject_of(hotel_id),
                details={
                    "kind": checked.kind,
                    "username": credentials.username,
                    "status": status,
                    "verified": verified,
                },
                facility_id=row.id,
            )
            _, minted = await self._keys.add_in(
                session,
                row.id,
                label="initial",
                scopes=checked.scopes,
                actor=actor,
                how="initial",
                now=now,
            )
            view = FacilityView.of(row)
        return view, minted.raw, minted.prefix

    @staticmethod
    async def _insert(
        facilities: FacilityRepository, exists: FacilityExists, row: Facility
    ) -> Facility:
        """Insert the facility; the unique hotel_id refusing it is the race with another writer."""
        try:
            return await facilities.add(row)
        except IntegrityError:
            raise exists from None

    async def list(self) -> FacilityViews:
        """Every registered facility."""
        async with self._sessions() as session:
            return [FacilityView.of(row) for row in await FacilityRepository(session).all()]

    async def get(self, hotel_id: str) -> FacilityView:
        """One facility by hotel_id."""
        async with self._sessions() as session:
            return FacilityView.of(await require_facility(session, hotel_id))

    async def set_limits(self, hotel_id: str, limits: Limits) -> FacilityView:
        """Change the facility's upstream budget."""
        async with self._sessions.begin() as session:
            row = await require_facility(session, hotel_id)
            row.limit_per_minute = limits.per_minute
            row.limit_per_hour = limits.per_hour
            row.limit_per_day = limits.per_day
            row.updated_at = self._clock.now()
            await session.flush()
            view = FacilityView.of(row)
        await self._check.changed()
        log.info("facility_limits_set", hotel_id=hotel_id, **limits.model_dump())
        return view
