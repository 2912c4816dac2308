"""Date filters enforced on our side (spec §7)."""

from __future__ import annotations

from datetime import date

import pytest

from pmsgate.integrations.kross.dates import (
    enforce_reservation_filters,
    filter_availability,
    filter_by_stay,
    filter_in_house,
    stay_overlaps,
)
from pmsgate.integrations.kross.models import Reservation

D = date.fromisoformat


def _row(
    rid: int, arrival: str, departure: str, booked: str = "2026-10-01 12:30"
) -> dict[str, object]:
    return {
        "id_reservation": rid,
        "arrival": arrival,
        "departure": departure,
        "date_reservation": booked,
    }


ROWS = [
    _row(1, "2026-11-10", "2026-11-15"),  # entirely before
    _row(2, "2026-11-18", "2026-11-20"),  # checks out on date_from: last night is the 19th
    _row(3, "2026-11-19", "2026-11-21"),  # last night is date_from
    _row(4, "2026-11-22", "2026-11-23"),  # inside
    _row(5, "2026-11-25", "2026-11-28"),  # arrives on date_to: that night counts
    _row(6, "2026-11-26", "2026-11-30"),  # entirely after
    _row(7, "2026-11-01", "2026-12-31"),  # spans the whole range
]


def test_stays_overlapping_the_range_are_kept_and_the_rest_counted() -> None:
    result = filter_by_stay(ROWS, D("2026-11-20"), D("2026-11-25"))
    assert [r["id_reservation"] for r in result.items] == [3, 4, 5, 7]
    assert result.returned == 7
    assert result.dropped_out_of_range == 3
    assert result.kept == 4
    assert result.server_ignored_filter


def test_typed_reservations_are_filtered_the_same_way() -> None:
    typed = [Reservation.model_validate(r) for r in ROWS]
    result = filter_by_stay(typed, D("2026-11-20"), D("2026-11-25"))
    assert [r.id_reservation for r in result.items] == [3, 4, 5, 7]


def test_rows_with_unreadable_dates_are_dropped_and_counted_apart() -> None:
    rows = [*ROWS[:1], {"id_reservation": 9, "arrival": "soon", "departure": None}]
    result = filter_by_stay(rows, D("2026-11-01"), D("2026-11-30"))
    assert [r["id_reservation"] for r in result.items] == [1]
    assert result.dropped_unreadable == 1
    assert result.dropped_out_of_range == 0


def test_in_house_means_sleeping_there_that_night() -> None:
    result = filter_in_house(ROWS, D("2026-11-20"))
    assert [r["id_reservation"] for r in result.items] == [3, 7]


def test_a_stay_without_nights_counts_on_its_arrival_day() -> None:
    assert stay_overlaps(D("2026-11-20"), D("2026-11-20"), D("2026-11-20"), D("2026-11-20"))
    assert not stay_overlaps(D("2026-11-20"), D("2026-11-20"), D("2026-11-21"), D("2026-11-22"))


def test_a_reversed_range_is_refused() -> None:
    with pytest.raises(ValueError):
        filter_by_stay(ROWS, D("2026-11-25"), D("2026-11-20"))


def test_availability_rows_outside_the_nights_asked_are_dropped() -> None:
    rows = [
        {"date": f"2026-11-{day}", "id_room_type": 12, "rooms_available": 1}
        for day in range(18, 27)
    ]
    result = filter_availability(rows, D("2026-11-20"), D("2026-11-22"))
    assert [r["date"] for r in result.items] == ["2026-11-20", "2026-11-21", "2026-11-22"]
    assert result.dropped_out_of_range == 6


def test_every_date_filter_of_a_list_request_is_enforced() -> None:
    result = enforce_reservation_filters(
        ROWS, {"arrival_from": "2026-11-19", "arrival_to": "2026-11-25", "with_rooms": True}
    )
    assert [r["id_reservation"] for r in result.items] == [3, 4, 5]
    result = enforce_reservation_filters(ROWS, {"departure_to": "2026-11-20"})
    assert [r["id_reservation"] for r in result.items] == [1, 2]


def test_booking_date_filters_compare_at_minute_resolution() -> None:
    rows = [
        _row(1, "2026-11-20", "2026-11-21", "2026-10-01 12:30"),
        _row(2, "2026-11-20", "2026-11-21", "2026-10-02 08:00"),
    ]
    result = enforce_reservation_filters(
        rows,
        {"date_reservation_from": "2026-10-01 00:00", "date_reservation_to": "2026-10-01 12:30"},
    )
    assert [r["id_reservation"] for r in result.items] == [1]


def test_a_request_without_date_filters_keeps_everything() -> None:
    result = enforce_reservation_filters(ROWS, {"with_rooms": True})
    assert result.kept == len(ROWS)
    assert not result.server_ignored_filter
