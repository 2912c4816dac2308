"""The reservation window against every emulator variant: the four tools keep answering.

Each test runs a whole gateway on the booking-system emulator, with an HTTP client
that also keeps the bodies sent to ``reservations/*`` (what the gateway asked, not
what it assumed it asked).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import structlog

from pmsgate.gateway.facilities import Limits
from pmsgate.sandbox.kross.app import create_kross_app
from tests.e2e.conftest import Gateway, add_seeded_facility, gateway_settings, running_gateway

pytestmark = pytest.mark.anyio

RESERVATION_TOOLS = (
    "get-reservation-status",
    "get-in-house-guests",
    "get-incomplete-portals",
    "check-portal-status",
)
BOOKING_DATE = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}$")


class Sent:
    """Bodies the gateway sent to reservations/* operations, in order."""

    def __init__(self) -> None:
        self.bodies: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, request: httpx.Request) -> None:
        path = request.url.path.removeprefix("/v5/")
        if path.startswith("reservations/"):
            self.bodies.append((path, json.loads(request.content or b"{}")))

    def of(self, operation: str) -> list[dict[str, Any]]:
        """The bodies sent to one operation."""
        return [body for path, body in self.bodies if path == operation]


@pytest.fixture
def sent() -> Sent:
    return Sent()


@pytest.fixture
async def kross_recorded(kross_store, sent) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_kross_app(kross_store))
    async with httpx.AsyncClient(
        transport=transport, base_url="http://kross.test", event_hooks={"request": [sent]}
    ) as http:
        yield http


@pytest.fixture
async def gateway(backend, kross_recorded, clock) -> AsyncIterator[Gateway]:
    async with running_gateway(gateway_settings(**backend), kross_recorded, clock) as running:
        yield running


async def facility_at(gateway: Gateway, kross_store, index: int) -> tuple[str, str]:
    record, key = await add_seeded_facility(gateway.services, kross_store, index)
    return record["hotel_id"], key


def in_house_ids(kross_store, hotel_id: str, on: dt.date) -> set[int]:
    """What the emulator itself holds: live reservations staying the night of ``on``."""
    return {
        r.id_reservation
        for r in kross_store.facility(hotel_id).reservations.values()
        if r.holds_room and r.arrival <= on < r.departure
    }


async def answers(gateway: Gateway, key: str, reservation_id: int) -> dict[str, dict[str, Any]]:
    """The four reservation tools' answers (status code checked: never a 5xx)."""
    bodies = {}
    for name in RESERVATION_TOOLS:
        arguments = {"reservation_id": reservation_id} if "status" in name else {}
        answer = await gateway.tool(name, key, **arguments)
        assert answer.status_code == 200, (name, answer.text)
        bodies[name] = answer.json()
    return bodies


def expire(gateway: Gateway, clock) -> None:
    clock.advance(gateway.services.tools.max_age_s("get-reservation-status") + 301)


# --- what is sent -------------------------------------------------------------------------


async def test_the_window_sends_the_filters_public_integrations_use(
    gateway, kross_store, sent, clock
):
    _, key = await facility_at(gateway, kross_store, 0)
    assert (await gateway.tool("get-in-house-guests", key)).status_code == 200
    [body] = sent.of("reservations/get-list")
    assert BOOKING_DATE.match(body["date_reservation_from"])
    assert BOOKING_DATE.match(body["date_reservation_to"])
    booked_from = dt.datetime.strptime(body["date_reservation_from"], "%Y-%m-%d %H:%M")
    assert (clock.now().replace(tzinfo=None) - booked_from).days == 400
    assert body["with_rooms"] is True
    assert body["limit"] == 100
    assert body["offset"] == 0
    assert not {"departure_from", "arrival_to", "arrival_from", "with_guest_portal"} & set(body)


async def test_a_single_lookup_sends_id_reservation(gateway, kross_store, sent, clock):
    hotel_id, key = await facility_at(gateway, kross_store, 0)
    history = kross_store.add_history(hotel_id, 5)
    assert history
    old = min(kross_store.facility(hotel_id).reservations.values(), key=lambda r: r.arrival)
    answer = await gateway.tool("get-reservation-status", key, reservation_id=old.id_reservation)
    assert answer.status_code == 200, answer.text
    assert sent.of("reservations/get-list")[-1] == {
        "id_reservation": old.id_reservation,
        "with_rooms": True,
    }


# --- guest portal shapes ------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["block", "link", "absent"])
async def test_each_portal_shape_leaves_the_four_tools_answering(
    gateway, kross_store, clock, shape
):
    hotel_id, key = await facility_at(gateway, kross_store, 0)
    kross_store.configure(guest_portal_shape=shape)
    today = clock.now().date()
    reservation_id = min(in_house_ids(kross_store, hotel_id, today))
    got = await answers(gateway, key, reservation_id)

    portals = got["get-incomplete-portals"]
    checked = got["check-portal-status"]["data"]
    status = got["get-reservation-status"]["data"]["reservation"]
    if shape == "block":
        assert portals["data"]["unknown"] == 0
        assert checked["portal"]["status"] != "unknown"
        assert checked["complete"] in (True, False)
        return
    # Without a status nothing may be reported as complete or as incomplete: unknown.
    arrivals = [
        r
        for r in kross_store.facility(hotel_id).reservations.values()
        if today <= r.arrival <= today + dt.timedelta(days=7) and r.status != "CANC"
    ]
    assert arrivals
    assert portals["data"]["count"] == 0
    assert portals["data"]["unknown"] == len(arrivals)
    assert portals["meta"]["unknown"] == len(arrivals)
    assert portals["data"]["note"]
    assert checked["complete"] is None
    assert checked["portal"]["status"] == "unknown"
    assert got["check-portal-status"]["meta"]["unknown"] == 1
    assert status["portal_status"] == "unknown"
    if shape == "link":
        assert checked["portal"]["link"].startswith("http")
        assert status["portal_link"] == checked["portal"]["link"]
    else:
        assert checked["portal"]["link"] is None


# --- paging variants ----------------------------------------------------------------------


async def in_house(gateway: Gateway, key: str) -> dict[str, Any]:
    answer = await gateway.tool("get-in-house-guests", key)
    assert answer.status_code == 200, answer.text
    return answer.json()


@pytest.mark.parametrize(
    ("variant", "requests"),
    [
        ({"omit_total_count": True}, 2),  # 100 full, then 80: a short page ends it
        ({"max_page_size": 30}, 6),  # the server lowers the page; 180 rows in 6
    ],
)
async def test_a_paging_variant_still_reads_the_whole_window(
    gateway, kross_store, clock, variant, requests
):
    hotel_id, key = await facility_at(gateway, kross_store, 1)
    await gateway.services.facilities.set_limits(
        hotel_id, Limits(per_minute=20, per_hour=300, per_day=5000)
    )
    baseline = await in_house(gateway, key)
    assert len(kross_store.facility(hotel_id).reservations) == 180
    assert baseline["meta"]["truncated"] is False

    expire(gateway, clock)
    kross_store.configure(**variant)
    before = kross_store.stats.requests_by_operation["reservations/get-list"]
    again = await in_house(gateway, key)
    assert kross_store.stats.requests_by_operation["reservations/get-list"] - before == requests
    assert again["meta"]["truncated"] is False
    assert again["data"] == baseline["data"]
    assert {r["reservation_id"] for r in again["data"]["reservations"]} == in_house_ids(
        kross_store, hotel_id, clock.now().date()
    )


@pytest.mark.parametrize(
    "variant",
    [{"ignore_offset": True}, {"ignore_offset": True, "omit_total_count": True}],
)
async def test_a_server_ignoring_offset_costs_two_reads_and_says_the_window_is_partial(
    gateway, kross_store, variant
):
    _, key = await facility_at(gateway, kross_store, 1)
    kross_store.configure(**variant)
    got = await in_house(gateway, key)
    assert kross_store.stats.requests_by_operation["reservations/get-list"] == 2
    assert got["meta"]["truncated"] is True
    assert got["meta"]["truncated_reason"] in ("offset_ignored", "page_repeated")
    assert got["data"]["complete"] is False
    reservation_id = got["data"]["reservations"][0]["reservation_id"]
    await answers(gateway, key, reservation_id)
    assert kross_store.stats.rate_limited.total() == 0


async def test_a_long_history_is_read_within_the_budget_share_and_served_from_cache(
    gateway, kross_store, clock
):
    hotel_id, key = await facility_at(gateway, kross_store, 0)
    kross_store.add_history(hotel_id, 1200)  # the server ignores every date filter (spec §7)

    first = await in_house(gateway, key)
    # Token included, at most half of the 10 requests a minute.
    assert kross_store.stats.requests_by_hotel[hotel_id] <= 5
    assert first["meta"]["truncated"] is True
    assert first["meta"]["truncated_reason"] == "budget_share"
    assert first["data"]["window_note"]

    spent = kross_store.stats.requests_by_hotel[hotel_id]
    for _ in range(30):
        again = await gateway.tool("get-incomplete-portals", key)
        assert again.status_code == 200
        assert again.json()["meta"]["source"] == "cache"
        assert again.json()["meta"]["truncated"] is True
    assert kross_store.stats.requests_by_hotel[hotel_id] == spent
    assert kross_store.stats.rate_limited.total() == 0


async def test_a_long_history_outside_the_booking_bound_is_never_paged(gateway, kross_store, clock):
    hotel_id, key = await facility_at(gateway, kross_store, 0)
    baseline = await in_house(gateway, key)
    kross_store.add_history(hotel_id, 1200)
    kross_store.configure(ignore_date_filters=False)
    expire(gateway, clock)
    before = kross_store.stats.requests_by_operation["reservations/get-list"]

    again = await in_house(gateway, key)
    # Only history booked in the last 400 days comes back: two pages, the window whole.
    assert kross_store.stats.requests_by_operation["reservations/get-list"] - before == 2
    assert again["meta"]["truncated"] is False
    assert again["data"] == baseline["data"]


# --- malformed rows -----------------------------------------------------------------------


class UnreadableDate(dt.date):
    """A stored date the emulator writes in a form nobody can read (test setup)."""

    def isoformat(self) -> str:
        return "someday"


async def test_a_malformed_row_is_skipped_counted_and_logged_without_values(
    gateway, kross_store, clock
):
    hotel_id, key = await facility_at(gateway, kross_store, 0)
    today = clock.now().date()
    broken_id, odd_id = sorted(in_house_ids(kross_store, hotel_id, today))[:2]
    reservations = kross_store.facility(hotel_id).reservations
    broken = reservations[broken_id]
    broken.arrival = UnreadableDate(broken.arrival.year, broken.arrival.month, broken.arrival.day)
    reservations[odd_id].lang = 5  # type: ignore[assignment]  # an optional field that misfits

    with structlog.testing.capture_logs() as logs:
        got = await in_house(gateway, key)
    assert got["meta"]["skipped_rows"] == 1
    ids = {r["reservation_id"] for r in got["data"]["reservations"]}
    assert ids == in_house_ids(kross_store, hotel_id, today) - {broken_id}
    odd = next(r for r in got["data"]["reservations"] if r["reservation_id"] == odd_id)
    assert odd["language"] is None

    [skipped] = [e for e in logs if e["event"] == "reservation_row_skipped"]
    assert skipped["fields"] == ["arrival"]
    assert skipped["ruid"]
    logged = json.dumps(logs, default=str)
    assert broken.email not in logged
    assert broken.phone not in logged
    assert "someday" not in logged

    for name, body in (await answers(gateway, key, odd_id)).items():
        assert body["meta"]["skipped_rows"] == 1, name


# --- operations ---------------------------------------------------------------------------


async def operation(gateway, key: str, path: str, body: dict[str, Any], idem: str | None = None):
    headers = {"Authorization": f"Bearer {key}"}
    if idem is not None:
        headers["Idempotency-Key"] = idem
    return await gateway.http.post(f"/v1/operations/{path}", json=body, headers=headers)


async def test_the_get_list_operation_never_returns_contact_data_nor_sends_our_filters(
    gateway, kross_store, sent, clock
):
    _, key = await facility_at(gateway, kross_store, 0)
    today = clock.now().date()
    body = {
        "arrival_from": today.isoformat(),
        "arrival_to": (today + dt.timedelta(days=10)).isoformat(),
        "with_guest_portal": True,
        "limit": 200,
    }
    answer = await operation(gateway, key, "reservations/get-list", body)
    assert answer.status_code == 200, answer.text
    rows = answer.json()["data"]
    assert rows
    for row in rows:
        assert "email" not in row
        assert "phone" not in row
        assert body["arrival_from"] <= row["arrival"] <= body["arrival_to"]
    assert sent.of("reservations/get-list") == [{"limit": 200}]


def one_more_night(kross_store, hotel_id: str, clock) -> tuple[Any, dict[str, Any]]:
    """An upcoming reservation whose stay can grow by one night, and that date change."""
    today = clock.now().date()
    facility = kross_store.facility(hotel_id)
    for res in sorted(facility.reservations.values(), key=lambda r: r.arrival):
        if res.arrival <= today or res.status != "CONF":
            continue
        later = res.departure + dt.timedelta(days=1)
        if not any(
            o is not res
            and o.holds_room
            and o.id_room == res.id_room
            and o.overlaps(res.departure, later)
            for o in facility.reservations.values()
        ):
            body = {
                "id_reservation": res.id_reservation,
                "arrival": res.arrival.isoformat(),
                "departure": later.isoformat(),
            }
            return res, body
    raise AssertionError("the seed has no stay that can be extended")


async def test_a_date_change_reads_the_reservation_and_sends_the_whole_record(
    gateway, kross_store, sent, clock
):
    hotel_id, key = await facility_at(gateway, kross_store, 0)
    res, body = one_more_night(kross_store, hotel_id, clock)

    answer = await operation(gateway, key, "reservations/save", body, idem="save-1")
    assert answer.status_code == 200, answer.text
    assert sent.bodies[-2] == (
        "reservations/get-list",
        {"id_reservation": res.id_reservation, "with_rooms": True},
    )
    assert sent.of("reservations/save") == [
        {
            "id_reservation": res.id_reservation,
            "arrival": body["arrival"],
            "departure": body["departure"],
            "label": res.label,
            "email": res.email,
            "phone": res.phone,
            "cod_channel": res.channel,
            "cod_reservation_status": "CONF",
            "rooms": [
                {"id_room_type": res.id_room_type, "id_room": res.id_room, "guests": res.qt_guests}
            ],
        }
    ]
    assert res.departure.isoformat() == body["departure"]

    replay = await operation(gateway, key, "reservations/save", body, idem="save-1")
    assert replay.json() == answer.json()
    assert replay.headers["Idempotent-Replayed"] == "true"
    assert len(sent.of("reservations/save")) == 1
    assert len(sent.of("reservations/get-list")) == 1


async def test_when_the_read_first_fails_nothing_is_sent_and_the_key_is_free(
    gateway, kross_store, sent, clock
):
    hotel_id, key = await facility_at(gateway, kross_store, 0)
    _, body = one_more_night(kross_store, hotel_id, clock)
    await gateway.tool("get-in-house-guests", key)  # the token is held; reads now fail
    kross_store.set_faults(error_rate=1.0)

    failed = await operation(gateway, key, "reservations/save", body, idem="save-2")
    assert failed.status_code == 503
    assert failed.json()["error"]["code"] == "save_read_failed"
    assert kross_store.stats.requests_by_operation["reservations/save"] == 0

    kross_store.clear_faults()
    again = await operation(gateway, key, "reservations/save", body, idem="save-2")
    assert again.status_code == 200, again.text
    assert kross_store.stats.requests_by_operation["reservations/save"] == 1


async def test_a_date_change_of_an_unknown_reservation_is_a_404_and_sends_nothing(
    gateway, kross_store, clock
):
    _, key = await facility_at(gateway, kross_store, 0)
    body = {"id_reservation": 999999, "arrival": "2026-12-01", "departure": "2026-12-03"}
    answer = await operation(gateway, key, "reservations/save", body, idem="save-3")
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "reservation_not_found"
    assert kross_store.stats.requests_by_operation["reservations/save"] == 0


async def test_a_date_change_that_commits_then_times_out_is_recovered_not_resent(
    gateway, kross_store, clock
):
    hotel_id, key = await facility_at(gateway, kross_store, 0)
    res, body = one_more_night(kross_store, hotel_id, clock)
    kross_store.set_faults(commit_then_timeout=1, timeout_mode="disconnect")

    answer = await operation(gateway, key, "reservations/save", body, idem="save-4")
    again = await operation(gateway, key, "reservations/save", body, idem="save-4")
    assert answer.status_code == 200, answer.text
    assert answer.json()["meta"]["recovered"] is True
    assert again.json() == answer.json()
    assert res.departure.isoformat() == body["departure"]
    assert kross_store.stats.requests_by_operation["reservations/save"] == 1


# --- memory bound -------------------------------------------------------------------------


async def test_more_facilities_than_the_parsed_cap_answer_the_same_within_it(
    backend, kross_recorded, kross_store, clock
):
    settings = gateway_settings(**backend, cache_max_parsed=2)
    async with running_gateway(settings, kross_recorded, clock) as gateway:
        facilities = [await facility_at(gateway, kross_store, index) for index in range(3)]
        first = [(await in_house(gateway, key))["data"] for _, key in facilities]
        cache = gateway.services.cache
        # Three windows cached, two kept parsed: the least recently used one went first.
        held = [f"{hotel_id}:reservations" for hotel_id, _ in facilities]
        assert [key in cache._decoded for key in held] == [True, True, True]
        assert [key in cache._parsed for key in held] == [False, True, True]
        reads = kross_store.stats.requests_by_operation["reservations/get-list"]
        # Parsed again from the cached window (no upstream read), the same answers.
        again = [(await in_house(gateway, key))["data"] for _, key in facilities]
        assert again == first
        assert kross_store.stats.requests_by_operation["reservations/get-list"] == reads
        assert len(cache._parsed) == 2
