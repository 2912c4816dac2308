"""Typed shapes of what booking-system operations take and return.

Every field name and rule here follows ``docs/kross-api.md``, the single place
where pmsgate writes down its assumptions about the booking system; change
that page and this module together.

Answers accept fields we do not know (``extra="allow"``): the real system may
send more than we assume. Write payloads are strict (``extra="forbid"``, ISO
dates only, positive amounts, departure after arrival) because a wrong write
cannot be taken back.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PositiveInt,
    StringConstraints,
    field_validator,
    model_validator,
)

MAX_AVAILABILITY_DAYS = 366
MAX_LIST_LIMIT = 500
MAX_PICTURES = 10
MAX_PICTURE_BYTES = 5 * 1024 * 1024

_ISO_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _iso_date(value: Any) -> Any:
    # Lax pydantic dates also take timestamps and datetimes; a write must say exactly which day.
    if isinstance(value, dt.datetime):
        raise ValueError("expected a date (YYYY-MM-DD), not a date and time")
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str) and _ISO_DATE_RE.match(value):
        return dt.date.fromisoformat(value)
    raise ValueError("expected an ISO date YYYY-MM-DD")


IsoDate = Annotated[dt.date, BeforeValidator(_iso_date)]

# Sane dates (docs/gateway.md "Dates"): anything else is a typo or a placeholder (year 1,
# 9999, 0 read as 1970) and is refused before it reaches the booking system.
STAY_DATE_YEARS_BACK = 2
STAY_DATE_YEARS_AHEAD = 3
BIRTH_DATE_YEARS_BACK = 120
BIRTH_DATE_FIELDS = frozenset({"birth_date"})


def _years_from(today: dt.date, years: int) -> dt.date:
    try:
        return today.replace(year=today.year + years)
    except ValueError:  # 29 February in a year without one
        return today.replace(year=today.year + years, day=28)


def sane_date_range(field: str, today: dt.date) -> tuple[dt.date, dt.date]:
    """The first and last date accepted for ``field``: a birth date lies in the last
    :data:`BIRTH_DATE_YEARS_BACK` years, every other date (stays, nights, payments,
    booking dates) from :data:`STAY_DATE_YEARS_BACK` years ago to
    :data:`STAY_DATE_YEARS_AHEAD` years ahead."""
    if field in BIRTH_DATE_FIELDS:
        return _years_from(today, -BIRTH_DATE_YEARS_BACK), today
    return _years_from(today, -STAY_DATE_YEARS_BACK), _years_from(today, STAY_DATE_YEARS_AHEAD)


def insane_dates(model: BaseModel, today: dt.date, prefix: str = "") -> list[str]:
    """One problem per date (or date and time) of ``model``, nested models included,
    outside :func:`sane_date_range`; empty when every date is sane."""
    problems: list[str] = []
    for name, value in model:
        where = f"{prefix}{name}"
        items = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
        for index, item in items:
            at = where if index is None else f"{where}.{index}"
            if isinstance(item, BaseModel):
                problems += insane_dates(item, today, f"{at}.")
                continue
            if not isinstance(item, dt.date):
                continue
            day = item.date() if isinstance(item, dt.datetime) else item
            first, last = sane_date_range(name, today)
            if not first <= day <= last:
                problems.append(
                    f"{at}: {day.isoformat()} is outside {first.isoformat()} … {last.isoformat()}"
                )
    return problems


NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]


class WireAnswer(BaseModel):
    """Base of everything the booking system returns: unknown fields are kept."""

    model_config = ConfigDict(extra="allow")


class WirePayload(BaseModel):
    """Base of everything we send: unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")

    def to_wire(self) -> dict[str, Any]:
        """The JSON body for the booking system (ISO dates, no unset optional fields)."""
        return self.model_dump(mode="json", exclude_none=True)


# --- answers -------------------------------------------------------------------------------


class AvailabilityNight(WireAnswer):
    """One room type on one night (``calendar/get-availability``)."""

    date: dt.date
    id_room_type: int
    name_room_type: str | None = None
    rooms_total: int | None = None
    rooms_available: int
    price: float | None = None
    currency: str | None = None
    min_stay: int | None = None


class ReservationRoom(WireAnswer):
    """A room held by a reservation."""

    id_room: int | None = None
    id_room_type: int | None = None
    name_room_type: str | None = None
    qt_guests: int | None = None
    # Carried into a reservations/save body when the row has them (docs/kross-api.md).
    id_rate: int | str | None = None
    accommodation_total_amount: float | None = None


def _none_as_empty(value: Any) -> Any:
    return [] if value is None else value


class GuestPortal(WireAnswer):
    """The guest's online check-in portal (``guest_portal`` block of a reservation)."""

    link: str | None = None
    # Kept as a plain string: an unknown future status must not break reading reservations.
    status: str | None = None
    guests_registered: int | None = None
    guests_expected: int | None = None
    missing: Annotated[list[str], BeforeValidator(_none_as_empty)] = Field(default_factory=list)

    @property
    def is_complete(self) -> bool:
        """True when the portal reports every step done."""
        return self.status == "complete"


class Payment(WireAnswer):
    """A payment recorded on a reservation."""

    id_payment: int | None = None
    id_reservation: int | None = None
    amount: float
    currency: str | None = None
    method: str | None = None
    date: dt.date | None = None
    note: str | None = None


class Guest(WireAnswer):
    """A guest registered on a reservation."""

    id_guest: int | None = None
    first_name: str | None = None
    last_name: str | None = None


def _portal_block(value: Any) -> Any:
    # An older public client saw the portal as a bare link: keep the link, the status is unknown.
    if isinstance(value, str):
        return {"link": value} if value.strip() else None
    return value


class Reservation(WireAnswer):
    """A row of ``reservations/get-list``.

    Only ``id_reservation``, ``arrival`` and ``departure`` are required; every other field
    may be absent, and absent means *unknown* (``None``), never zero: ``payments`` is None
    when the row carries no payments list, ``guest_portal`` None when it carries no block.
    """

    id_reservation: int
    label: str | None = None
    arrival: dt.date
    departure: dt.date
    id_property: int | None = None
    lang: str | None = None
    note: str | None = None
    channel: str | None = None
    cod_channel: str | None = None
    cod_reservation_status: str | None = None
    reservation_confirmation_code: str | None = None
    email: str | None = None
    phone: str | None = None
    date_reservation: dt.datetime | None = None
    total_amount: float | None = None
    currency: str | None = None
    rooms: Annotated[list[ReservationRoom], BeforeValidator(_none_as_empty)] = Field(
        default_factory=list
    )
    guest_portal: Annotated[GuestPortal | None, BeforeValidator(_portal_block)] = None
    # The portal link when the row carries it outside a block (``guest_portal_link`` is
    # mapped here by the operation table's response_fields).
    portal_link: str | None = None
    payments: list[Payment] | None = None
    guests: Annotated[list[Guest], BeforeValidator(_none_as_empty)] = Field(default_factory=list)

    @property
    def nights(self) -> int:
        """Number of nights (departure is the check-out day)."""
        return (self.departure - self.arrival).days

    @property
    def link(self) -> str | None:
        """The guest's portal link, wherever the row carried it."""
        if self.guest_portal is not None and self.guest_portal.link:
            return self.guest_portal.link
        return self.portal_link or None

    @property
    def portal_status(self) -> str | None:
        """The portal's status, or None when the booking system did not say."""
        return self.guest_portal.status if self.guest_portal is not None else None

    @property
    def paid(self) -> float | None:
        """What has been paid so far, or None when the row lists no payments."""
        if self.payments is None:
            return None
        return round(sum(p.amount for p in self.payments), 2)


class CheckInInstructions(WireAnswer):
    """Answer of ``get-check-in-instructions``."""

    id_room_type: int | None = None
    name_room_type: str | None = None
    address: str | None = None
    # Times stay strings ("15:00"): the wording is passed to guests as written.
    check_in_from: str | None = None
    check_in_until: str | None = None
    check_out_until: str | None = None
    instructions: str | None = None


class HouseManualSection(WireAnswer):
    """One titled section of a house manual."""

    title: str
    body: str = ""


class HouseManual(WireAnswer):
    """Answer of ``get-house-manual``."""

    id_room_type: int | None = None
    name_room_type: str | None = None
    sections: list[HouseManualSection] = Field(default_factory=list)


class Contract(WireAnswer):
    """Answer of ``get-contract``."""

    id_room_type: int | None = None
    title: str | None = None
    version: str | int | None = None
    text: str | None = None


class ReservationDates(WireAnswer):
    """Answer of ``reservations/save``."""

    id_reservation: int
    cod_reservation: str | None = None
    arrival: dt.date
    departure: dt.date


class GuestRegistered(WireAnswer):
    """Answer of ``check-in-guest``."""

    id_guest: int
    id_reservation: int | None = None
    guest_portal: GuestPortal | None = None


class SavedPicture(WireAnswer):
    """One stored picture."""

    id_picture: int | str
    filename: str | None = None
    size: int | None = None


class PicturesSaved(WireAnswer):
    """Answer of ``save-guest-pictures``."""

    id_reservation: int | None = None
    saved: int
    pictures: list[SavedPicture] = Field(default_factory=list)


# --- read requests -------------------------------------------------------------------------


class AvailabilityQuery(WirePayload):
    """Body of ``calendar/get-availability``; ``date_to`` is the last night, inclusive."""

    date_from: IsoDate
    date_to: IsoDate
    id_room_type: PositiveInt | None = None

    @model_validator(mode="after")
    def _range(self) -> AvailabilityQuery:
        if self.date_to < self.date_from:
            raise ValueError("date_to must not be before date_from")
        if (self.date_to - self.date_from).days + 1 > MAX_AVAILABILITY_DAYS:
            raise ValueError(f"at most {MAX_AVAILABILITY_DAYS} days per request")
        return self


class ReservationQuery(WirePayload):
    """Body of ``reservations/get-list`` as our operations API takes it.

    The filters public integrations use (:data:`UPSTREAM_LIST_FILTERS`) are sent upstream;
    the stay filters (``arrival_*``, ``departure_*``, ``in_house``/``date``) are ours: they
    are applied by the gateway and never sent (no public client uses those names, and the
    server may ignore filters anyway, docs/requirements.md R8.3). ``with_guest_portal`` is
    accepted for compatibility and ignored.
    """

    id_reservation: PositiveInt | None = None
    id_room: PositiveInt | None = None
    id_property: PositiveInt | None = None
    with_rooms: bool | None = None
    with_guest_portal: bool | None = None
    cod_reservation_status: str | None = None
    date_reservation_from: dt.datetime | None = None
    date_reservation_to: dt.datetime | None = None
    arrival_from: IsoDate | None = None
    arrival_to: IsoDate | None = None
    departure_from: IsoDate | None = None
    departure_to: IsoDate | None = None
    in_house: bool | None = None
    date: IsoDate | None = None
    limit: int | None = Field(default=None, ge=1, le=MAX_LIST_LIMIT)
    offset: int | None = Field(default=None, ge=0)

    def to_wire(self) -> dict[str, Any]:
        """The body, with booking dates in the upstream's ``YYYY-MM-DD HH:MM`` form."""
        body = super().to_wire()
        for key in ("date_reservation_from", "date_reservation_to"):
            value = getattr(self, key)
            if value is not None:
                body[key] = value.strftime("%Y-%m-%d %H:%M")
        return body


# reservations/get-list filters seen in public integrations (docs/kross-api.md).
UPSTREAM_LIST_FILTERS = frozenset(
    {
        "id_reservation",
        "id_room",
        "id_property",
        "with_rooms",
        "cod_reservation_status",
        "date_reservation_from",
        "date_reservation_to",
        "limit",
        "offset",
    }
)


class RoomTypeQuery(WirePayload):
    """Body of the per-room-type reads (check-in instructions, house manual, contract)."""

    id_room_type: PositiveInt | None = None
    id_reservation: PositiveInt | None = None

    @model_validator(mode="after")
    def _one_key(self) -> RoomTypeQuery:
        if (self.id_room_type is None) == (self.id_reservation is None):
            raise ValueError("give exactly one of id_room_type or id_reservation")
        return self


# --- write requests ------------------------------------------------------------------------


class ChangeDates(WirePayload):
    """Body of ``reservations/save`` when changing or extending a stay's dates."""

    id_reservation: PositiveInt
    arrival: IsoDate
    departure: IsoDate

    @model_validator(mode="after")
    def _departure_after_arrival(self) -> ChangeDates:
        if self.departure <= self.arrival:
            raise ValueError("departure must be after arrival")
        return self


class AddPayment(WirePayload):
    """Body of ``reservations/add-payment``."""

    id_reservation: PositiveInt
    amount: float = Field(gt=0, allow_inf_nan=False)
    currency: Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$")]
    method: NonEmpty
    date: IsoDate | None = None
    note: Annotated[str, StringConstraints(max_length=1000)] = ""


class GuestDetails(WirePayload):
    """The guest registered by ``check-in-guest``."""

    first_name: NonEmpty
    last_name: NonEmpty
    birth_date: IsoDate
    nationality: Annotated[str, StringConstraints(pattern=r"^[A-Z]{2}$")]
    document_type: Literal["passport", "id_card", "driving_license"]
    document_number: NonEmpty


class RegisterGuest(WirePayload):
    """Body of ``check-in-guest``."""

    id_reservation: PositiveInt
    guest: GuestDetails


class Picture(WirePayload):
    """One guest picture, base64-encoded."""

    filename: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=255)]
    content_type: Literal["image/jpeg", "image/png", "application/pdf"]
    data_base64: str = Field(min_length=1, repr=False)

    @field_validator("filename")
    @classmethod
    def _plain_filename(cls, value: str) -> str:
        if "/" in value or "\\" in value or value in {".", ".."}:
            raise ValueError("filename must not contain a path")
        return value

    @field_validator("data_base64")
    @classmethod
    def _decodable_and_small(cls, value: str) -> str:
        # Check the size before decoding: 4 base64 characters carry 3 bytes.
        if len(value) * 3 // 4 > MAX_PICTURE_BYTES + 3:
            raise ValueError(f"picture larger than {MAX_PICTURE_BYTES} bytes")
        try:
            decoded = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("data_base64 is not valid base64") from None
        if not decoded:
            raise ValueError("picture is empty")
        if len(decoded) > MAX_PICTURE_BYTES:
            raise ValueError(f"picture larger than {MAX_PICTURE_BYTES} bytes")
        return value


class GuestPictures(WirePayload):
    """Body of ``save-guest-pictures``."""

    id_reservation: PositiveInt
    id_guest: PositiveInt | None = None
    pictures: list[Picture] = Field(min_length=1, max_length=MAX_PICTURES)
