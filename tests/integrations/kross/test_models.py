"""Wire models: lenient on answers, strict on what we write."""

from __future__ import annotations

import base64
from datetime import date, datetime

import pytest
from pydantic import ValidationError

from pmsgate.integrations.kross.models import (
    MAX_PICTURE_BYTES,
    UPSTREAM_LIST_FILTERS,
    AddPayment,
    AvailabilityNight,
    AvailabilityQuery,
    ChangeDates,
    GuestDetails,
    GuestPictures,
    HouseManual,
    Picture,
    RegisterGuest,
    Reservation,
    ReservationQuery,
    RoomTypeQuery,
)

RESERVATION_ROW = {
    "id_reservation": 1001,
    "label": "R-1001",
    "arrival": "2026-11-20",
    "departure": "2026-11-24",
    "lang": "it",
    "note": "",
    "channel": "booking.com",
    "cod_reservation_status": "CONF",
    "reservation_confirmation_code": "X1",
    "email": "guest@example.com",
    "phone": "+39 000 000",
    "date_reservation": "2026-10-01 12:30",
    "total_amount": 480.0,
    "currency": "EUR",
    "rooms": [
        {"id_room": 31, "id_room_type": 12, "name_room_type": "Apartment Rosa", "qt_guests": 2}
    ],
    "guest_portal": {
        "link": "https://portal.example/abc",
        "status": "incomplete",
        "guests_registered": 1,
        "guests_expected": 2,
        "missing": ["guest_documents"],
    },
    "payments": [
        {
            "id_payment": 1,
            "amount": 100.0,
            "currency": "EUR",
            "method": "card",
            "date": "2026-10-01",
            "note": "",
        }
    ],
    "guests": [{"id_guest": 1, "first_name": "Anna", "last_name": "Esempio"}],
    "something_new": {"kept": True},
}


def test_a_documented_reservation_row_parses_and_keeps_unknown_fields() -> None:
    reservation = Reservation.model_validate(RESERVATION_ROW)
    assert reservation.arrival == date(2026, 11, 20)
    assert reservation.nights == 4
    assert reservation.date_reservation == datetime(2026, 10, 1, 12, 30)
    assert reservation.rooms[0].id_room_type == 12
    assert reservation.guest_portal is not None
    assert not reservation.guest_portal.is_complete
    assert reservation.payments[0].date == date(2026, 10, 1)
    assert reservation.model_extra == {"something_new": {"kept": True}}


def test_an_unknown_portal_status_does_not_break_reading() -> None:
    row = {**RESERVATION_ROW, "guest_portal": {"status": "archived"}}
    assert Reservation.model_validate(row).guest_portal.status == "archived"


def test_a_portal_given_as_a_bare_link_keeps_the_link_and_an_unknown_status() -> None:
    reservation = Reservation.model_validate(
        {**RESERVATION_ROW, "guest_portal": "https://portal.example/xyz"}
    )
    assert reservation.link == "https://portal.example/xyz"
    assert reservation.portal_status is None


def test_a_row_with_only_the_required_fields_reads_as_unknown_not_zero() -> None:
    reservation = Reservation.model_validate(
        {"id_reservation": 1, "arrival": "2026-11-20", "departure": "2026-11-21"}
    )
    assert reservation.paid is None
    assert reservation.guest_portal is None
    assert reservation.link is None
    assert reservation.rooms == []


def test_empty_lists_given_as_null_read_as_empty() -> None:
    row = {**RESERVATION_ROW, "rooms": None, "guests": None}
    reservation = Reservation.model_validate(row)
    assert reservation.rooms == []
    assert reservation.guests == []


def test_an_availability_row_parses() -> None:
    night = AvailabilityNight.model_validate(
        {"date": "2026-11-22", "id_room_type": 12, "rooms_available": 1, "price": 120}
    )
    assert night.date == date(2026, 11, 22)


def test_a_house_manual_parses_its_sections() -> None:
    manual = HouseManual.model_validate(
        {"id_room_type": 12, "sections": [{"title": "WiFi", "body": "x"}]}
    )
    assert manual.sections[0].title == "WiFi"


def test_change_dates_serialises_iso_dates() -> None:
    body = ChangeDates(id_reservation=1001, arrival="2026-11-20", departure="2026-11-25").to_wire()
    assert body == {"id_reservation": 1001, "arrival": "2026-11-20", "departure": "2026-11-25"}


@pytest.mark.parametrize(
    ("arrival", "departure"),
    [("2026-11-25", "2026-11-20"), ("2026-11-20", "2026-11-20")],
)
def test_change_dates_requires_departure_after_arrival(arrival: str, departure: str) -> None:
    with pytest.raises(ValidationError):
        ChangeDates(id_reservation=1, arrival=arrival, departure=departure)


@pytest.mark.parametrize(
    "value", ["20/11/2026", "2026-11-20T00:00:00", 1700000000, "2026-2-1", datetime(2026, 11, 20)]
)
def test_write_dates_accept_only_iso_dates(value: object) -> None:
    with pytest.raises(ValidationError):
        ChangeDates(id_reservation=1, arrival=value, departure="2026-12-01")


def test_write_payloads_refuse_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        ChangeDates.model_validate(
            {
                "id_reservation": 1,
                "arrival": "2026-11-20",
                "departure": "2026-11-21",
                "id_channel": 3,
            }
        )


@pytest.mark.parametrize("amount", [0, -5, float("nan"), float("inf")])
def test_a_payment_amount_must_be_positive_and_finite(amount: float) -> None:
    with pytest.raises(ValidationError):
        AddPayment(id_reservation=1, amount=amount, currency="EUR", method="card")


def test_a_payment_currency_is_an_iso_code() -> None:
    with pytest.raises(ValidationError):
        AddPayment(id_reservation=1, amount=10, currency="euro", method="card")
    body = AddPayment(
        id_reservation=1, amount=10, currency="EUR", method="card", date="2026-11-22"
    ).to_wire()
    assert body["date"] == "2026-11-22"
    assert body["amount"] == 10


def _guest(**changes: object) -> dict[str, object]:
    return {
        "first_name": "Anna",
        "last_name": "Esempio",
        "birth_date": "1990-01-31",
        "nationality": "IT",
        "document_type": "passport",
        "document_number": "X123",
        **changes,
    }


def test_a_guest_registration_validates_its_details() -> None:
    body = RegisterGuest.model_validate({"id_reservation": 1001, "guest": _guest()}).to_wire()
    assert body["guest"]["birth_date"] == "1990-01-31"


@pytest.mark.parametrize(
    "changes",
    [
        {"first_name": " "},
        {"nationality": "Italy"},
        {"document_type": "library_card"},
        {"birth_date": "31/01/1990"},
    ],
)
def test_a_guest_with_broken_details_is_refused(changes: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        GuestDetails.model_validate(_guest(**changes))


def _picture(data: bytes = b"\xff\xd8jpeg", **changes: object) -> dict[str, object]:
    return {
        "filename": "passport.jpg",
        "content_type": "image/jpeg",
        "data_base64": base64.b64encode(data).decode(),
        **changes,
    }


def test_guest_pictures_accept_one_to_ten_pictures() -> None:
    GuestPictures.model_validate({"id_reservation": 1, "pictures": [_picture()]})
    with pytest.raises(ValidationError):
        GuestPictures.model_validate({"id_reservation": 1, "pictures": []})
    with pytest.raises(ValidationError):
        GuestPictures.model_validate({"id_reservation": 1, "pictures": [_picture()] * 11})


@pytest.mark.parametrize(
    "picture",
    [
        _picture(content_type="image/gif"),
        _picture(data_base64="not base64!"),
        _picture(data=b""),
        _picture(filename="../etc/passwd"),
        _picture(data=b"x" * (MAX_PICTURE_BYTES + 1)),
    ],
)
def test_a_picture_of_a_wrong_type_size_encoding_or_name_is_refused(
    picture: dict[str, object],
) -> None:
    with pytest.raises(ValidationError):
        Picture.model_validate(picture)


def test_a_picture_of_exactly_the_size_limit_is_accepted() -> None:
    Picture.model_validate(_picture(data=b"x" * MAX_PICTURE_BYTES))


def test_an_availability_query_is_at_most_366_days_and_not_reversed() -> None:
    AvailabilityQuery(date_from="2026-01-01", date_to="2026-12-31")
    with pytest.raises(ValidationError):
        AvailabilityQuery(date_from="2026-01-01", date_to="2027-01-02")
    with pytest.raises(ValidationError):
        AvailabilityQuery(date_from="2026-02-01", date_to="2026-01-31")


def test_a_reservation_query_sends_booking_dates_in_the_upstream_format() -> None:
    body = ReservationQuery(
        date_reservation_from=datetime(2026, 10, 1, 12, 30),
        arrival_from="2026-11-20",
        with_rooms=True,
    ).to_wire()
    assert body == {
        "date_reservation_from": "2026-10-01 12:30",
        "arrival_from": "2026-11-20",
        "with_rooms": True,
    }


def test_only_public_filters_are_named_for_the_upstream() -> None:
    ours = {"arrival_from", "arrival_to", "departure_from", "departure_to", "in_house", "date"}
    assert not ours & UPSTREAM_LIST_FILTERS
    assert "with_guest_portal" not in UPSTREAM_LIST_FILTERS
    assert {"date_reservation_from", "date_reservation_to", "with_rooms"} <= UPSTREAM_LIST_FILTERS


def test_a_room_type_query_takes_exactly_one_key() -> None:
    assert RoomTypeQuery(id_room_type=12).to_wire() == {"id_room_type": 12}
    with pytest.raises(ValidationError):
        RoomTypeQuery()
    with pytest.raises(ValidationError):
        RoomTypeQuery(id_room_type=12, id_reservation=1001)
