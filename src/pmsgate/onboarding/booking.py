"""Every booking-system request of an onboarding run, through the gateway (docs/architecture.md).

The onboarding reaches the booking system only here, and only through the public
booking-system access of the process's :class:`~pmsgate.gateway.service.Gateway`
(``ctx.gateway``): :meth:`~pmsgate.gateway.service.Gateway.request_token`,
:meth:`~pmsgate.gateway.service.Gateway.adopt_token`,
:meth:`~pmsgate.gateway.service.Gateway.facility_token` and
:meth:`~pmsgate.gateway.service.Gateway.read`. Each request takes a permit of the
facility's budget, so onboarding and tool calls share one budget and the booking system
never sees more than it allows; there is one token per facility, shared with the gateway,
so a re-run opens no new upstream session. The requests:

- **verifying credentials** (step 1 with the customer file's credentials, and
  ``ensure_facility`` when it moves a facility to them): one ``auth/get-token``,
  after a permit — of the facility's budget once it is registered, else of the
  default budget under the key the facility will spend. The token is kept in the
  run's state (:attr:`RunState.verified`) and becomes the facility's token once the
  facility holds these credentials (:func:`adopt_verified`): a fresh onboarding
  opens one booking-system session, not one per step;
- **the facility's token** (step 1 for a registered facility): the gateway's;
- **the apartments** (steps 9, 10): one ``calendar/get-availability`` read through
  :meth:`Gateway.read` (permit, token, one token refresh on a rejected token).

A spent budget is the gateway's ``upstream_budget_exhausted`` error (its message
says which window, its hint when to retry), never a request the booking system
answers with 429.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import SecretStr

from pmsgate.errors import PmsgateError
from pmsgate.gateway.limiter import Priority
from pmsgate.gateway.verification import Verifier
from pmsgate.integrations.kross.client import Token
from pmsgate.integrations.kross.credentials import Credentials
from pmsgate.integrations.kross.dates import filter_availability
from pmsgate.integrations.kross.errors import AuthenticationFailed
from pmsgate.integrations.kross.models import AvailabilityNight, AvailabilityQuery
from pmsgate.onboarding.steps import OnboardingContext


class CredentialsRefused(Exception):
    """The booking system refused the facility's credentials (or the gateway holds it in error)."""


@dataclass(frozen=True)
class VerifiedToken:
    """The token the booking system issued for credentials this run verified."""

    credentials: Credentials
    token: Token
    obtained_at: datetime

    def proves(self, credentials: Credentials) -> bool:
        """Whether these are the credentials the token was issued for."""
        mine = self.credentials
        return (
            mine.hotel_id == credentials.hotel_id
            and mine.username == credentials.username
            and _same(mine.password, credentials.password)
            and _same(mine.api_key, credentials.api_key)
        )


def _same(a: SecretStr, b: SecretStr) -> bool:
    return secrets.compare_digest(a.get_secret_value(), b.get_secret_value())


async def verify_credentials(ctx: OnboardingContext, credentials: Credentials) -> Token:
    """A token for ``credentials`` (AuthenticationFailed when refused); once per run."""
    held = ctx.run.verified
    if held is not None and held.proves(credentials):
        return held.token
    obtained_at = ctx.clock.now()
    # A permit first: the facility's budget, or (not registered yet: step 1 comes before
    # step 3) the budget a new facility gets, under the key its calls will spend.
    token = await ctx.gateway.request_token(credentials)
    ctx.run.verified = VerifiedToken(credentials, token, obtained_at)
    return token


def verifier(ctx: OnboardingContext) -> Verifier:
    """A facility-service verifier: credentials are accepted when they get a token."""

    async def verify(credentials: Credentials) -> None:
        await verify_credentials(ctx, credentials)

    return verify


async def adopt_verified(ctx: OnboardingContext, hotel_id: str) -> None:
    """Make the token this run verified the facility's token (the facility holds its credentials).

    A token is a session upstream (50 at most per facility): the one that proved the
    credentials serves the gateway and the later steps instead of a second one.
    """
    held = ctx.run.verified
    if held is None or held.credentials.hotel_id != hotel_id:
        return
    stored = await ctx.facilities.credentials(hotel_id)
    if held.proves(stored):
        await ctx.gateway.adopt_token(hotel_id, held.token, held.obtained_at)
        ctx.run.verified = None  # done: the gateway holds it (a later call is a no-op)


async def facility_token(ctx: OnboardingContext, hotel_id: str) -> Token:
    """The registered facility's token: the gateway's (a new one only when none is valid)."""
    return await ctx.gateway.facility_token(hotel_id)


# --- the apartments --------------------------------------------------------------------------


@dataclass(frozen=True)
class BookingSystemApartments:
    """The facility's active apartments (room types) as the booking system lists them."""

    hotel_id: str
    room_types: dict[str, str]  # room type id -> name

    def evidence(self) -> dict[str, Any]:
        """JSON-ready: the count and the room types."""
        return {
            "source": "calendar/get-availability (one night)",
            "active_apartments": len(self.room_types),
            "room_types": sorted(self.room_types, key=room_type_order),
        }


def room_type_order(room_type: str) -> tuple[int, int, str]:
    """Numeric room type ids first, in numeric order."""
    return (0, int(room_type), "") if room_type.isdigit() else (1, 0, room_type)


async def booking_system_apartments(
    ctx: OnboardingContext, hotel_id: str
) -> BookingSystemApartments:
    """One availability read for today (once per run): the room types that have rooms.

    Raises :class:`CredentialsRefused` when the booking system refuses the facility's
    credentials, the gateway's errors (a spent budget) and the booking system's
    (:class:`~pmsgate.integrations.kross.errors.KrossError`) otherwise.
    """
    found = ctx.run.booking_system_apartments.get(hotel_id)
    if found is not None:
        return found
    today = ctx.clock.now().date()
    query = AvailabilityQuery(date_from=today, date_to=today)
    facility = await ctx.facilities.get(hotel_id)
    try:
        result = await ctx.gateway.read(
            facility, "calendar/get-availability", query.to_wire(), priority=Priority.INTERACTIVE
        )
    except AuthenticationFailed:
        raise CredentialsRefused(hotel_id) from None
    except PmsgateError as error:
        if error.code == AuthenticationFailed.code:  # the gateway's word for it
            raise CredentialsRefused(hotel_id) from None
        raise
    nights = filter_availability(result.many(AvailabilityNight), today, today).items
    room_types = {
        str(n.id_room_type): n.name_room_type or ""
        for n in nights
        if n.rooms_total is None or n.rooms_total > 0
    }
    found = BookingSystemApartments(hotel_id=hotel_id, room_types=room_types)
    ctx.run.booking_system_apartments[hotel_id] = found
    return found
