"""Facilities as callers see them: the views, the inputs, the errors the facility services share.

A :class:`FacilityView` or :class:`KeyView` never holds a password, an api key or a token.
The column sizes of ``storage.models`` are checked here, so PostgreSQL never sees an
overflow. The services: :mod:`pmsgate.gateway.facility_service` (``FacilityService``:
registration, listing, limits; the one object callers hold),
:mod:`pmsgate.gateway.credentials` (verified, in the vault),
:mod:`pmsgate.gateway.gateway_keys` (mint, revoke, scopes, rotation, expiry),
:mod:`pmsgate.gateway.key_check` (a presented key, on every call) and
:mod:`pmsgate.gateway.facility_status` (connected, unverified, error).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.audit.actions import Actor
from pmsgate.audit.trail import AuditTrail
from pmsgate.clock import Clock
from pmsgate.errors import Conflict, InvalidInput, NotFound
from pmsgate.gateway.scopes import DEFAULT_SCOPES
from pmsgate.storage.facilities import FacilityRepository
from pmsgate.storage.models import Facility, GatewayKey

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

# Column sizes of storage.models: checked here so PostgreSQL never sees an overflow.
MAX_HOTEL_ID = 32
MAX_USERNAME = 64
MAX_INTEGRATION_ID = 64
MAX_NAME = 200
MAX_LABEL = 100
MAX_REASON = 500


def subject_of(hotel_id: str) -> str:
    """The audit subject naming a facility."""
    return f"facility:{hotel_id}"


class FacilityExists(Conflict):
    """A facility with this hotel_id is already registered."""

    code = "facility_exists"
    hint = "Use `pmsgate facilities show <hotel_id>`; reconnect it instead of adding it again."


class Limits(BaseModel):
    """A facility's upstream budget (docs/gateway.md defaults; negotiable per facility)."""

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
        """The view of a stored facility: its columns of the same names, and its limits."""
        limits = Limits(
            per_minute=row.limit_per_minute, per_hour=row.limit_per_hour, per_day=row.limit_per_day
        )
        columns = {name: getattr(row, name) for name in cls.model_fields if name != "limits"}
        return cls(limits=limits, **columns)


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


def key_not_found(hotel_id: str, key_id: int) -> NotFound:
    """The error for a key id the facility does not have."""
    return NotFound(
        f"Facility {hotel_id} has no gateway key with id {key_id}.",
        code="gateway_key_not_found",
        hint=f"List the facility's keys with `pmsgate facilities show {hotel_id}`.",
    )


def check_length(value: str, limit: int, field: str, code: str) -> None:
    """Refuse ``value`` when longer than its column (``code``: the error's code)."""
    if len(value) > limit:
        raise InvalidInput(
            f"{field} is longer than {limit} characters.",
            code=code,
            hint=f"Shorten {field} to at most {limit} characters.",
        )


async def require_facility(session: AsyncSession, hotel_id: str) -> Facility:
    """The stored facility of ``hotel_id``, or the caller-facing facility_not_found."""
    row = await FacilityRepository(session).by_hotel_id(hotel_id)
    if row is None:
        raise facility_not_found(hotel_id)
    return row


# A committed change of keys, limits or status: the key caches forget (gateway_keys).
Changed = Callable[[], Awaitable[None]]


class FacilityPart:
    """A part of the facility service (credentials, statuses, keys): the database it
    changes, its clock, the audit trail of its changes and ``changed``, awaited once a
    change is committed."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        clock: Clock,
        audit: AuditTrail,
        changed: Changed,
    ) -> None:
        self._sessions = sessions
        self._clock = clock
        self._audit = audit
        self._changed = changed

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
