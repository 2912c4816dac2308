"""Facilities: registration, credentials (through the vault), gateway keys and status.

:class:`FacilityService` is the one place that turns plaintext credentials into
vault ciphertext and back; everything it returns (:class:`FacilityView`,
:class:`KeyView`) is free of secrets, except the raw gateway key handed back
once by :meth:`FacilityService.add` and :meth:`FacilityService.mint_key`.
Every change is one transaction: a failing call leaves nothing half-written.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, get_args

import structlog
from cachetools import TTLCache
from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.audit.actions import Actor, AuditAction, Outcome
from pmsgate.audit.trail import AuditTrail
from pmsgate.clock import Clock
from pmsgate.config import Settings
from pmsgate.errors import (
    ConfigurationError,
    Conflict,
    InvalidInput,
    NotFound,
    PmsgateError,
    Unauthorized,
)
from pmsgate.gateway.key_cache import KeyChanges
from pmsgate.gateway.keys import hash_key, is_well_formed, mint_key
from pmsgate.gateway.scopes import DEFAULT_SCOPES, TOOLS_READ, check_scopes, scope_missing
from pmsgate.gateway.upstream_errors import translate
from pmsgate.gateway.vault import Vault, VaultError, facility_context
from pmsgate.integrations.kross.client import PmsClient, Token
from pmsgate.integrations.kross.credentials import Credentials
from pmsgate.integrations.kross.errors import AuthenticationFailed, InvalidRequest, PmsError
from pmsgate.storage.facilities import FacilityRepository, GatewayKeyRepository
from pmsgate.storage.models import Facility, GatewayKey

log = structlog.get_logger(__name__)

FacilityKind = Literal["partner", "own"]
# connected: the booking system issued a token for the stored credentials.
# unverified: stored without trying them (`--no-verify`); used like connected until the first
# upstream answer settles it (a token: connected; a refusal: error).
# error: the booking system refused them; calls stop until a reconnect (docs/gateway.md).
FacilityStatus = Literal["connected", "unverified", "error"]
FACILITY_STATUSES: tuple[str, ...] = get_args(FacilityStatus)
KINDS: tuple[str, ...] = ("partner", "own")

# Who acts when a caller names no one: an operator's `pmsgate facilities …` command.
CLI_ACTOR = Actor.cli("pmsgate facilities")
# Status changes the gateway itself makes after an upstream answer.
GATEWAY_ACTOR = Actor.system("gateway")
# The audit trail a service built without one writes to (same database; retention unused here).
_DEFAULT_RETENTION_DAYS = 400

# Column sizes of storage.models: checked here so PostgreSQL never sees an overflow.
MAX_HOTEL_ID = 32
MAX_USERNAME = 64
MAX_INTEGRATION_ID = 64
MAX_NAME = 200
MAX_LABEL = 100
MAX_REASON = 500
# Gateway keys whose check is remembered (see FacilityService key_cache_s).
KEY_CACHE_SIZE = 10_000

# Stands in for the shared partner key while validating a partner facility's own fields:
# the partner key is configuration, checked when credentials are used.
_PLACEHOLDER_API_KEY = "0" * 32

_HEX32 = re.compile(r"^[0-9a-fA-F]{32}$")

Verifier = Callable[[Credentials], Awaitable[None]]

# Causes of status changes, as the audit trail records them (facility.status_changed).
CAUSE_REFUSED = "token refused by the booking system"
CAUSE_VERIFIED_ON_FIRST_USE = "verified on first use"
CAUSE_ACCEPTED_AGAIN = "token issued again"
CAUSE_RECONNECTED = "reconnected"


def integration_status(status: str) -> str:
    """The kross integration row's status for a facility status (the row knows no unverified).

    An unverified facility is used like a connected one, so its row says connected.
    """
    return "error" if status == "error" else "connected"


def subject_of(hotel_id: str) -> str:
    """The audit subject naming a facility."""
    return f"facility:{hotel_id}"


class FacilityExists(Conflict):
    """A facility with this hotel_id is already registered."""

    code = "facility_exists"
    hint = "Use `pmsgate facilities show <hotel_id>`; reconnect it instead of adding it again."


class Limits(BaseModel):
    """A facility's upstream budget (spec §8 defaults; negotiable per facility)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    per_minute: int = Field(default=10, description="Upstream calls per minute.")
    per_hour: int = Field(default=300, description="Upstream calls per hour.")
    per_day: int = Field(default=5000, description="Upstream calls per day.")

    @model_validator(mode="after")
    def _consistent(self) -> Limits:
        # Our own error (not ValueError) passes through pydantic, so callers see the code.
        if min(self.per_minute, self.per_hour, self.per_day) < 1:
            raise InvalidInput(
                "Every limit must be at least 1.",
                code="invalid_limits",
                hint="Give positive numbers of calls per minute, hour and day.",
            )
        if not self.per_minute <= self.per_hour <= self.per_day:
            raise InvalidInput(
                "Limits must satisfy per_minute ≤ per_hour ≤ per_day.",
                code="invalid_limits",
                hint="A window can never allow more calls than a longer one (default 10/300/5000).",
            )
        return self


class FacilityView(BaseModel):
    """A facility as callers see it: never a password, api key or token."""

    id: int
    hotel_id: str
    username: str
    kind: FacilityKind
    integration_id: str
    name: str
    status: FacilityStatus
    last_error: str | None
    last_auth_attempt_at: datetime | None
    limits: Limits
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, row: Facility) -> FacilityView:
        """The view of a stored facility."""
        return cls(
            id=row.id,
            hotel_id=row.hotel_id,
            username=row.username,
            kind=row.kind,
            integration_id=row.integration_id,
            name=row.name,
            status=row.status,
            last_error=row.last_error,
            last_auth_attempt_at=row.last_auth_attempt_at,
            limits=Limits(
                per_minute=row.limit_per_minute,
                per_hour=row.limit_per_hour,
                per_day=row.limit_per_day,
            ),
            created_at=row.created_at,
            updated_at=row.updated_at,
        )


class KeyView(BaseModel):
    """A gateway key as callers see it: its display prefix, never the key."""

    id: int
    facility_hotel_id: str
    prefix: str
    label: str
    created_at: datetime
    revoked_at: datetime | None
    scopes: list[str] = Field(description="What the key may do (docs/gateway.md, Scopes).")
    expires_at: datetime | None = Field(description="When the key stops working (None: never).")
    last_used_at: datetime | None = Field(
        description="Its last accepted call (recorded in batches: may lag by a minute)."
    )

    @classmethod
    def of(cls, row: GatewayKey, hotel_id: str, last_used_at: datetime | None = None) -> KeyView:
        """The view of a stored key of the facility ``hotel_id``.

        ``last_used_at``: a use seen by this process but not yet written (the later one wins).
        """
        stored = row.last_used_at
        if last_used_at is not None and (stored is None or last_used_at > stored):
            stored = last_used_at
        return cls(
            id=row.id,
            facility_hotel_id=hotel_id,
            prefix=row.prefix,
            label=row.label,
            created_at=row.created_at,
            revoked_at=row.revoked_at,
            scopes=list(row.scopes or []),
            expires_at=row.expires_at,
            last_used_at=stored,
        )

    def state(self, now: datetime) -> str:
        """``active``, ``expired`` or ``revoked``, as listings show it."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"


@dataclass(frozen=True)
class KeyGrant:
    """What a presented key may do: its facility, scopes and expiry (cached together)."""

    facility: FacilityView
    key_id: int
    prefix: str
    scopes: frozenset[str]
    expires_at: datetime | None


class NewFacility(BaseModel):
    """What registering a facility needs; also the admin API's request body."""

    # Numbers are accepted as text (a hotel_id is often typed as a JSON number);
    # inputs are never echoed in validation errors (the password is one of them).
    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True, hide_input_in_errors=True)

    hotel_id: str = Field(description="Numeric id of the facility in the booking system.")
    username: str = Field(description="The API user, `api` followed by digits (not an e-mail).")
    password: SecretStr = Field(description="The API user's password.")
    # Plain text, not a Literal: an unknown kind gets its own error code (invalid_kind).
    kind: str = Field(description="`partner` (shared gateway api key) or `own` (own api key).")
    api_key: SecretStr | None = Field(
        default=None, description="Own facilities only: their api key, 32 hexadecimal characters."
    )
    integration_id: str = Field(
        description="Id of the PMS integration row the facility belongs to."
    )
    name: str = Field(default="", description="A human-readable name.")
    limits: Limits = Field(default_factory=Limits, description="Upstream budget of the facility.")
    scopes: list[str] = Field(
        default_factory=lambda: list(DEFAULT_SCOPES),
        description="Scopes of the first gateway key (docs/gateway.md, Scopes); "
        "default tools:read.",
    )


FacilityViews = list[FacilityView]
KeyViews = list[KeyView]


def facility_not_found(hotel_id: str) -> NotFound:
    """The error for an unknown hotel_id."""
    return NotFound(
        f"No facility with hotel_id {hotel_id}.",
        code="facility_not_found",
        hint="List the registered facilities with `pmsgate facilities list`.",
    )


def _invalid_gateway_key() -> Unauthorized:
    return Unauthorized(
        "The gateway key is not valid.",
        code="invalid_gateway_key",
        hint="Send `Authorization: Bearer <gateway key>` with an unrevoked key of the facility.",
    )


def _expired_gateway_key(prefix: str) -> Unauthorized:
    return Unauthorized(
        f"The gateway key {prefix}… has expired.",
        code="gateway_key_expired",
        hint="Use the facility's newer key, or ask an admin for one "
        "(`pmsgate facilities rotate-key HOTEL_ID KEY_ID` or `mint-key`).",
    )


def key_not_found(hotel_id: str, key_id: int) -> NotFound:
    """The error for a key id the facility does not have."""
    return NotFound(
        f"Facility {hotel_id} has no gateway key with id {key_id}.",
        code="gateway_key_not_found",
        hint=f"List the facility's keys with `pmsgate facilities show {hotel_id}`.",
    )


def _check_expiry(expires_at: datetime | None, now: datetime) -> datetime | None:
    if expires_at is None:
        return None
    if expires_at.tzinfo is None:
        raise InvalidInput(
            "The expiry needs a time zone.",
            code="invalid_expiry",
            hint="Give an ISO 8601 time with its offset, e.g. 2027-01-31T00:00:00Z.",
        )
    if expires_at <= now:
        raise InvalidInput(
            "The expiry is in the past.",
            code="invalid_expiry",
            hint="Give a time in the future, or a duration such as --expires-in 30d.",
        )
    return expires_at


def _check_length(value: str, limit: int, field: str, code: str) -> None:
    if len(value) > limit:
        raise InvalidInput(
            f"{field} is longer than {limit} characters.",
            code=code,
            hint=f"Shorten {field} to at most {limit} characters.",
        )


def _present(secret: SecretStr | None) -> SecretStr | None:
    """None for a missing or blank secret (forms and JSON clients send "" for "none")."""
    if secret is None or not secret.get_secret_value().strip():
        return None
    return secret


def _check_kind(kind: str, api_key: SecretStr | None) -> FacilityKind:
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


def is_refusal(error: PmsError) -> bool:
    """True when the booking system gave a verdict on the credentials themselves."""
    return isinstance(error, AuthenticationFailed | InvalidRequest)


def verification_error(
    error: PmsError | PmsgateError,
    *,
    outcome: str = "nothing was changed",
    retry_hint: str | None = None,
) -> PmsgateError:
    """The caller-facing error when credentials could not be verified upstream.

    ``outcome`` says what was (not) stored; ``retry_hint`` replaces the hint when there was
    no verdict (timeout, 5xx, 429, the facility's budget spent): e.g. retry or --no-verify.
    """
    if isinstance(error, PmsError) and is_refusal(error):
        # A verdict on the credentials themselves: the caller must correct them (422).
        reason = ": ".join(part for part in (error.upstream_code, error.upstream_message) if part)
        detail = f" (booking system said {reason})" if reason else ""
        return InvalidInput(
            f"The booking system refused these credentials{detail}; {outcome}.",
            code=error.code,
            hint=error.hint,
        )
    # No verdict (unreachable, rate-limited, budget spent, misconfigured): the usual code.
    translated = translate(error) if isinstance(error, PmsError) else error
    return PmsgateError(
        f"{translated.message} The credentials could not be verified; {outcome}.",
        code=translated.code,
        status=translated.status,
        hint=retry_hint or translated.hint,
        headers=translated.headers,
    )


def _failure_details(error: PmsError | PmsgateError) -> dict[str, Any]:
    """What an audit event says of a failed verification: its code and kind, never a secret."""
    if isinstance(error, PmsError):
        cause = (
            "the booking system refused the credentials"
            if is_refusal(error)
            else "the booking system gave no verdict"
        )
        return {"cause": cause, "error": error.code, "upstream_code": error.upstream_code}
    return {"cause": "the credentials could not be tried", "error": error.code}


class FacilityService:
    """Registers facilities, keeps their credentials encrypted, issues and checks gateway keys."""

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
        self._vault = vault
        self._clock = clock
        self._partner_api_key = partner_api_key
        # Key, credential and status events (docs/audit.md); the container passes its trail.
        self.audit = (
            audit
            if audit is not None
            else AuditTrail(sessions, clock, retention_days=_DEFAULT_RETENTION_DAYS)
        )
        # Key hash → facility, for key_cache_s of the clock (0: every check reads the
        # database). It takes the database off a cached tool call's path. Another process's
        # revocation, scopes, expiry or status change reaches it through key_changes (Redis
        # pub/sub: at once); without Redis, up to key_cache_s late (pmsgate.gateway.key_cache).
        self._key_cache: TTLCache[str, KeyGrant] | None = None
        if key_cache_s > 0:
            self._key_cache = TTLCache(
                maxsize=KEY_CACHE_SIZE, ttl=key_cache_s, timer=self._clock_seconds
            )
        # Changes published and heard through Redis (pmsgate.gateway.key_cache); None alone.
        self.key_changes = key_changes
        if key_changes is not None:
            key_changes.on_change(self._forget_cached_keys)

        # Key id → its latest accepted call, not yet written: flush_key_uses writes them in
        # one transaction (the usage flush job's tick, and shutdown), never once per call.
        self._key_uses: dict[int, datetime] = {}

    def now(self) -> datetime:
        """The service's clock (expiry times are computed on it)."""
        return self._clock.now()

    def _clock_seconds(self) -> float:
        return self._clock.now().timestamp()

    def _forget_cached_keys(self) -> None:
        """Drop every remembered key check of this process."""
        if self._key_cache is not None:
            self._key_cache.clear()

    async def _forget_keys(self) -> None:
        """A change was committed: seen at once here, and published to every other process."""
        self._forget_cached_keys()
        if self.key_changes is not None:
            await self.key_changes.publish()

    def __repr__(self) -> str:
        return f"FacilityService(vault={self._vault!r})"

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
        kind = _check_kind(new.kind.strip().lower(), _present(new.api_key))
        credentials = Credentials(
            hotel_id=new.hotel_id,
            username=new.username,
            password=new.password,
            api_key=_present(new.api_key) if kind == "own" else _PLACEHOLDER_API_KEY,
        )
        _check_length(credentials.hotel_id, MAX_HOTEL_ID, "hotel_id", "invalid_hotel_id")
        _check_length(credentials.username, MAX_USERNAME, "username", "invalid_username")
        integration_id = new.integration_id.strip()
        if not integration_id:
            raise InvalidInput(
                "integration_id is required.",
                code="invalid_integration_id",
                hint="Give the id of the customer's booking-system PMS integration row "
                "(not the student_id).",
            )
        _check_length(
            integration_id, MAX_INTEGRATION_ID, "integration_id", "invalid_integration_id"
        )
        name = new.name.strip()
        _check_length(name, MAX_NAME, "name", "invalid_name")
        limits = new.limits
        scopes = check_scopes(new.scopes)

        hotel_id = credentials.hotel_id
        exists = FacilityExists(f"A facility with hotel_id {hotel_id} already exists.")
        status: FacilityStatus = "unverified" if unverified and verify is None else "connected"
        if verify is not None:
            # Checked before the token request: an add that cannot succeed spends no permit.
            async with self._sessions() as session:
                if await FacilityRepository(session).exists(hotel_id):
                    raise exists
            await self._verify_new(verify, credentials, kind, actor)
        now = self._clock.now()
        minted = mint_key()
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
                    kind=kind,
                    password_enc=self._vault.encrypt(
                        credentials.password.get_secret_value(),
                        context=facility_context(hotel_id, "password"),
                    ),
                    api_key_enc=(
                        self._vault.encrypt(
                            credentials.api_key.get_secret_value(),
                            context=facility_context(hotel_id, "api_key"),
                        )
                        if kind == "own"
                        else None
                    ),
                    integration_id=integration_id,
                    name=name,
                    status=status,
                    status_changed_at=now,
                    last_error=None,
                    limit_per_minute=limits.per_minute,
                    limit_per_hour=limits.per_hour,
                    limit_per_day=limits.per_day,
                    created_at=now,
                    updated_at=now,
                ),
            )
            key = await GatewayKeyRepository(session).add(
                GatewayKey(
                    facility_id=row.id,
                    prefix=minted.prefix,
                    key_hash=minted.key_hash,
                    label="initial",
                    created_at=now,
                    scopes=scopes,
                )
            )
            # The change and its events commit together (or not at all).
            await self.audit.record_in(
                session,
                AuditAction.CREDENTIALS_STORED,
                actor=actor,
                subject=subject_of(hotel_id),
                details={
                    "kind": kind,
                    "username": credentials.username,
                    "status": status,
                    "verified": verify is not None,
                },
                facility_id=row.id,
            )
            await self._record_key_minted(session, actor, row, key, "initial")
            view = FacilityView.of(row)
        log.info(
            "facility_added",
            hotel_id=hotel_id,
            kind=kind,
            status=status,
            key_prefix=minted.prefix,
            scopes=scopes,
        )
        return view, minted.raw

    async def _verify_new(
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
        except (PmsError, PmsgateError) as error:
            refused = isinstance(error, PmsError) and is_refusal(error)
            # No transaction of ours is open: the event is written in its own.
            await self.audit.record(
                AuditAction.CREDENTIALS_STORED,
                actor=actor,
                subject=subject_of(credentials.hotel_id),
                outcome=Outcome.REFUSED if refused else Outcome.FAILURE,
                details={**_failure_details(error), "stored": False},
            )
            log.info(
                "facility_add_unverified",
                hotel_id=credentials.hotel_id,
                reason=error.code,
                refused=refused,
            )
            raise verification_error(
                error,
                outcome="nothing was stored",
                retry_hint="Try again in a moment; or add it without trying the credentials "
                '(`pmsgate facilities add … --no-verify`, admin API `"verify": false`): it '
                "is stored as unverified until its first call settles it.",
            ) from None

    async def _record_key_minted(
        self, session: AsyncSession, actor: Actor, row: Facility, key: GatewayKey, how: str
    ) -> None:
        await self.audit.record_in(
            session,
            AuditAction.KEY_MINTED,
            actor=actor,
            subject=f"key:{key.prefix}",
            details={
                "key_id": key.id,
                "label": key.label,
                "scopes": list(key.scopes or []),
                "expires_at": key.expires_at,
                "how": how,
            },
            facility_id=row.id,
        )

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
            return FacilityView.of(await self._require(session, hotel_id))

    async def set_limits(self, hotel_id: str, limits: Limits) -> FacilityView:
        """Change the facility's upstream budget."""
        async with self._sessions.begin() as session:
            row = await self._require(session, hotel_id)
            row.limit_per_minute = limits.per_minute
            row.limit_per_hour = limits.per_hour
            row.limit_per_day = limits.per_day
            row.updated_at = self._clock.now()
            await session.flush()
            view = FacilityView.of(row)
        await self._forget_keys()
        log.info("facility_limits_set", hotel_id=hotel_id, **limits.model_dump())
        return view

    # --- gateway keys -------------------------------------------------------------------

    async def mint_key(
        self,
        hotel_id: str,
        label: str = "",
        *,
        scopes: Iterable[str] = DEFAULT_SCOPES,
        expires_at: datetime | None = None,
        actor: Actor = CLI_ACTOR,
    ) -> tuple[KeyView, str]:
        """A new gateway key for the facility; the raw key is returned only here.

        ``scopes`` default to ``tools:read``; unknown names are refused (422 invalid_scope).
        """
        label = label.strip()
        _check_length(label, MAX_LABEL, "label", "invalid_label")
        granted = check_scopes(scopes)
        now = self._clock.now()
        expires_at = _check_expiry(expires_at, now)
        minted = mint_key()
        async with self._sessions.begin() as session:
            row = await self._require(session, hotel_id)
            key = await GatewayKeyRepository(session).add(
                GatewayKey(
                    facility_id=row.id,
                    prefix=minted.prefix,
                    key_hash=minted.key_hash,
                    label=label,
                    created_at=now,
                    scopes=granted,
                    expires_at=expires_at,
                )
            )
            await self._record_key_minted(session, actor, row, key, "minted")
            view = KeyView.of(key, row.hotel_id)
        log.info(
            "gateway_key_minted",
            hotel_id=hotel_id,
            key_id=view.id,
            key_prefix=view.prefix,
            scopes=granted,
            expires_at=expires_at.isoformat() if expires_at else None,
        )
        return view, minted.raw

    async def list_keys(self, hotel_id: str) -> KeyViews:
        """Every key of the facility, revoked ones included."""
        async with self._sessions() as session:
            row = await self._require(session, hotel_id)
            keys = await GatewayKeyRepository(session).for_facility(row.id)
            return [KeyView.of(key, row.hotel_id, self._key_uses.get(key.id)) for key in keys]

    async def revoke_key(self, hotel_id: str, key_id: int, *, actor: Actor = CLI_ACTOR) -> KeyView:
        """Revoke one key of the facility (revoking twice changes nothing, records nothing)."""
        async with self._sessions.begin() as session:
            row = await self._require(session, hotel_id)
            keys = GatewayKeyRepository(session)
            key = await keys.get(row.id, key_id)
            if key is None:
                raise key_not_found(hotel_id, key_id)
            already = key.revoked_at is not None
            view = KeyView.of(await keys.revoke(key, self._clock.now()), row.hotel_id)
            if not already:
                await self.audit.record_in(
                    session,
                    AuditAction.KEY_REVOKED,
                    actor=actor,
                    subject=f"key:{view.prefix}",
                    details={"key_id": view.id, "label": view.label},
                    facility_id=row.id,
                )
        await self._forget_keys()
        log.info("gateway_key_revoked", hotel_id=hotel_id, key_id=key_id, key_prefix=view.prefix)
        return view

    async def set_key_scopes(
        self,
        hotel_id: str,
        key_id: int,
        scopes: Iterable[str],
        *,
        add: bool = False,
        actor: Actor = CLI_ACTOR,
    ) -> KeyView:
        """Replace a key's scopes (or, with ``add``, widen them); the key itself is unchanged.

        How an admin restores a key migrated to ``tools:read`` to full power (``all_scopes()``).
        """
        given = check_scopes(scopes)
        async with self._sessions.begin() as session:
            row = await self._require(session, hotel_id)
            key = await GatewayKeyRepository(session).get(row.id, key_id)
            if key is None:
                raise key_not_found(hotel_id, key_id)
            if key.revoked_at is not None:
                raise InvalidInput(
                    f"Gateway key {key_id} of facility {hotel_id} is revoked.",
                    code="gateway_key_revoked",
                    hint="A revoked key stays revoked: mint a new one with the scopes needed.",
                )
            before = list(key.scopes or [])
            key.scopes = check_scopes([*key.scopes, *given]) if add else given
            await session.flush()
            view = KeyView.of(key, row.hotel_id, self._key_uses.get(key.id))
            if view.scopes != before:
                await self.audit.record_in(
                    session,
                    AuditAction.KEY_SCOPES_CHANGED,
                    actor=actor,
                    subject=f"key:{view.prefix}",
                    details={"key_id": view.id, "from": before, "to": view.scopes},
                    facility_id=row.id,
                )
        await self._forget_keys()
        log.info(
            "gateway_key_scopes_set",
            hotel_id=hotel_id,
            key_id=key_id,
            key_prefix=view.prefix,
            scopes=view.scopes,
        )
        return view

    async def rotate_key(
        self, hotel_id: str, key_id: int, grace: timedelta, *, actor: Actor = CLI_ACTOR
    ) -> tuple[KeyView, KeyView, str]:
        """A new key with the old one's scopes; the old one expires after ``grace``.

        Both work during the grace, so a caller can switch without an outage. Returns the
        old key's view, the new key's and the new raw key (shown only here). An old key
        that already expires sooner keeps its earlier expiry.
        """
        if grace < timedelta(0):
            raise InvalidInput(
                "The grace period cannot be negative.",
                code="invalid_duration",
                hint="Give --grace 0m to end the old key at once, or e.g. --grace 7d.",
            )
        now = self._clock.now()
        minted = mint_key()
        async with self._sessions.begin() as session:
            row = await self._require(session, hotel_id)
            keys = GatewayKeyRepository(session)
            old = await keys.get(row.id, key_id)
            if old is None:
                raise key_not_found(hotel_id, key_id)
            if old.revoked_at is not None or (old.expires_at is not None and old.expires_at <= now):
                raise InvalidInput(
                    f"Gateway key {key_id} of facility {hotel_id} no longer works.",
                    code="gateway_key_inactive",
                    hint="Rotate a working key, or mint a new one with `pmsgate facilities "
                    "mint-key`.",
                )
            ends = now + grace
            if old.expires_at is None or old.expires_at > ends:
                old.expires_at = ends
            new = await keys.add(
                GatewayKey(
                    facility_id=row.id,
                    prefix=minted.prefix,
                    key_hash=minted.key_hash,
                    label=old.label,
                    created_at=now,
                    scopes=list(old.scopes),
                )
            )
            old_view = KeyView.of(old, row.hotel_id, self._key_uses.get(old.id))
            new_view = KeyView.of(new, row.hotel_id)
            await self.audit.record_in(
                session,
                AuditAction.KEY_ROTATED,
                actor=actor,
                subject=f"key:{old_view.prefix}",
                details={
                    "key_id": old_view.id,
                    "new_key_id": new_view.id,
                    "new_key_prefix": new_view.prefix,
                    "old_key_expires_at": old_view.expires_at,
                    "scopes": new_view.scopes,
                },
                facility_id=row.id,
            )
        await self._forget_keys()
        log.info(
            "gateway_key_rotated",
            hotel_id=hotel_id,
            key_id=key_id,
            key_prefix=old_view.prefix,
            new_key_id=new_view.id,
            new_key_prefix=new_view.prefix,
            old_expires_at=old_view.expires_at.isoformat() if old_view.expires_at else None,
        )
        return old_view, new_view, minted.raw

    async def authenticate(self, raw_key: str, scope: str = TOOLS_READ) -> FacilityView:
        """The facility of a presented key that holds ``scope``; anything else is refused.

        Unknown or revoked keys: 401 invalid_gateway_key; expired: 401 gateway_key_expired;
        a key without ``scope``: 403 scope_missing. Checked before anything is sent, a
        permit taken or an idempotency record written. The default scope is the least one.
        """
        grant = await self._grant(raw_key)
        now = self._clock.now()
        # Checked on every call, cached or not: an expiry takes effect to the second.
        if grant.expires_at is not None and grant.expires_at <= now:
            raise _expired_gateway_key(grant.prefix)
        if scope not in grant.scopes:
            raise scope_missing(scope, grant.prefix)
        self._key_uses[grant.key_id] = now
        return grant.facility

    async def _grant(self, raw_key: str) -> KeyGrant:
        # A malformed key is refused before the database: nothing to look up.
        if not is_well_formed(raw_key):
            raise _invalid_gateway_key()
        key_hash = hash_key(raw_key)
        if self._key_cache is not None and (cached := self._key_cache.get(key_hash)):
            return cached
        async with self._sessions() as session:
            found = await GatewayKeyRepository(session).unrevoked_with_facility(key_hash)
        if found is None:
            # Refusals are not cached: a key minted a moment ago works at once.
            raise _invalid_gateway_key()
        key, row = found
        grant = KeyGrant(
            facility=FacilityView.of(row),
            key_id=key.id,
            prefix=key.prefix,
            scopes=frozenset(key.scopes or ()),
            expires_at=key.expires_at,
        )
        if self._key_cache is not None:
            self._key_cache[key_hash] = grant
        return grant

    def pending_key_uses(self) -> dict[int, datetime]:
        """Key uses seen since the last flush (key id → latest call)."""
        return dict(self._key_uses)

    async def flush_key_uses(self) -> int:
        """Write the key uses seen since the last flush, in one transaction; how many keys.

        Runs on the usage flush job's tick and at shutdown. A failed write puts the uses
        back, so the next flush writes them (with whatever came since).
        """
        uses, self._key_uses = self._key_uses, {}
        if not uses:
            return 0
        try:
            async with self._sessions.begin() as session:
                await GatewayKeyRepository(session).record_last_use(uses)
        except BaseException:
            for key_id, when in uses.items():
                later = self._key_uses.get(key_id)
                self._key_uses[key_id] = when if later is None or later < when else later
            raise
        return len(uses)

    async def aclose(self) -> None:
        """Flush the key uses still in memory (shutdown); a failure is logged, not raised."""
        try:
            await self.flush_key_uses()
        except Exception as error:  # shutdown goes on: at worst a last use is lost
            log.warning("key_uses_not_flushed", error=type(error).__name__)

    # --- credentials and status ---------------------------------------------------------

    async def credentials(self, hotel_id: str) -> Credentials:
        """The facility's decrypted booking-system credentials (for the PMS client only)."""
        async with self._sessions() as session:
            row = await self._require(session, hotel_id)
        password = SecretStr(
            self._vault.decrypt(
                row.password_enc, context=facility_context(row.hotel_id, "password")
            )
        )
        return self._credentials(row, row.username, password, self._stored_api_key(row))

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
            row = await self._require(session, hotel_id)
        row_status = row.status
        api_key = _present(api_key)
        if row.kind == "partner" and api_key is not None:
            _check_kind("partner", api_key)
        if row.kind == "own" and api_key is None:
            api_key = self._stored_api_key(row)
        credentials = self._credentials(row, username, password, api_key)
        _check_length(credentials.username, MAX_USERNAME, "username", "invalid_username")
        action = (
            AuditAction.CREDENTIALS_CHANGED
            if self._differs(row, credentials)
            else AuditAction.CREDENTIALS_RECONNECTED
        )

        # Outside any transaction: no database lock is held while the booking system answers.
        try:
            await verify(credentials)
        except (PmsError, PmsgateError) as error:
            refused = isinstance(error, PmsError) and is_refusal(error)
            log.info("facility_reconnect_refused", hotel_id=hotel_id, reason=error.code)
            await self.audit.record(
                action,
                actor=actor,
                subject=subject_of(row.hotel_id),
                outcome=Outcome.REFUSED if refused else Outcome.FAILURE,
                details={**_failure_details(error), "kept": "the previous credentials"},
                facility_id=row.id,
            )
            if isinstance(error, PmsError):
                raise verification_error(error) from None
            raise verification_error(
                error, retry_hint="Try again in a moment: nothing was changed."
            ) from None

        now = self._clock.now()
        values: dict[str, Any] = {
            "username": credentials.username,
            "password_enc": self._vault.encrypt(
                credentials.password.get_secret_value(),
                context=facility_context(row.hotel_id, "password"),
            ),
            "status": "connected",
            "last_error": None,
            "updated_at": now,
        }
        if row_status != "connected":
            values["status_changed_at"] = now  # the incident (if any) ends here
        if row.kind == "own":
            values["api_key_enc"] = self._vault.encrypt(
                credentials.api_key.get_secret_value(),
                context=facility_context(row.hotel_id, "api_key"),
            )
        async with self._sessions.begin() as session:
            facilities = FacilityRepository(session)
            if not await facilities.update(row.hotel_id, **values):
                raise facility_not_found(hotel_id)
            # The old token belongs to the old credentials; the token manager fetches a new one.
            await facilities.delete_token(row.id)
            await facilities.set_integration_status(row.id, "connected", None, now)
            view = FacilityView.of(await self._require(session, row.hotel_id))
            await self.audit.record_in(
                session,
                action,
                actor=actor,
                subject=subject_of(row.hotel_id),
                details={"kind": row.kind, "username": credentials.username},
                facility_id=row.id,
            )
            if row_status != "connected":
                await self._record_status(
                    session, actor, row.id, row.hotel_id, row_status, "connected", CAUSE_RECONNECTED
                )
        await self._forget_keys()
        log.info("facility_reconnected", hotel_id=hotel_id)
        return view

    async def mark_error(
        self,
        hotel_id: str,
        reason: str,
        *,
        cause: str = CAUSE_REFUSED,
        actor: Actor = GATEWAY_ACTOR,
    ) -> None:
        """Record that the facility's credentials stopped working (a safe reason, no secrets)."""
        await self._set_status(
            hotel_id, "error", reason.strip()[:MAX_REASON] or "error", cause=cause, actor=actor
        )
        log.warning("facility_marked_error", hotel_id=hotel_id, reason=reason[:MAX_REASON])

    async def mark_connected(
        self, hotel_id: str, *, cause: str = CAUSE_ACCEPTED_AGAIN, actor: Actor = GATEWAY_ACTOR
    ) -> None:
        """Record that the facility's credentials work (an unverified facility: now proven)."""
        await self._set_status(hotel_id, "connected", None, cause=cause, actor=actor)

    async def record_auth_attempt(self, hotel_id: str) -> None:
        """Remember when the gateway last tried to authenticate the facility upstream."""
        async with self._sessions.begin() as session:
            if not await FacilityRepository(session).update(
                hotel_id, last_auth_attempt_at=self._clock.now()
            ):
                raise facility_not_found(hotel_id)

    # --- key rotation -------------------------------------------------------------------

    async def rotate_secrets(self) -> int:
        """Re-encrypt every stored secret not under the primary key; how many changed."""
        changed = 0
        # One transaction: a value that no configured key opens aborts the whole rotation.
        async with self._sessions.begin() as session:
            facilities = FacilityRepository(session)
            for row in await facilities.all():
                if self._vault.needs_rotation(row.password_enc):
                    row.password_enc = self._vault.rotate(
                        row.password_enc, context=facility_context(row.hotel_id, "password")
                    )
                    changed += 1
                if row.api_key_enc is not None and self._vault.needs_rotation(row.api_key_enc):
                    row.api_key_enc = self._vault.rotate(
                        row.api_key_enc, context=facility_context(row.hotel_id, "api_key")
                    )
                    changed += 1
            for token, hotel_id in await facilities.tokens_with_hotel_ids():
                if self._vault.needs_rotation(token.token_enc):
                    token.token_enc = self._vault.rotate(
                        token.token_enc, context=facility_context(hotel_id, "token")
                    )
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

    def _credentials(
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
            api_key=_PLACEHOLDER_API_KEY,
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

    async def _require(self, session: AsyncSession, hotel_id: str) -> Facility:
        row = await FacilityRepository(session).by_hotel_id(hotel_id)
        if row is None:
            raise facility_not_found(hotel_id)
        return row

    async def _set_status(
        self, hotel_id: str, status: str, last_error: str | None, *, cause: str, actor: Actor
    ) -> None:
        """The facility's status and its kross integration row's, in one transaction (spec §3).

        A real change is recorded (``facility.status_changed``, from → to, with its cause) in
        the same transaction.
        """
        now = self._clock.now()
        async with self._sessions.begin() as session:
            facilities = FacilityRepository(session)
            row = await self._require(session, hotel_id)
            before = row.status
            row.status = status
            row.last_error = last_error
            row.updated_at = now
            if before != status:
                row.status_changed_at = now  # names the incident when it is a move to error
            await session.flush()
            await facilities.set_integration_status(
                row.id, integration_status(status), last_error, now
            )
            if before != status:
                await self._record_status(
                    session, actor, row.id, row.hotel_id, before, status, cause, last_error
                )
        await self._forget_keys()

    async def _record_status(
        self,
        session: AsyncSession,
        actor: Actor,
        facility_id: int,
        hotel_id: str,
        before: str,
        after: str,
        cause: str,
        reason: str | None = None,
    ) -> None:
        details: dict[str, Any] = {"from": before, "to": after, "cause": cause}
        if reason:
            details["reason"] = reason
        await self.audit.record_in(
            session,
            AuditAction.FACILITY_STATUS_CHANGED,
            actor=actor,
            subject=subject_of(hotel_id),
            outcome=Outcome.FAILURE if after == "error" else Outcome.SUCCESS,
            details=details,
            facility_id=facility_id,
        )

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


def pms_verifier(
    client: PmsClient,
    permit: Callable[[str], Awaitable[None]] | None = None,
    keep: Callable[[Token], None] | None = None,
) -> Verifier:
    """A verifier that accepts credentials when the booking system issues a token for them.

    ``permit(hotel_id)`` runs before the token request (the gateway's ``token_permit``):
    trying credentials spends the facility's upstream budget like any other call, and its
    error (429 ``upstream_budget_exhausted``) passes through when the budget is spent.
    ``keep`` receives the token issued, so that it can serve as the facility's new token
    (each token is a session upstream, 50 at most per facility) instead of being dropped.
    """

    async def verify(credentials: Credentials) -> None:
        if permit is not None:
            await permit(credentials.hotel_id)
        token = await client.get_token(credentials)
        if keep is not None:
            keep(token)

    return verify


def vault_from_settings(settings: Settings) -> Vault:
    """The vault of PMSGATE_SECRET_KEYS (a clear configuration error when unset)."""
    spec = settings.secret_keys.get_secret_value() if settings.secret_keys else ""
    return Vault(spec)
