"""The emulator's state and semantics, one tenant per facility (hotel_id).

The store knows nothing about HTTP: it takes typed arguments, changes state and
raises :class:`~pmsgate.sandbox.kross.errors.KrossError` for every refusal. All time
comes from the injected clock, so token expiry and rate-limit windows move only
when a test advances a :class:`~pmsgate.clock.ManualClock`.
"""

from __future__ import annotations

import random
import secrets
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from math import ceil
from typing import Any, Literal, TypeVar

from pmsgate.clock import Clock, ManualClock, SystemClock
from pmsgate.sandbox.core import set_given
from pmsgate.sandbox.kross import errors
from pmsgate.sandbox.kross.errors import KrossError
from pmsgate.sandbox.kross.records import (
    Apartment,
    Facility,
    Guest,
    NewGuest,
    Payment,
    Picture,
    Reservation,
)
from pmsgate.sandbox.kross.seed import (
    FACILITY_COUNT,
    SANDBOX_PARTNER_API_KEY,
    build_facilities,
    build_history,
    next_ids,
)

TOKEN_TTL = timedelta(days=7)
MAX_SESSIONS = 50
MAX_AVAILABILITY_DAYS = 366
MAX_PICTURES = 10
MAX_PICTURE_BYTES = 5 * 1024 * 1024
MAX_HISTORY_PER_CALL = 20_000
PICTURE_TYPES = frozenset({"image/jpeg", "image/png", "application/pdf"})
WRITE_OPERATIONS = frozenset(
    {"reservations/save", "reservations/add-payment", "check-in-guest", "save-guest-pictures"}
)

TokenLocation = Literal["data", "top", "nested"]
GuestPortalShape = Literal["block", "link", "absent"]
LoginRefusal = Literal["401", "400", "403", "200"]
TokenRejection = Literal["401", "200", "200-401"]
UnknownOperationAnswer = Literal["named", "404", "plain"]
TimeoutMode = Literal["hang", "disconnect"]


@dataclass
class RateLimits:
    """A facility's request allowance over the three sliding windows."""

    per_minute: int = 10
    per_hour: int = 300
    per_day: int = 5000

    def windows(self) -> tuple[tuple[int, int], ...]:
        """(window length in seconds, allowed requests) pairs."""
        return ((60, self.per_minute), (3600, self.per_hour), (86400, self.per_day))


class RequestLog:
    """Timestamps of a facility's admitted requests over the last day."""

    def __init__(self) -> None:
        self._times: list[float] = []

    def wait_seconds(self, now: float, limits: RateLimits) -> int | None:
        """Seconds until one more request fits every window, or None if it fits now."""
        self._times = self._times[bisect_right(self._times, now - 86400) :]
        waits: list[float] = []
        for window, limit in limits.windows():
            in_window = len(self._times) - bisect_right(self._times, now - window)
            if in_window >= limit:
                # One more fits once the limit-th most recent request has left the window.
                waits.append(self._times[-limit] + window - now)
        return max(1, ceil(max(waits))) if waits else None

    def record(self, now: float) -> None:
        """Count one admitted request."""
        self._times.append(now)


@dataclass
class Tenant:
    """Everything the emulator keeps for one facility."""

    facility: Facility
    tokens: dict[str, datetime] = field(default_factory=dict)  # token -> expiry (UTC)
    limits: RateLimits = field(default_factory=RateLimits)
    requests: RequestLog = field(default_factory=RequestLog)


@dataclass
class Faults:
    """Injected misbehaviour; all off by default."""

    latency_s: float = 0.0
    error_rate: float = 0.0
    commit_then_timeout: int = 0  # how many of the next writes commit and then time out
    lost_then_timeout: int = 0  # how many of the next writes are lost (not applied), then time out
    timeout_mode: TimeoutMode = "hang"
    hang_s: float = 120.0


@dataclass
class SandboxConfig:
    """Switches for every point on which public sources disagree (docs/kross-api.md, "Variants").

    The defaults are the emulator's historical behaviour; each switch makes it answer as one
    other public source sees the real system, so a client can be tested against all of them.
    """

    # docs/requirements.md R8.1: the server ignores every date filter of reservations/get-list
    # (stay and booking dates alike) and answers all reservations.
    ignore_date_filters: bool = True
    # docs/kross-api.md: docs/requirements.md R3.1 says data.auth_token, most clients read a
    # top-level auth_token, one older client reads data.data.auth_token.
    token_location: TokenLocation = "data"
    # docs/kross-api.md: no public source shows the guest_portal block; an older scraper saw a
    # plain guest_portal_link ("link"); a server may have neither ("absent").
    guest_portal_shape: GuestPortalShape = "block"
    # docs/kross-api.md: some servers ignore offset and always answer from the first row.
    ignore_offset: bool = False
    # docs/kross-api.md: some list answers carry no total_count (and then no count either).
    omit_total_count: bool = False
    # Public servers cap pages silently: limit above this is lowered, the answer's limit says so.
    max_page_size: int | None = None
    # docs/kross-api.md: a refused login is seen as 401, as 400/403 with an error_code, and as
    # 200 with an error_code; the non-401 ones use other codes than AUTH_FAILED
    # (errors.LOGIN_REFUSALS).
    login_refusal: LoginRefusal = "401"
    # docs/kross-api.md: an expired token is seen as 401 and as 200 with an error_code; public
    # client code shows that family as {error_code: 401, error_message, ruid} ("200-401").
    token_rejection: TokenRejection = "401"
    # docs/kross-api.md: clients call the ungrouped operations of docs/requirements.md R5.1
    # under reservations/; True answers only that spelling, False answers both.
    grouped_paths: bool = False
    # How a path that names no operation is answered: 404 OPERATION_NOT_FOUND ("named"), a JSON
    # 404 whose error_code is the number 404 ("404"), or a plain-text 404 ("plain").
    unknown_operation: UnknownOperationAnswer = "named"


@dataclass
class Stats:
    """What the emulator has seen since the last reset."""

    requests_total: int = 0
    requests_by_operation: Counter[str] = field(default_factory=Counter)
    requests_by_hotel: Counter[str] = field(default_factory=Counter)
    user_agent_blocked: int = 0
    tokens_issued: Counter[str] = field(default_factory=Counter)
    rate_limited: Counter[str] = field(default_factory=Counter)
    sessions_refused: Counter[str] = field(default_factory=Counter)
    injected_errors: int = 0
    commit_then_timeout_fired: int = 0
    lost_then_timeout_fired: int = 0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view."""
        return {
            "requests": {
                "total": self.requests_total,
                "by_operation": dict(self.requests_by_operation),
                "by_hotel": dict(self.requests_by_hotel),
            },
            "user_agent_blocked": self.user_agent_blocked,
            "tokens_issued": {
                "total": self.tokens_issued.total(),
                "by_hotel": dict(self.tokens_issued),
            },
            "rate_limited": {
                "total": self.rate_limited.total(),
                "by_hotel": dict(self.rate_limited),
            },
            "sessions_refused": {
                "total": self.sessions_refused.total(),
                "by_hotel": dict(self.sessions_refused),
            },
            "injected_errors": self.injected_errors,
            "commit_then_timeout_fired": self.commit_then_timeout_fired,
            "lost_then_timeout_fired": self.lost_then_timeout_fired,
        }


@dataclass(frozen=True)
class IssuedToken:
    """A bearer token and when it stops working."""

    value: str
    hotel_id: str
    expires_at: datetime
    expires_in_s: int


@dataclass(frozen=True)
class AvailabilityNight:
    """One apartment (room type) on one night."""

    night: date
    apartment: Apartment
    rooms_total: int
    rooms_available: int
    price: float


@dataclass(frozen=True)
class ReservationPage:
    """One page of reservations/get-list, with the paging the server actually applied."""

    rows: list[Reservation]
    total: int
    limit: int
    offset: int


@dataclass
class ReservationFilter:
    """Filters of reservations/get-list, already parsed."""

    id_reservation: int | None = None
    id_room: int | None = None
    id_property: int | None = None
    statuses: frozenset[str] | None = None
    date_reservation_from: datetime | None = None
    date_reservation_to: datetime | None = None
    arrival_from: date | None = None
    arrival_to: date | None = None
    departure_from: date | None = None
    departure_to: date | None = None
    in_house: bool = False
    on_date: date | None = None
    limit: int = 100
    offset: int = 0


@dataclass(frozen=True)
class PictureUpload:
    """A decoded picture to store."""

    filename: str
    content_type: str
    data: bytes


class KrossStore:
    """State and semantics of the booking-system emulator."""

    def __init__(
        self,
        seed: int = 1,
        clock: Clock | None = None,
        partner_api_key: str = SANDBOX_PARTNER_API_KEY,
        facility_count: int = FACILITY_COUNT,
    ) -> None:
        self.seed = seed
        self.facility_count = facility_count
        self.clock: Clock = clock or SystemClock()
        self.partner_api_key = partner_api_key
        self.reset()

    def reset(self) -> None:
        """Back to the seed data as of the clock's time: no tokens, faults, stats or changes."""
        facilities = build_facilities(self.seed, self.clock.now(), self.facility_count)
        self._tenants: dict[str, Tenant] = {f.hotel_id: Tenant(f) for f in facilities}
        self._next_id = next_ids(facilities)
        self.faults = Faults()
        self.config = SandboxConfig()
        self.stats = Stats()
        # Seeded so that a given error rate fails the same requests on every run.
        self._fault_rng = random.Random(self.seed)

    # --- facilities ------------------------------------------------------------------------

    def facilities(self) -> list[Facility]:
        """All facilities, in seed order."""
        return [t.facility for t in self._tenants.values()]

    def facility(self, hotel_id: str) -> Facility:
        """One facility, or NOT_FOUND."""
        return self._tenant(hotel_id).facility

    def api_key_of(self, facility: Facility) -> str:
        """The api_key a facility authenticates with (the shared one for partners)."""
        return facility.api_key if facility.api_key is not None else self.partner_api_key

    def facility_summaries(self) -> list[dict[str, Any]]:
        """Credentials and apartments of every facility, for test setups and the CLI."""
        return [
            {
                "hotel_id": f.hotel_id,
                "id_property": f.id_property,
                "name": f.name,
                "username": f.username,
                "password": f.password,
                "kind": f.kind,
                "api_key": self.api_key_of(f),
                "apartments": [
                    {
                        "id_room_type": a.id_room_type,
                        "name": a.name,
                        "rooms": [{"id_room": r.id_room, "name": r.name} for r in a.rooms],
                    }
                    for a in f.apartments.values()
                ],
            }
            for f in self.facilities()
        ]

    def add_facility(self, hotel_id: str, name: str, username: str, password: str) -> Facility:
        """Add a partner facility without apartments (``pmsgate demo --serve --customers``)."""
        if hotel_id in self._tenants:
            raise ValueError(f"facility {hotel_id} already exists")
        facility = Facility(
            hotel_id=hotel_id,
            id_property=len(self._tenants) + 1,
            name=name,
            username=username,
            password=password,
            kind="partner",
            api_key=None,
            apartments={},
            reservations={},
        )
        self._tenants[hotel_id] = Tenant(facility)
        return facility

    def has_facility(self, hotel_id: str) -> bool:
        """Whether a hotel_id exists (requests naming it can be attributed)."""
        return hotel_id in self._tenants

    # --- request accounting ----------------------------------------------------------------

    def record_request(self, operation: str | None) -> None:
        """Count a /v5 request that passed the User-Agent check (operation None = unknown)."""
        self.stats.requests_total += 1
        if operation is not None:
            self.stats.requests_by_operation[operation] += 1

    def record_user_agent_block(self) -> None:
        """Count a request refused for its User-Agent."""
        self.stats.user_agent_blocked += 1

    def admit(self, hotel_id: str) -> None:
        """Count a request attributed to a facility, or refuse it with RATE_LIMITED."""
        tenant = self._tenant(hotel_id)
        self.stats.requests_by_hotel[hotel_id] += 1
        now = self.clock.now().timestamp()
        wait = tenant.requests.wait_seconds(now, tenant.limits)
        if wait is not None:
            # Refused requests are not logged: otherwise Retry-After would never come true.
            self.stats.rate_limited[hotel_id] += 1
            raise KrossError(errors.RATE_LIMITED, headers={"Retry-After": str(wait)})
        tenant.requests.record(now)

    def draw_server_error(self) -> bool:
        """Whether the error-rate fault picks this request for a 503."""
        if self.faults.error_rate > 0 and self._fault_rng.random() < self.faults.error_rate:
            self.stats.injected_errors += 1
            return True
        return False

    def take_write_fault(self) -> TimeoutMode | None:
        """After a committed write: the timeout to simulate, if commit-then-timeout is armed."""
        if self.faults.commit_then_timeout <= 0:
            return None
        self.faults.commit_then_timeout -= 1
        self.stats.commit_then_timeout_fired += 1
        return self.faults.timeout_mode

    def take_lost_write(self) -> TimeoutMode | None:
        """Before a write is applied: the timeout to simulate, if lost-then-timeout is armed."""
        if self.faults.lost_then_timeout <= 0:
            return None
        self.faults.lost_then_timeout -= 1
        self.stats.lost_then_timeout_fired += 1
        return self.faults.timeout_mode

    # --- tokens ----------------------------------------------------------------------------

    def issue_token(self, hotel_id: str, username: str, password: str, api_key: str) -> IssuedToken:
        """auth/get-token: a 7-day token; wrong credentials are refused as login_refusal says."""
        tenant = self._tenants.get(hotel_id)
        if tenant is None or (username, password, api_key) != (
            tenant.facility.username,
            tenant.facility.password,
            self.api_key_of(tenant.facility),
        ):
            raise KrossError(errors.LOGIN_REFUSALS[self.config.login_refusal])
        now = self.clock.now()
        self._drop_expired(tenant, now)
        if len(tenant.tokens) >= MAX_SESSIONS:
            self.stats.sessions_refused[hotel_id] += 1
            raise KrossError(errors.TOO_MANY_SESSIONS)
        value = secrets.token_hex(32)
        expires_at = now + TOKEN_TTL
        tenant.tokens[value] = expires_at
        self.stats.tokens_issued[hotel_id] += 1
        return IssuedToken(value, hotel_id, expires_at, int(TOKEN_TTL.total_seconds()))

    def authenticate(self, token: str | None) -> str:
        """The hotel_id a bearer token belongs to, or a refusal shaped by token_rejection."""
        if token:
            now = self.clock.now()
            for hotel_id, tenant in self._tenants.items():
                expires_at = tenant.tokens.get(token)
                if expires_at is not None and now < expires_at:
                    return hotel_id
        raise KrossError(errors.TOKEN_REJECTIONS[self.config.token_rejection])

    def active_tokens(self, hotel_id: str) -> int:
        """How many unexpired tokens a facility holds."""
        tenant = self._tenant(hotel_id)
        self._drop_expired(tenant, self.clock.now())
        return len(tenant.tokens)

    # --- reads -----------------------------------------------------------------------------

    def availability(
        self, hotel_id: str, date_from: date, date_to: date, id_room_type: int | None = None
    ) -> list[AvailabilityNight]:
        """calendar/get-availability: every apartment on every night, date_to inclusive."""
        days = (date_to - date_from).days + 1
        if days < 1 or days > MAX_AVAILABILITY_DAYS:
            raise KrossError(
                errors.INVALID_REQUEST,
                f"date_to must be on or after date_from, at most {MAX_AVAILABILITY_DAYS} days",
            )
        facility = self.facility(hotel_id)
        if id_room_type is not None:
            apartments = [self._apartment(facility, id_room_type)]
        else:
            apartments = sorted(facility.apartments.values(), key=lambda a: a.id_room_type)
        busy: dict[tuple[int, date], set[int]] = {}
        for res in facility.reservations.values():
            if not res.holds_room or not res.overlaps(date_from, date_to + timedelta(days=1)):
                continue
            night = max(res.arrival, date_from)
            while night < res.departure and night <= date_to:
                busy.setdefault((res.id_room_type, night), set()).add(res.id_room)
                night += timedelta(days=1)
        rows: list[AvailabilityNight] = []
        for offset in range(days):
            night = date_from + timedelta(days=offset)
            for apartment in apartments:
                taken = len(busy.get((apartment.id_room_type, night), ()))
                rows.append(
                    AvailabilityNight(
                        night=night,
                        apartment=apartment,
                        rooms_total=len(apartment.rooms),
                        rooms_available=len(apartment.rooms) - taken,
                        price=_nightly_price(apartment, night),
                    )
                )
        return rows

    def list_reservations(self, hotel_id: str, query: ReservationFilter) -> ReservationPage:
        """reservations/get-list: one page of matching reservations, as the variants shape it."""
        facility = self.facility(hotel_id)
        on_date = query.on_date or self.clock.now().date()
        matches = [
            res
            for res in facility.reservations.values()
            if self._matches(facility, res, query, on_date)
        ]
        matches.sort(key=lambda r: (r.arrival, r.id_reservation))
        cap = self.config.max_page_size
        limit = query.limit if cap is None else min(query.limit, cap)
        # A server that ignores offset reports the offset it used, which is always 0.
        offset = 0 if self.config.ignore_offset else query.offset
        return ReservationPage(matches[offset : offset + limit], len(matches), limit, offset)

    def apartment_for(
        self, hotel_id: str, id_room_type: int | None = None, id_reservation: int | None = None
    ) -> Apartment:
        """The apartment named by a room type, or the one a reservation is in."""
        facility = self.facility(hotel_id)
        if id_room_type is not None:
            return self._apartment(facility, id_room_type)
        if id_reservation is not None:
            res = self._reservation(facility, id_reservation)
            return self._apartment(facility, res.id_room_type)
        raise KrossError(errors.INVALID_REQUEST, "id_room_type or id_reservation is required")

    # --- writes ----------------------------------------------------------------------------

    def change_dates(
        self, hotel_id: str, id_reservation: int, arrival: date, departure: date
    ) -> Reservation:
        """reservations/save: move or extend a stay, if the nights are free on the same room."""
        facility = self.facility(hotel_id)
        res = self._reservation(facility, id_reservation)
        if res.status in ("CANC", "CHOUT"):
            raise KrossError(
                errors.INVALID_REQUEST, f"reservation is {res.status}; its dates cannot change"
            )
        if departure <= arrival:
            raise KrossError(errors.INVALID_REQUEST, "departure must be after arrival")
        # Live reservations never overlap, so the nights this one holds are never in conflict.
        for other in facility.reservations.values():
            if (
                other is not res
                and other.holds_room
                and other.id_room == res.id_room
                and other.overlaps(arrival, departure)
            ):
                raise KrossError(
                    errors.NOT_AVAILABLE,
                    f"the room is taken by another reservation from {other.arrival}",
                )
        apartment = facility.apartments[res.id_room_type]
        res.arrival, res.departure = arrival, departure
        res.total_amount = round(apartment.price * (departure - arrival).days, 2)
        return res

    def add_payment(
        self,
        hotel_id: str,
        id_reservation: int,
        amount: float,
        currency: str = "EUR",
        method: str = "card",
        on: date | None = None,
        note: str = "",
    ) -> Payment:
        """reservations/add-payment: append a payment to a reservation."""
        if not amount > 0:
            raise KrossError(errors.INVALID_REQUEST, "amount must be greater than 0")
        res = self._reservation(self.facility(hotel_id), id_reservation)
        payment = Payment(
            id_payment=self._take_id("payment"),
            id_reservation=id_reservation,
            amount=round(amount, 2),
            currency=currency,
            method=method,
            date=on or self.clock.now().date(),
            note=note,
        )
        res.payments.append(payment)
        return payment

    def register_guest(self, hotel_id: str, id_reservation: int, guest: NewGuest) -> Guest:
        """check-in-guest: register one guest, which moves the guest portal along."""
        res = self._reservation(self.facility(hotel_id), id_reservation)
        if res.status == "CANC":
            raise KrossError(errors.INVALID_REQUEST, "reservation is cancelled")
        registered = Guest(id_guest=self._take_id("guest"), **vars(guest))
        res.guests.append(registered)
        return registered

    def save_pictures(
        self,
        hotel_id: str,
        id_reservation: int,
        pictures: list[PictureUpload],
        id_guest: int | None = None,
    ) -> tuple[Reservation, list[Picture]]:
        """save-guest-pictures: store 1-10 pictures; all are checked before any is stored."""
        res = self._reservation(self.facility(hotel_id), id_reservation)
        if not 1 <= len(pictures) <= MAX_PICTURES:
            raise KrossError(errors.INVALID_REQUEST, f"send 1 to {MAX_PICTURES} pictures")
        if id_guest is not None and all(g.id_guest != id_guest for g in res.guests):
            raise KrossError(errors.NOT_FOUND, f"no guest {id_guest} on this reservation")
        for upload in pictures:
            if upload.content_type not in PICTURE_TYPES:
                raise KrossError(errors.UNSUPPORTED_MEDIA_TYPE)
            if len(upload.data) > MAX_PICTURE_BYTES:
                raise KrossError(errors.PAYLOAD_TOO_LARGE)
            if not upload.data:
                raise KrossError(errors.INVALID_REQUEST, "a picture is empty")
        stored = [
            Picture(
                id_picture=self._take_id("picture"),
                id_guest=id_guest,
                filename=upload.filename,
                content_type=upload.content_type,
                size=len(upload.data),
            )
            for upload in pictures
        ]
        res.pictures.extend(stored)
        return res, stored

    # --- test controls ---------------------------------------------------------------------

    def change_password(self, hotel_id: str, password: str) -> None:
        """Change a facility's API password; every token it holds stops working."""
        tenant = self._tenant(hotel_id)
        tenant.facility.password = password
        tenant.tokens.clear()

    def set_limits(
        self,
        hotel_id: str,
        per_minute: int | None = None,
        per_hour: int | None = None,
        per_day: int | None = None,
    ) -> RateLimits:
        """Change a facility's rate limits (the ones not given stay as they are)."""
        limits = self._tenant(hotel_id).limits
        return set_given(limits, per_minute=per_minute, per_hour=per_hour, per_day=per_day)

    def limits(self, hotel_id: str) -> RateLimits:
        """A facility's current rate limits."""
        return self._tenant(hotel_id).limits

    def advance_clock(self, seconds: float) -> datetime:
        """Move a ManualClock forward; any other clock refuses."""
        if not isinstance(self.clock, ManualClock):
            raise KrossError(errors.INVALID_REQUEST, "the emulator's clock is not a ManualClock")
        return self.clock.advance(seconds)

    def set_faults(
        self,
        latency_s: float | None = None,
        error_rate: float | None = None,
        commit_then_timeout: int | None = None,
        timeout_mode: TimeoutMode | None = None,
        lost_then_timeout: int | None = None,
        hang_s: float | None = None,
    ) -> Faults:
        """Arm faults (the ones not given stay as they are)."""
        return set_given(
            self.faults,
            latency_s=latency_s,
            error_rate=error_rate,
            commit_then_timeout=commit_then_timeout,
            lost_then_timeout=lost_then_timeout,
            timeout_mode=timeout_mode,
            hang_s=hang_s,
        )

    def clear_faults(self) -> None:
        """Disarm every fault."""
        self.faults = Faults()

    def configure(
        self,
        ignore_date_filters: bool | None = None,
        token_location: TokenLocation | None = None,
        guest_portal_shape: GuestPortalShape | None = None,
        ignore_offset: bool | None = None,
        omit_total_count: bool | None = None,
        max_page_size: int | None = None,
        login_refusal: LoginRefusal | None = None,
        token_rejection: TokenRejection | None = None,
        grouped_paths: bool | None = None,
        unknown_operation: UnknownOperationAnswer | None = None,
    ) -> SandboxConfig:
        """Flip the variant switches (None = unchanged; max_page_size=0 removes the cap)."""
        if max_page_size is not None and max_page_size < 0:
            raise KrossError(errors.INVALID_REQUEST, "max_page_size must be 0 (no cap) or more")
        set_given(
            self.config,
            ignore_date_filters=ignore_date_filters,
            token_location=token_location,
            guest_portal_shape=guest_portal_shape,
            ignore_offset=ignore_offset,
            omit_total_count=omit_total_count,
            max_page_size=max_page_size,
            login_refusal=login_refusal,
            token_rejection=token_rejection,
            grouped_paths=grouped_paths,
            unknown_operation=unknown_operation,
        )
        # None already means "unchanged", so "no cap" needs a value of its own.
        if self.config.max_page_size == 0:
            self.config.max_page_size = None
        return self.config

    def add_history(self, hotel_id: str, count: int) -> int:
        """Add ``count`` past stays (deterministic, spread over past years); the new total."""
        if not 1 <= count <= MAX_HISTORY_PER_CALL:
            raise KrossError(errors.INVALID_REQUEST, f"count must be 1 to {MAX_HISTORY_PER_CALL}")
        facility = self.facility(hotel_id)
        # Seeded by what is already there, so the same calls in the same order give the same data.
        seed = f"{self.seed}:{hotel_id}:{len(facility.reservations)}"
        stays, self._next_id = build_history(seed, facility, count, self.clock.now(), self._next_id)
        for res in stays:
            facility.reservations[res.id_reservation] = res
        return len(facility.reservations)

    # --- helpers ---------------------------------------------------------------------------

    def _tenant(self, hotel_id: str) -> Tenant:
        tenant = self._tenants.get(hotel_id)
        if tenant is None:
            raise KrossError(errors.NOT_FOUND, f"no facility {hotel_id}")
        return tenant

    def _apartment(self, facility: Facility, id_room_type: int) -> Apartment:
        apartment = facility.apartments.get(id_room_type)
        if apartment is None:
            raise KrossError(errors.NOT_FOUND, f"no room type {id_room_type}")
        return apartment

    def _reservation(self, facility: Facility, id_reservation: int) -> Reservation:
        res = facility.reservations.get(id_reservation)
        if res is None:
            raise KrossError(errors.NOT_FOUND, f"no reservation {id_reservation}")
        return res

    def _take_id(self, kind: str) -> int:
        value = self._next_id[kind]
        self._next_id[kind] = value + 1
        return value

    @staticmethod
    def _drop_expired(tenant: Tenant, now: datetime) -> None:
        tenant.tokens = {t: exp for t, exp in tenant.tokens.items() if now < exp}

    def _matches(
        self, facility: Facility, res: Reservation, q: ReservationFilter, on_date: date
    ) -> bool:
        if q.id_reservation is not None and res.id_reservation != q.id_reservation:
            return False
        if q.id_room is not None and res.id_room != q.id_room:
            return False
        if q.id_property is not None and facility.id_property != q.id_property:
            return False
        if q.statuses is not None and res.status not in q.statuses:
            return False
        if q.in_house and not (res.holds_room and res.arrival <= on_date < res.departure):
            return False
        if self.config.ignore_date_filters:
            return True
        return (
            _within(res.arrival, q.arrival_from, q.arrival_to)
            and _within(res.departure, q.departure_from, q.departure_to)
            and _within(res.date_reservation, q.date_reservation_from, q.date_reservation_to)
        )


_Moment = TypeVar("_Moment", date, datetime)


def _within(value: _Moment, low: _Moment | None, high: _Moment | None) -> bool:
    return (low is None or low <= value) and (high is None or value <= high)


def _nightly_price(apartment: Apartment, night: date) -> float:
    # Friday and Saturday nights cost more, as in most short-term rentals.
    return round(apartment.price * (1.2 if night.weekday() in (4, 5) else 1.0), 2)
