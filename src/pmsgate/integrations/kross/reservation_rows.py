"""Reservation rows read one at a time, and the full record ``reservations/save`` sends.

A list answer is never all-or-nothing: each row of ``reservations/get-list`` is read
on its own. A row without a readable ``id_reservation``, ``arrival`` or ``departure``
is skipped (and reported by the caller); an optional field that does not fit our
model is dropped from that row, so it reads as *unknown*, and the row is kept.
Problems are described by field locations only (``rooms.0.qt_guests``), never by
values: rows carry guests' personal data.

Names seen in answers are mapped to our model's names first, with the operation
table's ``response_fields`` (e.g. ``guest_portal_link`` → ``portal_link``), so a
deployment adapts to another spelling without code (docs/kross-api.md).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from pmsgate.integrations.kross.models import Reservation

REQUIRED_FIELDS = frozenset({"id_reservation", "arrival", "departure"})
# Each pass drops one unreadable optional field; a row needing more is skipped.
MAX_DROPPED_FIELDS = 8

# Our names of the reservations/get-list request fields → public names (docs/kross-api.md);
# the operation table's request_fields overrides any of them.
LIST_REQUEST_FIELDS: Mapping[str, str] = {
    "reservation_id": "id_reservation",
    "booked_from": "date_reservation_from",
    "booked_to": "date_reservation_to",
    "with_rooms": "with_rooms",
    "limit": "limit",
    "offset": "offset",
}

# Our names of the reservations/save body → the public names (docs/kross-api.md);
# ``room.*`` are the fields of each element of ``rooms``.
SAVE_REQUEST_FIELDS: Mapping[str, str] = {
    "reservation_id": "id_reservation",
    "property_id": "id_property",
    "arrival": "arrival",
    "departure": "departure",
    "label": "label",
    "email": "email",
    "phone": "phone",
    "channel": "cod_channel",
    "status": "cod_reservation_status",
    "rooms": "rooms",
    "room.room_type_id": "id_room_type",
    "room.room_id": "id_room",
    "room.rate_id": "id_rate",
    "room.guests": "guests",
    "room.amount": "accommodation_total_amount",
}

BOOKING_DATE_FORMAT = "%Y-%m-%d %H:%M"


def wire_field(request_fields: Mapping[str, str], ours: str, defaults: Mapping[str, str]) -> str:
    """The name ``ours`` is sent under: the operation table's, else the public default."""
    return request_fields.get(ours) or defaults[ours]


class RowUnreadable(Exception):
    """A row that cannot be read; ``fields`` are the locations at fault (never values)."""

    def __init__(self, fields: Iterable[str]) -> None:
        self.fields = tuple(sorted(set(fields))) or ("row",)
        super().__init__(f"unreadable reservation row at {list(self.fields)}")


@dataclass(frozen=True)
class RowProblem:
    """What was wrong with one row: where (field locations), and whether it was skipped."""

    index: int
    fields: tuple[str, ...]
    skipped: bool


@dataclass(frozen=True)
class ParsedRows:
    """The readable reservations of a list answer, and the problems met on the way."""

    items: list[Reservation]
    problems: list[RowProblem] = field(default_factory=list)

    @property
    def skipped(self) -> int:
        """How many rows could not be read at all."""
        return sum(1 for p in self.problems if p.skipped)


def rename_fields(row: Mapping[str, Any], response_fields: Mapping[str, str]) -> dict[str, Any]:
    """``row`` with the names seen upstream renamed to ours; our own name wins when both come."""
    renamed = dict(row)
    for seen, ours in response_fields.items():
        if seen != ours and seen in renamed:
            value = renamed.pop(seen)
            renamed.setdefault(ours, value)
    return renamed


def parse_row(
    row: Any, response_fields: Mapping[str, str] | None = None, *, lenient: bool = True
) -> tuple[Reservation, tuple[str, ...]]:
    """One row as a Reservation, with the locations of optional fields dropped to read it.

    ``lenient=False`` drops nothing: any misfit makes the row unreadable (for a write
    that sends the record back, a field silently lost would be a field overwritten).
    """
    if not isinstance(row, Mapping):
        raise RowUnreadable(["row"])
    data = rename_fields(row, response_fields or {})
    dropped: list[str] = []
    for _ in range(MAX_DROPPED_FIELDS + 1):
        try:
            return Reservation.model_validate(data), tuple(dropped)
        except ValidationError as error:
            locations = [tuple(e["loc"]) for e in error.errors()]
        required = {str(loc[0]) for loc in locations if loc and loc[0] in REQUIRED_FIELDS}
        if required or not lenient or not all(locations):
            raise RowUnreadable(required or {_where(loc) for loc in locations})
        # One field per pass: dropping one can shift the positions named by the others.
        dropped.append(_drop(data, locations[0]))
    raise RowUnreadable(dropped)


def parse_rows(rows: Iterable[Any], response_fields: Mapping[str, str] | None = None) -> ParsedRows:
    """Every readable row of a list answer; the others are reported, never raised."""
    items: list[Reservation] = []
    problems: list[RowProblem] = []
    for index, row in enumerate(rows):
        try:
            reservation, dropped = parse_row(row, response_fields)
        except RowUnreadable as unreadable:
            problems.append(RowProblem(index, unreadable.fields, skipped=True))
            continue
        items.append(reservation)
        if dropped:
            problems.append(RowProblem(index, dropped, skipped=False))
    return ParsedRows(items, problems)


def _where(location: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in location) or "row"


def _drop(data: dict[str, Any], location: tuple[Any, ...]) -> str:
    """Remove the deepest field on ``location`` that is a key of an object; returns where.

    ``rooms.0.qt_guests`` drops that room's ``qt_guests``; ``rooms.0`` (the element itself
    does not fit) drops the whole ``rooms`` list: a partial list would read as complete.
    """
    holder: Any = data
    path: list[Any] = []
    target: tuple[dict[str, Any], Any, tuple[Any, ...]] | None = None
    for part in location:
        if isinstance(holder, dict) and part in holder:
            target = (holder, part, (*path, part))
        elif not (isinstance(holder, list) and isinstance(part, int) and 0 <= part < len(holder)):
            break
        path.append(part)
        holder = holder[part]
    if target is None:
        return _where(location[:1])
    container, key, where = target
    container.pop(key, None)
    return _where(where)


# --- reservations/save: the whole record ---------------------------------------------------


class RecordIncomplete(Exception):
    """The reservation read back lacks what a save must send; ``fields`` name what is missing."""

    def __init__(self, fields: Iterable[str]) -> None:
        self.fields = tuple(sorted(set(fields)))
        super().__init__(f"the reservation record lacks {list(self.fields)}")


def save_body(
    reservation: Reservation,
    arrival: dt.date,
    departure: dt.date,
    request_fields: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The full ``reservations/save`` body for ``reservation`` with new dates, as public clients
    send it; fields the record does not carry are left out, never invented.
    """
    names = request_fields or {}

    def wire(ours: str) -> str:
        return wire_field(names, ours, SAVE_REQUEST_FIELDS)

    if not reservation.rooms:
        raise RecordIncomplete(["rooms"])
    missing = [
        f"rooms.{i}.id_room_type" for i, r in enumerate(reservation.rooms) if r.id_room_type is None
    ]
    if missing:
        raise RecordIncomplete(missing)
    rooms = [
        _present(
            {
                wire("room.room_type_id"): room.id_room_type,
                wire("room.room_id"): room.id_room,
                wire("room.rate_id"): room.id_rate,
                wire("room.guests"): room.qt_guests,
                wire("room.amount"): room.accommodation_total_amount,
            }
        )
        for room in reservation.rooms
    ]
    return _present(
        {
            wire("reservation_id"): reservation.id_reservation,
            wire("property_id"): reservation.id_property,
            wire("arrival"): arrival.isoformat(),
            wire("departure"): departure.isoformat(),
            wire("label"): reservation.label,
            wire("email"): reservation.email,
            wire("phone"): reservation.phone,
            # Rows seen publicly carry `channel`; the save body names it `cod_channel`.
            wire("channel"): reservation.cod_channel or reservation.channel,
            wire("status"): reservation.cod_reservation_status,
            wire("rooms"): rooms,
        }
    )


def _present(values: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}
