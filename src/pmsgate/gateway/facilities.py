"""Facilities: registration, credentials (through the vault), gateway keys and status.

:class:`FacilityService` is the one place that turns plaintext credentials into
vault ciphertext and back; everything it returns (:class:`FacilityView`,
:class:`KeyView`) is free of secrets, except the raw gateway key handed back
once by :meth:`FacilityService.add` and :meth:`FacilityService.mint_key`.
Every change is one transaction: a failing call leaves nothing half-written.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

import structlog
from cachetools import TTLCache
from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

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
from pmsgate.gateway.keys import hash_key, is_well_formed, mint_key
from pmsgate.gateway.scopes import DEFAULT_SCOPES, TOOLS_READ, check_scopes, scope_missing
from pmsgate.gateway.upstream_errors import translate
from pmsgate.gateway.vault import Vault, facility_context
from pmsgate.integrations.kross.client import PmsClient, Token
from pmsgate.integrations.kross.credentials import Credentials
from pmsgate.integrations.kross.errors import AuthenticationFailed, InvalidRequest, PmsError
from pmsgate.storage.facilities import FacilityRepository, GatewayKeyRepository
from pmsgate.storage.models import Facility, GatewayKey

log = structlog.get_logger(__name__)

FacilityKind = Literal["partner", "own"]
FacilityStatus = Literal["connected", "error"]
KINDS: tuple[str, ...] = ("partner", "own")

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


def verification_error(error: PmsError) -> PmsgateError:
    """The caller-facing error when new credentials could not be verified upstream."""
    if isinstance(error, AuthenticationFailed | InvalidRequest):
        # A verdict on the credentials themselves: the caller must correct them (422).
        reason = ": ".join(part for part in (error.upstream_code, error.upstream_message) if part)
        detail = f" (booking system said {reason})" if reason else ""
        return InvalidInput(
            f"The booking system refused these credentials{detail}; nothing was changed.",
            code=error.code,
            hint=error.hint,
        )
    # No verdict (unreachable, rate-limited, misconfigured): the gateway's usual translation.
    translated = translate(error)
    return PmsgateError(
        f"{translated.message} The credentials could not be verified; nothing was changed.",
        code=translated.code,
        status=translated.status,
        hint=translated.hint,
        headers=translated.headers,
    )


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
    ) -> None:
        self._sessions = sessions
        self._vault = vault
        self._clock = clock
        self._partner_api_key = partner_api_key
        # Key hash → facility, for key_cache_s of the clock (0: every check reads the
        # database). It takes the database off a cached tool call's path; the price is that
        # another process's revocation or status change is seen here up to key_cache_s late.
        self._key_cache: TTLCache[str, KeyGrant] | None = None
        if key_cache_s > 0:
            self._key_cache = TTLCache(
                maxsize=KEY_CACHE_SIZE, ttl=key_cache_s, timer=self._clock_seconds
            )

        # Key id → its latest accepted call, not yet written: flush_key_uses writes them in
        # one transaction (the usage flush job's tick, and shutdown), never once per call.
        self._key_uses: dict[int, datetime] = {}

    def now(self) -> datetime:
        """The service's clock (expiry times are computed on it)."""
        return self._clock.now()

    def _clock_seconds(self) -> float:
        return self._clock.now().timestamp()

    def _forget_keys(self) -> None:
        """Drop every cached key check: a change here is seen at once by this process."""
        if self._key_cache is not None:
            self._key_cache.clear()

    def __repr__(self) -> str:
        return f"FacilityService(vault={self._vault!r})"

    # --- registration -------------------------------------------------------------------

    async def add(self, new: NewFacility) -> tuple[FacilityView, str]:
        """Register a facility and its first gateway key; the raw key is returned only here."""
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
        now = self._clock.now()
        minted = mint_key()
        async with self._sessions.begin() as session:
            facilities = FacilityRepository(session)
            exists = FacilityExists(f"A facility with hotel_id {hotel_id} already exists.")
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
                    status="connected",
                    last_error=None,
                    limit_per_minute=limits.per_minute,
                    limit_per_hour=limits.per_hour,
                    limit_per_day=limits.per_day,
                    created_at=now,
                    updated_at=now,
                ),
            )
            await GatewayKeyRepository(session).add(
                GatewayKey(
                    facility_id=row.id,
                    prefix=minted.prefix,
                    key_hash=minted.key_hash,
                    label="initial",
                    created_at=now,
                    scopes=scopes,
                )
            )
            view = FacilityView.of(row)
        log.info(
            "facility_added", hotel_id=hotel_id, kind=kind, key_prefix=minted.prefix, scopes=scopes
        )
        return view, minted.raw

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
        self._forget_keys()
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

    async def revoke_key(self, hotel_id: str, key_id: int) -> KeyView:
        """Revoke one key of the facility (revoking twice changes nothing)."""
        async with self._sessions.begin() as session:
            row = await self._require(session, hotel_id)
            keys = GatewayKeyRepository(session)
            key = await keys.get(row.id, key_id)
            if key is None:
                raise key_not_found(hotel_id, key_id)
            view = KeyView.of(await keys.revoke(key, self._clock.now()), row.hotel_id)
        self._forget_keys()
        log.info("gateway_key_revoked", hotel_id=hotel_id, key_id=key_id, key_prefix=view.prefix)
        return view

    async def set_key_scopes(
        self, hotel_id: str, key_id: int, scopes: Iterable[str], *, add: bool = False
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
            key.scopes = check_scopes([*key.scopes, *given]) if add else given
            await session.flush()
            view = KeyView.of(key, row.hotel_id, self._key_uses.get(key.id))
        self._forget_keys()
        log.info(
            "gateway_key_scopes_set",
            hotel_id=hotel_id,
            key_id=key_id,
            key_prefix=view.prefix,
            scopes=view.scopes,
        )
        return view

    async def rotate_key(
        self, hotel_id: str, key_id: int, grace: timedelta
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
        self._forget_keys()
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
    ) -> FacilityView:
        """Replace the credentials after ``verify`` accepted them; back to ``connected``.

        An own facility may omit ``api_key`` to keep its stored one (the usual case:
        only the password changed). Nothing is stored when validation or ``verify`` fails.
        """
        async with self._sessions() as session:
            row = await self._require(session, hotel_id)
        api_key = _present(api_key)
        if row.kind == "partner" and api_key is not None:
            _check_kind("partner", api_key)
        if row.kind == "own" and api_key is None:
            api_key = self._stored_api_key(row)
        credentials = self._credentials(row, username, password, api_key)
        _check_length(credentials.username, MAX_USERNAME, "username", "invalid_username")

        # Outside any transaction: no database lock is held while the booking system answers.
        try:
            await verify(credentials)
        except PmsError as error:
            log.info("facility_reconnect_refused", hotel_id=hotel_id, reason=error.code)
            raise verification_error(error) from None

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
        self._forget_keys()
        log.info("facility_reconnected", hotel_id=hotel_id)
        return view

    async def mark_error(self, hotel_id: str, reason: str) -> None:
        """Record that the facility's credentials stopped working (a safe reason, no secrets)."""
        await self._set_status(hotel_id, "error", reason.strip()[:MAX_REASON] or "error")
        log.warning("facility_marked_error", hotel_id=hotel_id, reason=reason[:MAX_REASON])

    async def mark_connected(self, hotel_id: str) -> None:
        """Record that the facility's credentials work."""
        await self._set_status(hotel_id, "connected", None)

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

    async def _set_status(self, hotel_id: str, status: str, last_error: str | None) -> None:
        """The facility's status and its kross integration row's, in one transaction (spec §3)."""
        now = self._clock.now()
        async with self._sessions.begin() as session:
            facilities = FacilityRepository(session)
            row = await self._require(session, hotel_id)
            row.status = status
            row.last_error = last_error
            row.updated_at = now
            await session.flush()
            await facilities.set_integration_status(row.id, status, last_error, now)
        self._forget_keys()


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
