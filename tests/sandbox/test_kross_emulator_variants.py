"""The booking-system emulator can answer as each public source sees the real system.

Every switch of ``SandboxConfig`` (docs/kross-api.md, "Variants the emulator can switch") is
exercised here over HTTP, plus the get-list filters public integrations send and the history knob.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from pmsgate.clock import ManualClock
from pmsgate.sandbox.kross.app import UNGROUPED
from pmsgate.sandbox.kross.records import Facility, Reservation
from pmsgate.sandbox.kross.store import KrossStore, SandboxConfig
from tests.sandbox.kross_support import (
    DEFAULTS,
    GUEST,
    UA,
    call,
    facility_of,
    get_token,
    session,
)

pytestmark = pytest.mark.anyio


# --- helpers ---------------------------------------------------------------------------------


async def configure(http: httpx.AsyncClient, **switches: Any) -> dict[str, Any]:
    answer = await http.put("/_sandbox/config", json=switches)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


async def rows(
    http: httpx.AsyncClient, headers: dict[str, str], **filters: Any
) -> list[dict[str, Any]]:
    answer = await call(http, headers, "reservations/get-list", {"limit": 500, **filters})
    assert answer.status_code == 200, answer.text
    result: list[dict[str, Any]] = answer.json()["data"]
    return result


def ids(listed: list[dict[str, Any]]) -> list[int]:
    return [r["id_reservation"] for r in listed]


def upcoming_without_guests(facility: Facility) -> Reservation:
    return next(
        r
        for r in sorted(facility.reservations.values(), key=lambda r: r.arrival)
        if r.status in ("CONF", "PEND") and not r.guests
    )


PICTURE = {"filename": "id.jpg", "content_type": "image/jpeg", "data_base64": "/9j/4AAQ"}


# --- the switches themselves -----------------------------------------------------------------


async def test_config_shows_every_variant_with_the_historical_defaults(
    kross_http: httpx.AsyncClient,
) -> None:
    assert (await kross_http.get("/_sandbox/config")).json() == DEFAULTS
    assert vars(SandboxConfig()) == DEFAULTS


async def test_every_variant_is_set_over_http_shown_by_get_and_reset_restores_defaults(
    kross_http: httpx.AsyncClient,
) -> None:
    changed = {
        "ignore_date_filters": False,
        "token_location": "top",
        "guest_portal_shape": "link",
        "ignore_offset": True,
        "omit_total_count": True,
        "max_page_size": 50,
        "login_refusal": "403",
        "token_rejection": "200",
        "grouped_paths": True,
        "unknown_operation": "404",
    }
    assert await configure(kross_http, **changed) == changed
    assert (await kross_http.get("/_sandbox/config")).json() == changed
    # Fields left out are unchanged.
    assert (await configure(kross_http, login_refusal="400"))["token_rejection"] == "200"
    await kross_http.post("/_sandbox/reset")
    assert (await kross_http.get("/_sandbox/config")).json() == DEFAULTS


async def test_store_configure_changes_what_the_control_endpoint_shows(
    kross_http: httpx.AsyncClient, kross_store: KrossStore
) -> None:
    kross_store.configure(guest_portal_shape="absent", login_refusal="200", max_page_size=10)
    shown = (await kross_http.get("/_sandbox/config")).json()
    assert shown == {
        **DEFAULTS,
        "guest_portal_shape": "absent",
        "login_refusal": "200",
        "max_page_size": 10,
    }
    kross_store.configure(max_page_size=0)
    assert (await kross_http.get("/_sandbox/config")).json()["max_page_size"] is None
    kross_store.reset()
    assert vars(kross_store.config) == DEFAULTS


async def test_statuses_of_refusal_variants_may_be_written_as_numbers(
    kross_http: httpx.AsyncClient,
) -> None:
    shown = await configure(kross_http, login_refusal=400, token_rejection=200)
    assert (shown["login_refusal"], shown["token_rejection"]) == ("400", "200")
    assert (await configure(kross_http, unknown_operation=404))["unknown_operation"] == "404"


async def test_unknown_variant_values_are_refused_and_change_nothing(
    kross_http: httpx.AsyncClient,
) -> None:
    for bad in (
        {"guest_portal_shape": "inline"},
        {"login_refusal": "418"},
        {"token_rejection": "403"},
        {"token_rejection": "200-403"},
        {"unknown_operation": "405"},
        {"max_page_size": -1},
        {"token_location": "header"},
    ):
        answer = await kross_http.put("/_sandbox/config", json=bad)
        assert answer.status_code == 400, bad
        assert answer.json()["error_code"] == "INVALID_REQUEST"
    assert (await kross_http.get("/_sandbox/config")).json() == DEFAULTS


# --- guest_portal_shape ----------------------------------------------------------------------


async def test_rows_carry_the_guest_portal_block_by_default(
    kross_http: httpx.AsyncClient,
) -> None:
    _, headers = await session(kross_http)
    for row in await rows(kross_http, headers):
        assert set(row["guest_portal"]) >= {"link", "status", "missing"}
        assert "guest_portal_link" not in row


async def test_rows_carry_only_a_plain_portal_link_when_configured(
    kross_http: httpx.AsyncClient, kross_store: KrossStore
) -> None:
    facility, headers = await session(kross_http)
    await configure(kross_http, guest_portal_shape="link")
    seeded = kross_store.facility(facility["hotel_id"])
    listed = await rows(kross_http, headers)
    assert listed
    for row in listed:
        assert "guest_portal" not in row
        assert row["guest_portal_link"].startswith("https://")
        assert row["guest_portal_link"] == seeded.reservations[row["id_reservation"]].portal_link


async def test_rows_carry_no_portal_at_all_when_it_is_absent(
    kross_http: httpx.AsyncClient,
) -> None:
    _, headers = await session(kross_http)
    await configure(kross_http, guest_portal_shape="absent")
    for row in await rows(kross_http, headers):
        assert "guest_portal" not in row and "guest_portal_link" not in row
        assert row["id_reservation"] and row["arrival"]


async def test_check_in_answers_the_portal_in_the_configured_shape(
    kross_http: httpx.AsyncClient, kross_store: KrossStore
) -> None:
    facility, headers = await session(kross_http)
    res = upcoming_without_guests(kross_store.facility(facility["hotel_id"]))
    body = {"id_reservation": res.id_reservation, "guest": GUEST}
    block = (await call(kross_http, headers, "check-in-guest", body)).json()["data"]
    assert block["guest_portal"]["guests_registered"] == 1
    await configure(kross_http, guest_portal_shape="link")
    link = (await call(kross_http, headers, "check-in-guest", body)).json()["data"]
    assert link["guest_portal_link"] == res.portal_link and "guest_portal" not in link
    await configure(kross_http, guest_portal_shape="absent")
    absent = (await call(kross_http, headers, "check-in-guest", body)).json()["data"]
    assert set(absent) == {"id_guest", "id_reservation"}


# --- paging variants -------------------------------------------------------------------------


async def test_offset_is_honoured_by_default(kross_http: httpx.AsyncClient) -> None:
    _, headers = await session(kross_http)
    first = await call(kross_http, headers, "reservations/get-list", {"limit": 5})
    second = await call(kross_http, headers, "reservations/get-list", {"limit": 5, "offset": 5})
    assert second.json()["offset"] == 5
    assert not set(ids(first.json()["data"])) & set(ids(second.json()["data"]))


async def test_server_ignoring_offset_answers_the_first_rows_for_every_offset(
    kross_http: httpx.AsyncClient,
) -> None:
    _, headers = await session(kross_http)
    await configure(kross_http, ignore_offset=True)
    first = await call(kross_http, headers, "reservations/get-list", {"limit": 5})
    later = await call(kross_http, headers, "reservations/get-list", {"limit": 5, "offset": 5})
    far = await call(kross_http, headers, "reservations/get-list", {"limit": 5, "offset": 10_000})
    assert ids(later.json()["data"]) == ids(first.json()["data"])
    assert ids(far.json()["data"]) == ids(first.json()["data"])
    # The envelope reports the offset the server applied.
    assert later.json()["offset"] == far.json()["offset"] == 0
    assert later.json()["total_count"] == first.json()["total_count"]


async def test_list_answers_carry_no_total_count_and_no_count_when_configured(
    kross_http: httpx.AsyncClient,
) -> None:
    _, headers = await session(kross_http)
    await configure(kross_http, omit_total_count=True)
    listed = await call(kross_http, headers, "reservations/get-list", {"limit": 3, "offset": 2})
    assert listed.status_code == 200
    body = listed.json()
    assert "total_count" not in body and "count" not in body
    assert (body["limit"], body["offset"], len(body["data"])) == (3, 2, 3)
    calendar = await call(
        kross_http,
        headers,
        "calendar/get-availability",
        {"date_from": "2026-11-22", "date_to": "2026-11-23"},
    )
    assert calendar.json()["data"]
    assert "total_count" not in calendar.json() and "count" not in calendar.json()


async def test_page_size_is_capped_silently_and_the_answer_shows_the_cap(
    kross_http: httpx.AsyncClient, kross_store: KrossStore
) -> None:
    facility, headers = await session(kross_http)
    total = len(kross_store.facility(facility["hotel_id"]).reservations)
    await configure(kross_http, max_page_size=7)
    answer = await call(kross_http, headers, "reservations/get-list", {"limit": 500})
    assert answer.status_code == 200
    body = answer.json()
    assert (body["limit"], body["count"], len(body["data"])) == (7, 7, 7)
    assert body["total_count"] == total > 7
    # A capping server lowers a limit above the documented maximum instead of refusing it.
    above = await call(kross_http, headers, "reservations/get-list", {"limit": 1000})
    assert above.status_code == 200 and above.json()["limit"] == 7
    smaller = await call(kross_http, headers, "reservations/get-list", {"limit": 3})
    assert smaller.json()["limit"] == 3
    await configure(kross_http, max_page_size=0)
    uncapped = await call(kross_http, headers, "reservations/get-list", {"limit": 500})
    assert uncapped.json()["limit"] == 500 and uncapped.json()["count"] == total
    refused = await call(kross_http, headers, "reservations/get-list", {"limit": 501})
    assert refused.status_code == 400 and refused.json()["error_code"] == "INVALID_REQUEST"


# --- login_refusal ---------------------------------------------------------------------------


async def wrong_login(http: httpx.AsyncClient) -> httpx.Response:
    facility = await facility_of(http)
    return await get_token(http, {**facility, "password": "wrong"})


async def test_login_refused_as_http_401_auth_failed_by_default(
    kross_http: httpx.AsyncClient,
) -> None:
    answer = await wrong_login(kross_http)
    assert answer.status_code == 401
    assert answer.json()["error_code"] == "AUTH_FAILED"


async def test_login_refused_as_http_400_with_a_numeric_error_code_when_configured(
    kross_http: httpx.AsyncClient,
) -> None:
    await configure(kross_http, login_refusal="400")
    answer = await wrong_login(kross_http)
    assert answer.status_code == 400
    body = answer.json()
    assert body["error_code"] == 1001 and body["error_message"] and body["ruid"]
    assert "data" not in body


async def test_login_refused_as_http_403_json_unlike_the_edge_block_when_configured(
    kross_http: httpx.AsyncClient,
) -> None:
    await configure(kross_http, login_refusal="403")
    answer = await wrong_login(kross_http)
    assert answer.status_code == 403
    assert answer.headers["content-type"].startswith("application/json")
    assert "1010" not in answer.text
    assert answer.json()["error_code"] == "INVALID_CREDENTIALS"


async def test_login_refused_as_http_200_with_an_error_code_when_configured(
    kross_http: httpx.AsyncClient,
) -> None:
    await configure(kross_http, login_refusal="200")
    answer = await wrong_login(kross_http)
    assert answer.status_code == 200
    body = answer.json()
    assert body["error_code"] == "LOGIN_FAILED" and body["error_message"]
    assert "data" not in body and "auth_token" not in body


async def test_every_login_refusal_variant_spells_its_code_differently(
    kross_http: httpx.AsyncClient,
) -> None:
    seen: dict[str, tuple[int, Any]] = {}
    for variant in ("401", "400", "403", "200"):
        await configure(kross_http, login_refusal=variant)
        answer = await wrong_login(kross_http)
        seen[variant] = (answer.status_code, answer.json()["error_code"])
    assert [status for status, _ in seen.values()] == [401, 400, 403, 200]
    codes = [code for _, code in seen.values()]
    assert len(set(codes)) == 4 and codes.count("AUTH_FAILED") == 1


async def test_good_credentials_still_get_a_token_under_every_login_refusal_variant(
    kross_http: httpx.AsyncClient,
) -> None:
    facility = await facility_of(kross_http)
    for variant in ("400", "403", "200"):
        await configure(kross_http, login_refusal=variant)
        answer = await get_token(kross_http, facility)
        assert answer.status_code == 200 and answer.json()["data"]["auth_token"]


# --- token_rejection -------------------------------------------------------------------------


async def test_unknown_token_refused_as_http_401_invalid_token_by_default(
    kross_http: httpx.AsyncClient,
) -> None:
    headers = {**UA, "Authorization": "Bearer nope"}
    answer = await call(kross_http, headers, "reservations/get-list", {})
    assert answer.status_code == 401 and answer.json()["error_code"] == "INVALID_TOKEN"


async def test_expired_token_refused_as_http_200_with_an_error_code_when_configured(
    kross_http: httpx.AsyncClient, clock: ManualClock
) -> None:
    _, headers = await session(kross_http)
    await configure(kross_http, token_rejection="200")
    clock.advance(7 * 24 * 3600)
    for auth in (headers, {**UA, "Authorization": "Bearer nope"}, UA):
        answer = await call(kross_http, auth, "reservations/get-list", {})
        assert answer.status_code == 200
        body = answer.json()
        assert body["error_code"] == "TOKEN_EXPIRED" and body["error_message"]
        assert "data" not in body and "total_count" not in body


async def test_a_dead_token_is_answered_as_a_200_carrying_error_code_401_when_configured(
    kross_http: httpx.AsyncClient, clock: ManualClock
) -> None:
    _, headers = await session(kross_http)
    await configure(kross_http, token_rejection="200-401")
    clock.advance(7 * 24 * 3600)
    for auth in (headers, {**UA, "Authorization": "Bearer nope"}, UA):
        answer = await call(kross_http, auth, "reservations/get-list", {})
        assert answer.status_code == 200
        body = answer.json()
        # the {error_code, error_message, ruid} family: the status as a number
        assert body["error_code"] == 401 and body["error_message"] and body["ruid"]
        assert "data" not in body


# --- unknown_operation -----------------------------------------------------------------------


async def test_an_unknown_operation_is_answered_in_the_configured_shape(
    kross_http: httpx.AsyncClient,
) -> None:
    _, headers = await session(kross_http)
    named = await call(kross_http, headers, "calendar/get-calendar", {})
    assert named.status_code == 404 and named.json()["error_code"] == "OPERATION_NOT_FOUND"

    await configure(kross_http, unknown_operation="404")
    numbered = await call(kross_http, headers, "calendar/get-calendar", {})
    assert numbered.status_code == 404
    assert numbered.json()["error_code"] == 404 and numbered.json()["ruid"]

    await configure(kross_http, unknown_operation="plain")
    plain = await call(kross_http, headers, "calendar/get-calendar", {})
    assert plain.status_code == 404 and plain.text == "Not Found"
    assert not plain.headers["content-type"].startswith("application/json")


async def test_an_unknown_operation_shape_leaves_a_missing_object_named(
    kross_http: httpx.AsyncClient,
) -> None:
    _, headers = await session(kross_http)
    await configure(kross_http, unknown_operation="404")
    missing = await call(kross_http, headers, "get-house-manual", {"id_room_type": 999_999})
    assert missing.status_code == 404 and missing.json()["error_code"] == "NOT_FOUND"


# --- grouped_paths ---------------------------------------------------------------------------


async def ungrouped_bodies(kross_store: KrossStore, hotel_id: str) -> dict[str, dict[str, Any]]:
    res = upcoming_without_guests(kross_store.facility(hotel_id))
    return {
        "get-check-in-instructions": {"id_reservation": res.id_reservation},
        "get-house-manual": {"id_room_type": res.id_room_type},
        "get-contract": {"id_room_type": res.id_room_type},
        "check-in-guest": {"id_reservation": res.id_reservation, "guest": GUEST},
        "save-guest-pictures": {"id_reservation": res.id_reservation, "pictures": [PICTURE]},
    }


async def test_ungrouped_operations_answer_with_and_without_the_group_by_default(
    kross_http: httpx.AsyncClient, kross_store: KrossStore
) -> None:
    facility, headers = await session(kross_http)
    bodies = await ungrouped_bodies(kross_store, facility["hotel_id"])
    for name in UNGROUPED:
        for path in (name, f"reservations/{name}"):
            answer = await call(kross_http, headers, path, bodies[name])
            assert answer.status_code == 200, (path, answer.text)
            assert answer.json()["data"]
    # Both spellings count as the one operation.
    stats = (await kross_http.get("/_sandbox/stats")).json()
    assert all(stats["requests"]["by_operation"][name] == 2 for name in UNGROUPED)


async def test_grouped_paths_answer_only_under_reservations_when_configured(
    kross_http: httpx.AsyncClient, kross_store: KrossStore
) -> None:
    facility, headers = await session(kross_http)
    bodies = await ungrouped_bodies(kross_store, facility["hotel_id"])
    await configure(kross_http, grouped_paths=True)
    for name in UNGROUPED:
        bare = await call(kross_http, headers, name, bodies[name])
        assert bare.status_code == 404, name
        assert bare.json()["error_code"] == "OPERATION_NOT_FOUND"
        grouped = await call(kross_http, headers, f"reservations/{name}", bodies[name])
        assert grouped.status_code == 200, (name, grouped.text)
    # Operations that always had a group are unaffected.
    listed = await call(kross_http, headers, "reservations/get-list", {"limit": 1})
    assert listed.status_code == 200


# --- get-list filters public integrations send -----------------------------------------------


async def test_list_filters_by_reservation_room_and_property(
    kross_http: httpx.AsyncClient, kross_store: KrossStore
) -> None:
    facility, headers = await session(kross_http)
    seeded = kross_store.facility(facility["hotel_id"])
    res = next(iter(seeded.reservations.values()))
    assert ids(await rows(kross_http, headers, id_reservation=res.id_reservation)) == [
        res.id_reservation
    ]
    on_room = await rows(kross_http, headers, id_room=res.id_room)
    expected = {r.id_reservation for r in seeded.reservations.values() if r.id_room == res.id_room}
    assert set(ids(on_room)) == expected
    assert {r["rooms"][0]["id_room"] for r in on_room} == {res.id_room}
    everything = await rows(kross_http, headers)
    assert len(await rows(kross_http, headers, id_property=seeded.id_property)) == len(everything)
    assert await rows(kross_http, headers, id_property=seeded.id_property + 1000) == []
    # Lax JSON, as integrators send it.
    assert ids(await rows(kross_http, headers, id_reservation=str(res.id_reservation))) == [
        res.id_reservation
    ]


async def test_rows_carry_rooms_when_with_rooms_is_true_or_omitted_and_not_when_false(
    kross_http: httpx.AsyncClient,
) -> None:
    _, headers = await session(kross_http)
    for listed in (await rows(kross_http, headers), await rows(kross_http, headers, with_rooms=1)):
        assert all(
            set(r["rooms"][0]) == {"id_room", "id_room_type", "name_room_type", "qt_guests"}
            for r in listed
        )
    assert all("rooms" not in r for r in await rows(kross_http, headers, with_rooms=False))


async def test_list_filters_by_status_given_as_one_code_a_list_or_a_comma_list(
    kross_http: httpx.AsyncClient, kross_store: KrossStore
) -> None:
    facility, headers = await session(kross_http)
    seeded = kross_store.facility(facility["hotel_id"])
    confirmed = await rows(kross_http, headers, cod_reservation_status="CONF")
    assert confirmed and {r["cod_reservation_status"] for r in confirmed} == {"CONF"}
    expected = {
        r.id_reservation for r in seeded.reservations.values() if r.status in {"CONF", "PEND"}
    }
    for spelling in (["CONF", "PEND"], "CONF,PEND", "CONF, PEND"):
        listed = await rows(kross_http, headers, cod_reservation_status=spelling)
        assert set(ids(listed)) == expected, spelling


async def test_booking_date_filters_select_by_creation_date_when_honoured(
    kross_http: httpx.AsyncClient, kross_store: KrossStore
) -> None:
    facility, headers = await session(kross_http)
    await configure(kross_http, ignore_date_filters=False)
    seeded = kross_store.facility(facility["hotel_id"])
    low, high = datetime(2026, 10, 1, 0, 0), datetime(2026, 10, 31, 23, 59)
    listed = await rows(
        kross_http,
        headers,
        date_reservation_from="2026-10-01 00:00",
        date_reservation_to="2026-10-31 23:59",
    )
    expected = {
        r.id_reservation for r in seeded.reservations.values() if low <= r.date_reservation <= high
    }
    assert expected and set(ids(listed)) == expected
    assert all("2026-10-01 00:00" <= r["date_reservation"] <= "2026-10-31 23:59" for r in listed)
    # A bare date as the upper bound covers its whole day.
    bare = await rows(
        kross_http, headers, date_reservation_from="2026-10-01", date_reservation_to="2026-10-31"
    )
    assert set(ids(bare)) == expected


async def test_every_date_filter_is_ignored_when_the_server_ignores_date_filters(
    kross_http: httpx.AsyncClient,
) -> None:
    _, headers = await session(kross_http)
    await configure(kross_http, ignore_date_filters=True)
    everything = ids(await rows(kross_http, headers))
    for date_filter in (
        {"date_reservation_from": "2026-11-20 00:00", "date_reservation_to": "2026-11-21 00:00"},
        {"arrival_from": "2026-12-01", "arrival_to": "2026-12-01"},
        {"departure_from": "2027-01-01"},
    ):
        assert ids(await rows(kross_http, headers, **date_filter)) == everything, date_filter
    # The non-date filters still apply.
    assert len(await rows(kross_http, headers, cod_reservation_status="CANC")) < len(everything)


def test_seeded_reservations_were_booked_before_arrival_and_before_now(
    kross_store: KrossStore,
) -> None:
    now = kross_store.clock.now().replace(tzinfo=None)
    for facility in kross_store.facilities():
        for res in facility.reservations.values():
            assert res.date_reservation.date() < res.arrival
            assert res.date_reservation < now
            assert res.date_reservation.date() >= res.arrival - timedelta(days=120)


# --- history ---------------------------------------------------------------------------------


def test_history_is_deterministic_and_reset_forgets_it(clock: ManualClock) -> None:
    first, second = KrossStore(seed=7, clock=clock), KrossStore(seed=7, clock=clock)
    hotel_id = first.facilities()[0].hotel_id
    for store in (first, second):
        store.add_history(hotel_id, 40)
        store.add_history(hotel_id, 25)
    assert first.facilities() == second.facilities()
    seeded = len(KrossStore(seed=7, clock=clock).facility(hotel_id).reservations)
    assert len(first.facility(hotel_id).reservations) == seeded + 65
    first.reset()
    assert len(first.facility(hotel_id).reservations) == seeded


async def test_a_facility_can_get_1200_past_reservations_spread_over_years(
    kross_http: httpx.AsyncClient, kross_store: KrossStore
) -> None:
    facility, headers = await session(kross_http)
    hotel_id = facility["hotel_id"]
    seeded = kross_store.facility(hotel_id)
    before = dict(seeded.reservations)
    wanted = 1200 - len(before)
    answer = await kross_http.post(
        f"/_sandbox/facilities/{hotel_id}/history", json={"count": wanted}
    )
    assert answer.status_code == 200
    assert answer.json() == {"hotel_id": hotel_id, "added": wanted, "reservations": 1200}
    added = [r for i, r in seeded.reservations.items() if i not in before]
    assert len(added) == wanted
    earliest_seeded = min(r.arrival for r in before.values())
    assert all(r.departure <= earliest_seeded and r.status in ("CHOUT", "CANC") for r in added)
    assert all(r.date_reservation.date() < r.arrival for r in added)
    assert max(r.arrival for r in added) - min(r.arrival for r in added) > timedelta(days=2 * 365)
    # Live stays never share a room night, history included.
    live = [r for r in seeded.reservations.values() if r.holds_room]
    for res in live:
        assert not any(
            o is not res and o.id_room == res.id_room and o.overlaps(res.arrival, res.departure)
            for o in live
        )
    # Ids stay unique across facilities, and later records do not collide with history.
    every_id = [i for f in kross_store.facilities() for i in f.reservations]
    assert len(every_id) == len(set(every_id))
    paged: list[int] = []
    for offset in range(0, 1200, 500):
        page = await call(
            kross_http, headers, "reservations/get-list", {"limit": 500, "offset": offset}
        )
        assert page.json()["total_count"] == 1200
        paged += ids(page.json()["data"])
    assert len(paged) == len(set(paged)) == 1200
    payment = await call(
        kross_http,
        headers,
        "reservations/add-payment",
        {"id_reservation": added[0].id_reservation, "amount": 10},
    )
    every_payment = [
        p.id_payment
        for f in kross_store.facilities()
        for r in f.reservations.values()
        for p in r.payments
    ]
    assert payment.status_code == 200 and len(every_payment) == len(set(every_payment))


async def test_history_control_refuses_unknown_facilities_and_bad_counts(
    kross_http: httpx.AsyncClient,
) -> None:
    unknown = await kross_http.post("/_sandbox/facilities/1/history", json={"count": 5})
    assert unknown.status_code == 404 and unknown.json()["error_code"] == "NOT_FOUND"
    hotel_id = (await facility_of(kross_http))["hotel_id"]
    for count in (0, -3, 1_000_000):
        bad = await kross_http.post(
            f"/_sandbox/facilities/{hotel_id}/history", json={"count": count}
        )
        assert bad.status_code == 400 and bad.json()["error_code"] == "INVALID_REQUEST"
