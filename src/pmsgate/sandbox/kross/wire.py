"""Wire shapes of the emulator: request bodies in, JSON-ready dicts out (docs/kross-api.md).

Request models ignore unknown fields, as a lenient server does, and coerce the
usual lax JSON (``"1001"`` for ``1001``); anything they refuse becomes ``400 INVALID_REQUEST``.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import fields
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from pmsgate.sandbox.kross.records import (
    Apartment,
    Facility,
    Guest,
    GuestPortal,
    Payment,
    Picture,
    Reservation,
)
from pmsgate.sandbox.kross.store import (
    AvailabilityNight,
    GuestPortalShape,
    IssuedToken,
    NewGuest,
    ReservationFilter,
    TokenLocation,
)

# --- request bodies --------------------------------------------------------------------------


def _naive_utc(value: dt.datetime) -> dt.datetime:
    # Booking dates are stored as naive UTC; an aware filter must not crash the comparison.
    if value.tzinfo is None:
        return value
    return value.astimezone(dt.UTC).replace(tzinfo=None)


def _end_of_a_bare_day(value: Any) -> Any:
    # "date_reservation_to": "2026-09-01" means the whole day, not its first minute.
    if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value.strip()):
        return f"{value.strip()} 23:59:59"
    return value


NaiveUtc = Annotated[dt.datetime, AfterValidator(_naive_utc)]
NaiveUtcUpTo = Annotated[
    dt.datetime, BeforeValidator(_end_of_a_bare_day), AfterValidator(_naive_utc)
]
MAX_LIST_LIMIT = 500


class Body(BaseModel):
    """Base of every request body."""

    model_config = ConfigDict(extra="ignore")


class GetTokenBody(Body):
    """auth/get-token."""

    # Integrators send hotel_id both as "123456" and as 123456.
    model_config = ConfigDict(extra="ignore", coerce_numbers_to_str=True)

    api_key: str
    hotel_id: str
    username: str
    password: str


class AvailabilityBody(Body):
    """calendar/get-availability."""

    date_from: dt.date
    date_to: dt.date
    id_room_type: int | None = None


class ReservationListBody(Body):
    """reservations/get-list: the filters public integrations send, then our assumed ones."""

    id_reservation: int | None = None
    id_room: int | None = None
    id_property: int | None = None
    # Include flags. Public clients send with_rooms: true, so the real server may leave rooms
    # out by default; ours includes them when the flag is absent, so that callers written
    # before the flag existed keep their rows (docs/kross-api.md). false leaves them out.
    with_rooms: bool = True
    with_guest_portal: bool = True
    # "CONF", ["CONF", "PEND"] or "CONF,PEND".
    cod_reservation_status: str | list[str] | None = None
    # The booking's creation date, "YYYY-MM-DD HH:MM" (a bare date covers its whole day).
    date_reservation_from: NaiveUtc | None = None
    date_reservation_to: NaiveUtcUpTo | None = None
    arrival_from: dt.date | None = None
    arrival_to: dt.date | None = None
    departure_from: dt.date | None = None
    departure_to: dt.date | None = None
    in_house: bool = False
    date: dt.date | None = None
    # At most MAX_LIST_LIMIT unless max_page_size is set: a capping server lowers, not refuses.
    limit: int = Field(default=100, ge=1)
    offset: int = Field(default=0, ge=0)

    def to_filter(self) -> ReservationFilter:
        """The store's view of these filters."""
        statuses = self.cod_reservation_status
        return ReservationFilter(
            id_reservation=self.id_reservation,
            id_room=self.id_room,
            id_property=self.id_property,
            statuses=None if statuses is None else frozenset(_as_list(statuses)),
            date_reservation_from=self.date_reservation_from,
            date_reservation_to=self.date_reservation_to,
            arrival_from=self.arrival_from,
            arrival_to=self.arrival_to,
            departure_from=self.departure_from,
            departure_to=self.departure_to,
            in_house=self.in_house,
            on_date=self.date,
            limit=self.limit,
            offset=self.offset,
        )


class RoomTypeBody(Body):
    """get-check-in-instructions, get-house-manual, get-contract."""

    id_room_type: int | None = None
    id_reservation: int | None = None


class SaveReservationBody(Body):
    """reservations/save (date changes only)."""

    id_reservation: int
    arrival: dt.date
    departure: dt.date


class AddPaymentBody(Body):
    """reservations/add-payment."""

    id_reservation: int
    amount: float = Field(gt=0, allow_inf_nan=False)
    currency: str = Field(default="EUR", min_length=3, max_length=3)
    method: str = Field(default="card", min_length=1)
    date: dt.date | None = None
    note: str = ""


class GuestBody(Body):
    """The guest inside check-in-guest."""

    first_name: str = Field(min_length=1)
    last_name: str = Field(min_length=1)
    birth_date: dt.date
    nationality: str = Field(min_length=2, max_length=2)
    document_type: Literal["passport", "id_card", "driving_license"]
    document_number: str = Field(min_length=1)

    def to_new_guest(self) -> NewGuest:
        """The store's view of this guest."""
        return NewGuest(**self.model_dump())


class CheckInGuestBody(Body):
    """check-in-guest."""

    id_reservation: int
    guest: GuestBody


class PictureBody(Body):
    """One picture inside save-guest-pictures; the type is checked by the store (415)."""

    filename: str = Field(min_length=1)
    content_type: str
    data_base64: str


class SavePicturesBody(Body):
    """save-guest-pictures; the count (1-10) is checked by the store."""

    id_reservation: int
    id_guest: int | None = None
    pictures: list[PictureBody]


# --- answers -----------------------------------------------------------------------------


def token_data(issued: IssuedToken) -> dict[str, Any]:
    """The token fields of auth/get-token."""
    return {
        "auth_token": issued.value,
        "auth_token_expire": issued.expires_at.strftime("%Y-%m-%d %H:%M:%S"),
        "auth_token_expire_seconds": issued.expires_in_s,
    }


def token_answer(issued: IssuedToken, location: TokenLocation) -> dict[str, Any]:
    """auth/get-token's answer, with the token where the configuration puts it."""
    fields = token_data(issued)
    if location == "top":
        return fields
    if location == "nested":
        return {"data": {"data": fields}}
    return {"data": fields}


def availability_row(row: AvailabilityNight) -> dict[str, Any]:
    """One room type on one night."""
    return {
        "date": row.night.isoformat(),
        "id_room_type": row.apartment.id_room_type,
        "name_room_type": row.apartment.name,
        "rooms_total": row.rooms_total,
        "rooms_available": row.rooms_available,
        "price": row.price,
        "currency": "EUR",
        "min_stay": row.apartment.min_stay,
    }


def reservation_row(
    res: Reservation,
    facility: Facility,
    *,
    with_rooms: bool,
    with_guest_portal: bool,
    portal_shape: GuestPortalShape = "block",
) -> dict[str, Any]:
    """One row of reservations/get-list."""
    row: dict[str, Any] = {
        "id_reservation": res.id_reservation,
        "label": res.label,
        "arrival": res.arrival.isoformat(),
        "departure": res.departure.isoformat(),
        "lang": res.lang,
        "note": res.note,
        "channel": res.channel,
        "cod_reservation_status": res.status,
        "reservation_confirmation_code": res.confirmation_code,
        "email": res.email,
        "phone": res.phone,
        "date_reservation": res.date_reservation.strftime("%Y-%m-%d %H:%M"),
        "total_amount": res.total_amount,
        "currency": res.currency,
    }
    if with_rooms:
        row["rooms"] = [
            {
                "id_room": res.id_room,
                "id_room_type": res.id_room_type,
                "name_room_type": facility.apartments[res.id_room_type].name,
                "qt_guests": res.qt_guests,
            }
        ]
    if with_guest_portal:
        row.update(portal_fields(res.portal(), portal_shape))
    row["payments"] = [payment_row(p) for p in res.payments]
    row["guests"] = [guest_row(g) for g in res.guests]
    return row


def portal_fields(portal: GuestPortal, shape: GuestPortalShape) -> dict[str, Any]:
    """The guest-portal fields of a row, in the configured shape (none when "absent")."""
    if shape == "link":
        return {"guest_portal_link": portal.link}
    if shape == "absent":
        return {}
    return {"guest_portal": portal_block(portal)}


def portal_block(portal: GuestPortal) -> dict[str, Any]:
    """The guest_portal block."""
    return _fields(portal)


def payment_row(payment: Payment) -> dict[str, Any]:
    """A payment, as listed and as answered by add-payment."""
    return _fields(payment)


def _fields(record: GuestPortal | Payment) -> dict[str, Any]:
    """A record's fields by name, in order, as JSON: dates as ISO text, tuples as lists."""
    return {field.name: _json(getattr(record, field.name)) for field in fields(record)}


def _json(value: Any) -> Any:
    if isinstance(value, dt.date):
        return value.isoformat()
    return list(value) if isinstance(value, tuple) else value


def guest_row(guest: Guest) -> dict[str, Any]:
    """A registered guest as listed (no document data)."""
    return {
        "id_guest": guest.id_guest,
        "first_name": guest.first_name,
        "last_name": guest.last_name,
    }


def check_in_instructions(apartment: Apartment) -> dict[str, Any]:
    """get-check-in-instructions."""
    info = apartment.check_in
    return {
        "id_room_type": apartment.id_room_type,
        "name_room_type": apartment.name,
        "address": info.address,
        "check_in_from": info.check_in_from,
        "check_in_until": info.check_in_until,
        "check_out_until": info.check_out_until,
        "instructions": info.instructions,
    }


def house_manual(apartment: Apartment) -> dict[str, Any]:
    """get-house-manual."""
    return {
        "id_room_type": apartment.id_room_type,
        "name_room_type": apartment.name,
        "sections": [{"title": s.title, "body": s.body} for s in apartment.house_manual],
    }


def contract(apartment: Apartment) -> dict[str, Any]:
    """get-contract."""
    return {
        "id_room_type": apartment.id_room_type,
        "title": apartment.contract.title,
        "version": apartment.contract.version,
        "text": apartment.contract.text,
    }


def saved_dates(res: Reservation) -> dict[str, Any]:
    """reservations/save."""
    return {
        "id_reservation": res.id_reservation,
        "cod_reservation": res.label,
        "arrival": res.arrival.isoformat(),
        "departure": res.departure.isoformat(),
    }


def saved_pictures(res: Reservation, pictures: list[Picture]) -> dict[str, Any]:
    """save-guest-pictures."""
    return {
        "id_reservation": res.id_reservation,
        "saved": len(pictures),
        "pictures": [
            {"id_picture": p.id_picture, "filename": p.filename, "size": p.size} for p in pictures
        ],
    }


def _as_list(value: str | list[str]) -> list[str]:
    values = value.split(",") if isinstance(value, str) else value
    return [v.strip() for v in values if v.strip()]
