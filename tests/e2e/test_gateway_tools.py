"""The six tools through the gateway's HTTP API, against the booking-system emulator."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from tests.support.answers import assert_error
from tests.support.tools import documented_tool_calls

pytestmark = pytest.mark.anyio


async def test_tool_list_names_the_six_tools_with_described_parameters(gateway):
    answer = await gateway.http.get("/v1/tools")
    tools = {t["name"]: t for t in answer.json()["tools"]}
    assert sorted(tools) == sorted(
        [
            "check-availability",
            "get-reservation-status",
            "get-in-house-guests",
            "get-incomplete-portals",
            "check-portal-status",
            "get-checkin-instructions",
        ]
    )
    for tool in tools.values():
        for parameter in tool["input_schema"]["properties"].values():
            assert parameter["description"]


async def test_every_tool_answers_with_data_and_meta(gateway, facility, kross_store, clock):
    _, key = facility
    today = clock.now().date()
    listed = await gateway.tool("get-in-house-guests", key)
    assert listed.status_code == 200, listed.text
    body = listed.json()
    assert body["meta"]["source"] == "upstream"
    in_house = body["data"]["reservations"]
    assert body["data"]["count"] == len(in_house)
    reservation_id = in_house[0]["reservation_id"]

    arrival = today + dt.timedelta(days=3)
    calls = documented_tool_calls(reservation_id, arrival, listing="get-incomplete-portals")
    for name, arguments in calls.items():
        answer = await gateway.tool(name, key, **arguments)
        assert answer.status_code == 200, (name, answer.text)
        meta = answer.json()["meta"]
        assert set(meta) >= {"source", "age_s", "stale", "count", "dropped_out_of_range"}


async def test_two_hundred_rapid_calls_cost_one_upstream_read_and_never_fail(
    gateway, facility, kross_store
):
    record, key = facility
    answers = [await gateway.tool("get-in-house-guests", key) for _ in range(200)]
    assert {a.status_code for a in answers} == {200}
    stats = kross_store.stats
    assert stats.requests_by_operation["reservations/get-list"] == 1
    assert stats.requests_by_hotel[record["hotel_id"]] <= 10
    assert stats.rate_limited.total() == 0


async def test_four_reservation_tools_share_one_cached_window(gateway, facility, kross_store):
    _, key = facility
    first = (await gateway.tool("get-in-house-guests", key)).json()
    reservation_id = first["data"]["reservations"][0]["reservation_id"]
    for name, arguments in [
        ("get-reservation-status", {"reservation_id": reservation_id}),
        ("get-incomplete-portals", {}),
        ("check-portal-status", {"reservation_id": reservation_id}),
    ]:
        answer = await gateway.tool(name, key, **arguments)
        assert answer.json()["meta"]["source"] == "cache"
    assert kross_store.stats.requests_by_operation["reservations/get-list"] == 1


async def test_thousand_concurrent_calls_make_one_token_request_and_respect_limits(
    gateway, facility, kross_store
):
    import anyio

    record, key = facility
    statuses: list[int] = []

    async def one() -> None:
        statuses.append((await gateway.tool("get-incomplete-portals", key)).status_code)

    async with anyio.create_task_group() as group:
        for _ in range(1000):
            group.start_soon(one)
    assert statuses.count(200) == 1000
    assert kross_store.stats.tokens_issued[record["hotel_id"]] == 1
    assert kross_store.stats.requests_by_hotel[record["hotel_id"]] <= 10
    assert kross_store.stats.rate_limited.total() == 0


async def test_an_old_answer_is_refreshed_after_its_freshness_bound(
    gateway, facility, kross_store, clock
):
    _, key = facility
    await gateway.tool("get-in-house-guests", key)
    clock.advance(gateway.services.tools.max_age_s("get-in-house-guests") + 1)
    again = await gateway.tool("get-in-house-guests", key)
    assert again.json()["meta"]["source"] == "upstream"
    assert kross_store.stats.requests_by_operation["reservations/get-list"] == 2


async def test_with_no_budget_left_the_last_answer_is_served_marked_stale(
    gateway, facility, kross_store, clock
):
    record, key = facility
    limits = {"per_minute": 2, "per_hour": 2, "per_day": 5000}
    from pmsgate.gateway.facilities import Limits

    await gateway.services.facilities.set_limits(record["hotel_id"], Limits(**limits))
    await gateway.tool("get-in-house-guests", key)  # token + read: the minute is spent
    clock.advance(gateway.services.tools.max_age_s("get-in-house-guests") + 1)
    stale = await gateway.tool("get-in-house-guests", key)
    assert stale.status_code == 200
    assert stale.json()["meta"]["stale"] is True
    assert stale.json()["meta"]["age_s"] > 0
    assert kross_store.stats.rate_limited.total() == 0


async def test_with_no_budget_and_nothing_cached_the_caller_gets_429_with_retry_after(
    gateway, facility, clock
):
    record, key = facility
    from pmsgate.gateway.facilities import Limits

    await gateway.services.facilities.set_limits(
        record["hotel_id"], Limits(per_minute=2, per_hour=300, per_day=5000)
    )
    await gateway.tool("get-in-house-guests", key)
    refused = await gateway.availability(key, clock.now().date())
    assert_error(refused, 429, "upstream_budget_exhausted")
    assert int(refused.headers["Retry-After"]) >= 1


async def test_invalid_arguments_get_a_422_naming_the_field(gateway, facility):
    _, key = facility
    answer = await gateway.tool("check-availability", key, arrival="tomorrow", departure="x")
    assert_error(answer, 422, "invalid_arguments")
    unknown = await gateway.tool("get-reservation-status", key, reservation_id=1, guest="x")
    assert unknown.json()["error"]["code"] == "invalid_arguments"
    backwards = await gateway.tool(
        "check-availability", key, arrival="2026-12-05", departure="2026-12-01"
    )
    assert backwards.json()["error"]["code"] == "invalid_date_range"


async def test_unknown_tool_and_unknown_reservation_are_404s(gateway, facility):
    _, key = facility
    assert (await gateway.tool("get-house-manual", key)).json()["error"]["code"] == "unknown_tool"
    missing = await gateway.tool("get-reservation-status", key, reservation_id=999999)
    assert_error(missing, 404, "reservation_not_found")


async def test_tool_answers_drop_what_the_server_returned_out_of_range(gateway, facility):
    _, key = facility
    answer = (await gateway.tool("get-in-house-guests", key)).json()
    assert answer["meta"]["dropped_out_of_range"] > 0
    for reservation in answer["data"]["reservations"]:
        assert reservation["arrival"] <= answer["data"]["date"] < reservation["departure"]


async def test_an_ageing_answer_is_refreshed_in_the_background_before_it_expires(
    gateway, facility, kross_store, clock
):
    _, key = facility
    await gateway.tool("get-in-house-guests", key)
    clock.advance(gateway.services.tools.max_age_s("get-in-house-guests") * 0.8)
    served = await gateway.tool("get-in-house-guests", key)
    await gateway.services.gateway.settle()
    assert served.json()["meta"]["source"] == "cache"
    assert kross_store.stats.requests_by_operation["reservations/get-list"] == 2
    after = await gateway.tool("get-in-house-guests", key)
    assert after.json()["meta"]["age_s"] == 0


async def test_background_refreshes_leave_the_reserved_budget_to_interactive_calls(
    gateway, facility, kross_store, clock
):
    from pmsgate.gateway.facilities import Limits

    record, key = facility
    await gateway.services.facilities.set_limits(
        record["hotel_id"], Limits(per_minute=4, per_hour=4, per_day=5000)
    )
    await gateway.tool("get-in-house-guests", key)  # token + read: half the hour is used
    max_age = gateway.services.tools.max_age_s("get-in-house-guests")
    clock.advance(max_age * 0.8)
    await gateway.tool("get-in-house-guests", key)
    await gateway.services.gateway.settle()
    assert kross_store.stats.requests_by_operation["reservations/get-list"] == 1

    clock.advance(max_age * 0.3)
    interactive = await gateway.tool("get-in-house-guests", key)
    assert interactive.json()["meta"]["source"] == "upstream"
    assert kross_store.stats.requests_by_operation["reservations/get-list"] == 2


async def test_any_range_inside_the_availability_window_is_answered_from_one_read(
    gateway, facility, kross_store, clock
):
    _, key = facility
    today = clock.now().date()
    for offset, nights in [(1, 2), (5, 3), (20, 7), (60, 1), (85, 4)]:
        arrival = today + dt.timedelta(days=offset)
        answer = await gateway.availability(key, arrival, nights)
        assert answer.status_code == 200
        assert answer.json()["data"]["nights"] == nights
    assert kross_store.stats.requests_by_operation["calendar/get-availability"] == 1


def nights_free(store: Any, hotel_id: str, arrival: dt.date, departure: dt.date) -> dict[int, int]:
    """What the emulator itself says: per apartment, the nights of the stay with a free room."""
    counts: dict[int, int] = {}
    for row in store.availability(hotel_id, arrival, departure - dt.timedelta(days=1)):
        room_type = row.apartment.id_room_type
        counts[room_type] = counts.get(room_type, 0) + (row.rooms_available > 0)
    return counts


async def test_a_refetched_availability_window_answers_with_the_new_rooms(
    gateway, facility, kross_store, clock
):
    record, key = facility
    hotel_id = record["hotel_id"]
    today = clock.now().date()
    reservations = kross_store.facility(hotel_id).reservations
    # A future stay whose cancellation frees a night (its apartment is otherwise full).
    for booked in sorted(reservations.values(), key=lambda r: r.arrival):
        if not booked.holds_room or booked.arrival <= today:
            continue
        window = (booked.arrival, booked.departure)
        before_truth = nights_free(kross_store, hotel_id, *window)
        del reservations[booked.id_reservation]
        changed = nights_free(kross_store, hotel_id, *window) != before_truth
        reservations[booked.id_reservation] = booked
        if changed:
            break
    else:
        pytest.fail("the seed has no fully booked future night")
    stay = {"arrival": window[0].isoformat(), "departure": window[1].isoformat()}

    def answered(answer: Any) -> dict[int, int]:
        return {a["apartment_id"]: a["nights_free"] for a in answer.json()["data"]["apartments"]}

    assert answered(await gateway.tool("check-availability", key, **stay)) == before_truth
    # The same cached window again (parsed once): the same answer.
    assert answered(await gateway.tool("check-availability", key, **stay)) == before_truth

    del reservations[booked.id_reservation]
    clock.advance(gateway.services.tools.max_age_s("check-availability") + 1)
    after = answered(await gateway.tool("check-availability", key, **stay))
    assert after == nights_free(kross_store, hotel_id, *window) != before_truth
    assert kross_store.stats.requests_by_operation["calendar/get-availability"] == 2


async def test_an_unreadable_availability_night_is_skipped_and_counted_never_a_500(
    gateway, facility, kross_store, clock
):
    record, key = facility
    today = clock.now().date()
    broken, *others = kross_store.facility(record["hotel_id"]).apartments.values()
    broken.name = 5  # type: ignore[assignment]  # a night row nobody can read (test setup)

    answer = await gateway.availability(key, today + dt.timedelta(days=3))

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["meta"]["skipped_rows"] > 0
    listed = {a["apartment_id"] for a in body["data"]["apartments"]}
    assert broken.id_room_type not in listed
    assert listed == {a.id_room_type for a in others}


@pytest.mark.parametrize(
    ("arrival", "departure"),
    [("0001-01-01", "0001-01-03"), ("9999-12-01", "9999-12-03"), (0, 2), ("0", "2")],
)
async def test_absurd_dates_get_a_422_with_the_sane_range_and_nothing_is_sent_upstream(
    gateway, facility, kross_store, arrival, departure
):
    _, key = facility
    before = kross_store.stats.requests_total
    answer = await gateway.tool("check-availability", key, arrival=arrival, departure=departure)
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "invalid_arguments"
    # Out of range: the hint gives the range; not a date at all: the message gives the form.
    assert "years" in error["hint"] or "YYYY-MM-DD" in error["message"]
    assert kross_store.stats.requests_total == before


async def test_dates_inside_the_sane_range_are_answered(gateway, facility, clock):
    _, key = facility
    soon = clock.now().date() + dt.timedelta(days=2 * 365)
    answer = await gateway.availability(key, soon)
    assert answer.status_code == 200, answer.text
