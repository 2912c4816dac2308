"""Reservation rows read one by one, and the full record a reservations/save sends."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from pmsgate.integrations.kross.operations import load_operations
from pmsgate.integrations.kross.reservation_rows import (
    RecordIncomplete,
    RowUnreadable,
    parse_row,
    parse_rows,
    save_body,
)

RESPONSE_FIELDS = load_operations().resolve("reservations/get-list").response_fields


def row(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id_reservation": 1001,
        "label": "R-1001",
        "arrival": "2026-11-20",
        "departure": "2026-11-24",
        "channel": "booking.com",
        "cod_reservation_status": "CONF",
        "email": "guest@example.com",
        "phone": "+39 000 0000000",
        "rooms": [{"id_room": 31, "id_room_type": 12, "name_room_type": "Rosa", "qt_guests": 2}],
    }
    base.update(fields)
    return base


def test_a_row_without_readable_dates_is_skipped_and_the_others_are_kept():
    parsed = parse_rows(
        [row(), row(id_reservation=1002, arrival="20/11/2026"), "not a row", row(id_reservation=3)],
        RESPONSE_FIELDS,
    )
    assert [r.id_reservation for r in parsed.items] == [1001, 3]
    assert parsed.skipped == 2
    assert [p.fields for p in parsed.problems] == [("arrival",), ("row",)]


def test_problems_name_field_locations_never_values():
    with pytest.raises(RowUnreadable) as error:
        parse_row(row(arrival="someday", departure="guest@example.com"))
    assert error.value.fields == ("arrival", "departure")
    assert "guest@example.com" not in str(error.value)


def test_an_unreadable_optional_field_reads_as_unknown_and_keeps_the_row():
    reservation, dropped = parse_row(
        row(total_amount="a lot", rooms=[{"id_room_type": 12, "qt_guests": "two adults"}])
    )
    assert reservation.total_amount is None
    assert reservation.rooms[0].id_room_type == 12
    assert reservation.rooms[0].qt_guests is None
    assert set(dropped) == {"total_amount", "rooms.0.qt_guests"}


def test_a_list_element_that_does_not_fit_drops_the_whole_list():
    reservation, dropped = parse_row(row(payments=[{"amount": 10}, "cash"]))
    assert reservation.payments is None
    assert reservation.paid is None
    assert dropped == ("payments",)


def test_a_strict_read_drops_nothing():
    with pytest.raises(RowUnreadable) as error:
        parse_row(row(rooms=[{"id_room_type": 12, "qt_guests": "two"}]), lenient=False)
    assert error.value.fields == ("rooms.0.qt_guests",)


@pytest.mark.parametrize(
    ("fields", "link", "status"),
    [
        (
            {"guest_portal": {"link": "https://p/1", "status": "incomplete"}},
            "https://p/1",
            "incomplete",
        ),
        ({"guest_portal_link": "https://p/2"}, "https://p/2", None),
        ({"guest_portal": "https://p/3"}, "https://p/3", None),
        ({"guest_portal": None}, None, None),
        ({}, None, None),
        ({"guest_portal": {"status": 7}}, None, None),
    ],
)
def test_the_portal_is_read_as_a_block_a_bare_link_or_absent(fields, link, status):
    reservation, _ = parse_row(row(**fields), RESPONSE_FIELDS)
    assert reservation.link == link
    assert reservation.portal_status == status


def test_absent_payments_are_unknown_not_zero():
    reservation, _ = parse_row(row())
    assert reservation.payments is None
    assert reservation.paid is None
    paid, _ = parse_row(row(payments=[{"amount": 40.5}, {"amount": 9.5}]))
    assert paid.paid == 50.0


def test_the_response_field_map_is_data():
    reservation, _ = parse_row(row(portal_url="https://p/9"), {"portal_url": "portal_link"})
    assert reservation.link == "https://p/9"


def test_the_save_body_is_the_whole_record_with_the_new_dates():
    record, _ = parse_row(
        row(
            id_property=7,
            rooms=[{"id_room": 31, "id_room_type": 12, "qt_guests": 2, "id_rate": 4}],
        )
    )
    body = save_body(record, dt.date(2026, 11, 21), dt.date(2026, 11, 26))
    assert body == {
        "id_reservation": 1001,
        "id_property": 7,
        "arrival": "2026-11-21",
        "departure": "2026-11-26",
        "label": "R-1001",
        "email": "guest@example.com",
        "phone": "+39 000 0000000",
        "cod_channel": "booking.com",
        "cod_reservation_status": "CONF",
        "rooms": [{"id_room_type": 12, "id_room": 31, "id_rate": 4, "guests": 2}],
    }


def test_the_save_body_uses_the_operation_tables_names():
    record, _ = parse_row(row())
    names = {"room.guests": "qt_guests", "channel": "channel"}
    body = save_body(record, dt.date(2026, 11, 21), dt.date(2026, 11, 26), names)
    assert body["rooms"][0]["qt_guests"] == 2
    assert body["channel"] == "booking.com"


def test_a_record_without_rooms_cannot_be_saved():
    record, _ = parse_row(row(rooms=[]))
    with pytest.raises(RecordIncomplete) as error:
        save_body(record, dt.date(2026, 11, 21), dt.date(2026, 11, 26))
    assert error.value.fields == ("rooms",)
    roomless, _ = parse_row(row(rooms=[{"id_room": 31}]))
    with pytest.raises(RecordIncomplete):
        save_body(roomless, dt.date(2026, 11, 21), dt.date(2026, 11, 26))
