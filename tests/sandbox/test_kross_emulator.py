"""The booking-system emulator honours docs/kross-api.md: shapes, quirks, limits and faults."""

from __future__ import annotations

import base64
import re
from datetime import date, timedelta
from typing import Any

import anyio
import httpx
import pytest

from pmsgate.clock import ManualClock
from pmsgate.sandbox.kross.records import Facility, Reservation
from pmsgate.sandbox.kross.seed import FACILITY_COUNT, SANDBOX_PARTNER_API_KEY, build_facilities
from pmsgate.sandbox.kross.store import KrossStore
from tests.sandbox.kross_support import (
    DEFAULTS,
    GUEST,
    TODAY,
    UA,
    call,
    credentials,
    facility_of,
    get_token,
    session,
)

pytestmark = pytest.mark.anyio


# --- helpers ---------------------------------------------------------------------------------


def live(facility: Facility) -> list[Reservation]:
    return [r for r in facility.reservations.values() if r.holds_room]


async def seeded_session(
    kross_http: httpx.AsyncClient, kross_store: KrossStore
) -> tuple[dict[str, str], Facility]:
    """Headers with a valid token (see ``session``), and the seeded state of their facility."""
    facility, headers = await session(kross_http)
    return headers, kross_store.facility(facility["hotel_id"])


async def next_arrival(
    kross_http: httpx.AsyncClient, kross_store: KrossStore
) -> tuple[dict[str, str], Reservation]:
    """Headers with a valid token (see ``session``) and its facility's next arrival."""
    headers, seeded = await seeded_session(kross_http, kross_store)
    return headers, upcoming(seeded)[0]


def upcoming(facility: Facility) -> list[Reservation]:
    return sorted(
        (r for r in live(facility) if r.status in ("CONF", "PEND") and r.arrival > TODAY),
        key=lambda r: r.arrival,
    )


async def move_stay(
    http: httpx.AsyncClient,
    headers: dict[str, str],
    res: Reservation,
    arrival: date,
    departure: date,
) -> httpx.Response:
    """reservations/save with the reservation's new dates."""
    body = {
        "id_reservation": res.id_reservation,
        "arrival": arrival.isoformat(),
        "departure": departure.isoformat(),
    }
    return await call(http, headers, "reservations/save", body)


def room_is_free(facility: Facility, res: Reservation, start: date, end: date) -> bool:
    return not any(
        o is not res and o.id_room == res.id_room and o.overlaps(start, end) for o in live(facility)
    )


def picture(content_type: str = "image/jpeg", size: int = 1000) -> dict[str, Any]:
    return {
        "filename": "passport.jpg",
        "content_type": content_type,
        "data_base64": base64.b64encode(b"\xff" * size).decode(),
    }


# --- seed data ---------------------------------------------------------------------------------


def test_same_seed_and_start_time_give_identical_data(clock: ManualClock) -> None:
    first = build_facilities(7, clock.now())
    assert build_facilities(7, clock.now()) == first
    assert build_facilities(8, clock.now()) != first


def test_facility_count_is_optional_and_scales_the_sandbox(clock: ManualClock) -> None:
    # The default is unchanged (the benchmark asks for more facilities explicitly).
    assert build_facilities(7, clock.now(), FACILITY_COUNT) == build_facilities(7, clock.now())
    store = KrossStore(seed=7, clock=clock, facility_count=50)
    many = store.facilities()
    assert len(many) == 50
    assert len({f.hotel_id for f in many}) == 50
    assert {f.kind for f in many} == {"own", "partner"}
    reservation_ids = [r for f in many for r in f.reservations]
    assert len(reservation_ids) == len(set(reservation_ids))
    store.reset()
    assert store.facilities() == many
    assert len(KrossStore(seed=7, clock=clock).facilities()) == FACILITY_COUNT
    with pytest.raises(ValueError):
        build_facilities(7, clock.now(), 0)


def test_seed_has_own_and_partner_facilities_with_obviously_fake_contacts(
    kross_store: KrossStore,
) -> None:
    seeded = kross_store.facilities()
    assert 3 <= len(seeded) <= 5
    assert {f.kind for f in seeded} == {"own", "partner"}
    for facility in seeded:
        assert facility.hotel_id.isdigit()
        assert re.fullmatch(r"api\d{5}", facility.username)
        assert re.fullmatch(r"[0-9a-f]{32}", kross_store.api_key_of(facility))
        if facility.kind == "partner":
            assert kross_store.api_key_of(facility) == SANDBOX_PARTNER_API_KEY
        assert 2 <= len(facility.apartments) <= 6
        for apartment in facility.apartments.values():
            assert apartment.name.startswith("Apartment ")
            assert 1 <= len(apartment.rooms) <= 2
            assert apartment.house_manual and apartment.contract.text
        for res in facility.reservations.values():
            assert res.email.endswith("@example.com")
            assert res.phone.startswith("+39 000")
            assert TODAY - timedelta(days=30) <= res.arrival <= TODAY + timedelta(days=90)


def test_seeded_live_reservations_never_share_a_room_night(kross_store: KrossStore) -> None:
    for facility in kross_store.facilities():
        for res in live(facility):
            assert room_is_free(facility, res, res.arrival, res.departure)


def test_seeded_statuses_agree_with_the_dates(kross_store: KrossStore) -> None:
    for facility in kross_store.facilities():
        for res in live(facility):
            if res.status == "CHOUT":
                assert res.departure <= TODAY
            elif res.status == "CHIN":
                assert res.arrival < TODAY < res.departure
            else:
                assert res.status in ("CONF", "PEND") and res.arrival >= TODAY


# --- edge behaviour ------------------------------------------------------------------------


async def test_requests_without_a_browser_user_agent_get_plain_text_1010(
    kross_http: httpx.AsyncClient,
) -> None:
    facility = await facility_of(kross_http)
    for headers in ({}, {"User-Agent": "python-requests/2.32"}, {"User-Agent": "curl/8"}):
        for path in ("/v5/auth/get-token", "/v5/calendar/get-calendar", "/v5/nope"):
            answer = await kross_http.post(path, headers=headers, json=credentials(facility))
            assert answer.status_code == 403
            assert answer.text == "error code: 1010"
            assert answer.headers["content-type"].startswith("text/plain")
    stats = (await kross_http.get("/_sandbox/stats")).json()
    assert stats["user_agent_blocked"] == 9
    assert stats["requests"]["total"] == 0
    assert stats["tokens_issued"]["total"] == 0


async def test_apiv5_answers_the_html_reference_page_never_data(
    kross_http: httpx.AsyncClient,
) -> None:
    for method, path in (("GET", "/apiv5"), ("POST", "/apiv5"), ("POST", "/apiv5/auth/get-token")):
        answer = await kross_http.request(method, path, headers=UA, json={})
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/html")
        assert "<html" in answer.text


async def test_operations_that_do_not_exist_answer_operation_not_found(
    kross_http: httpx.AsyncClient,
) -> None:
    _, headers = await session(kross_http)
    for operation in ("calendar/get-calendar", "reservations/change-channel", "channel/save-cm"):
        answer = await call(kross_http, headers, operation, {})
        assert answer.status_code == 404
        assert answer.json()["error_code"] == "OPERATION_NOT_FOUND"
        assert answer.json()["ruid"]


async def test_operations_are_called_with_post_only(kross_http: httpx.AsyncClient) -> None:
    _, headers = await session(kross_http)
    answer = await kross_http.get("/v5/reservations/get-list", headers=headers)
    assert answer.status_code == 405
    assert answer.json()["error_code"] == "INVALID_REQUEST"


async def test_malformed_bodies_answer_invalid_request_not_500(
    kross_http: httpx.AsyncClient,
) -> None:
    _, headers = await session(kross_http)
    bad = [
        ("calendar/get-availability", b"{not json"),
        ("calendar/get-availability", b"[1, 2]"),
        ("calendar/get-availability", b'{"date_from": "2026-11-22"}'),
        ("calendar/get-availability", b'{"date_from": "22/11/2026", "date_to": "2026-11-23"}'),
        ("calendar/get-availability", b'{"date_from": "2026-11-22", "date_to": "2027-12-01"}'),
        ("reservations/get-list", b'{"limit": 501}'),
        ("reservations/save", b'{"id_reservation": 1001}'),
        ("reservations/add-payment", b'{"id_reservation": 1001, "amount": -5}'),
        ("check-in-guest", b'{"id_reservation": 1001, "guest": {"first_name": "A"}}'),
        ("get-contract", b"{}"),
    ]
    for operation, body in bad:
        answer = await kross_http.post(f"/v5/{operation}", headers=headers, content=body)
        assert answer.status_code == 400, (operation, answer.text)
        assert answer.json()["error_code"] == "INVALID_REQUEST"
        assert answer.json()["ruid"]


async def test_calls_without_a_valid_token_answer_invalid_token(
    kross_http: httpx.AsyncClient,
) -> None:
    for auth in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic abc"}):
        answer = await call(kross_http, {**UA, **auth}, "reservations/get-list", {})
        assert answer.status_code == 401
        assert answer.json()["error_code"] == "INVALID_TOKEN"


# --- auth/get-token --------------------------------------------------------------------------


async def test_get_token_answers_a_seven_day_token_in_data(
    kross_http: httpx.AsyncClient,
) -> None:
    answer = await get_token(kross_http, await facility_of(kross_http, "own"))
    assert answer.status_code == 200
    body = answer.json()
    assert body["ruid"]
    assert body["data"]["auth_token"]
    assert body["data"]["auth_token_expire"] == "2026-11-29 09:00:00"
    assert body["data"]["auth_token_expire_seconds"] == 7 * 24 * 3600


async def test_partner_facilities_authenticate_with_the_shared_key_only(
    kross_http: httpx.AsyncClient,
) -> None:
    partner = await facility_of(kross_http, "partner")
    own = await facility_of(kross_http, "own")
    assert partner["api_key"] == SANDBOX_PARTNER_API_KEY
    assert (await get_token(kross_http, partner)).status_code == 200
    own_with_partner_key = {**own, "api_key": SANDBOX_PARTNER_API_KEY}
    partner_with_own_key = {**partner, "api_key": own["api_key"]}
    for facility in (own_with_partner_key, partner_with_own_key):
        answer = await get_token(kross_http, facility)
        assert answer.status_code == 401
        assert answer.json()["error_code"] == "AUTH_FAILED"


async def test_get_token_refuses_wrong_credentials(kross_http: httpx.AsyncClient) -> None:
    facility = await facility_of(kross_http)
    for wrong in (
        {"password": "wrong"},
        {"username": "api00000"},
        {"hotel_id": "1"},
        {"api_key": "0" * 32},
    ):
        answer = await get_token(kross_http, {**facility, **wrong})
        assert answer.status_code == 401
        assert answer.json()["error_code"] == "AUTH_FAILED"


async def test_token_location_switch_moves_the_token(kross_http: httpx.AsyncClient) -> None:
    facility = await facility_of(kross_http)
    await kross_http.put("/_sandbox/config", json={"token_location": "top"})
    top = (await get_token(kross_http, facility)).json()
    assert top["auth_token"] and "data" not in top
    await kross_http.put("/_sandbox/config", json={"token_location": "nested"})
    nested = (await get_token(kross_http, facility)).json()
    assert nested["data"]["data"]["auth_token"]
    for body in (top, nested):
        token = body.get("auth_token") or body["data"]["data"]["auth_token"]
        headers = {**UA, "Authorization": f"Bearer {token}"}
        assert (await call(kross_http, headers, "reservations/get-list", {})).status_code == 200


async def test_token_stops_working_after_seven_days_on_the_clock(
    kross_http: httpx.AsyncClient, clock: ManualClock
) -> None:
    _, headers = await session(kross_http)
    clock.advance(7 * 24 * 3600 - 1)
    assert (await call(kross_http, headers, "reservations/get-list", {})).status_code == 200
    await kross_http.post("/_sandbox/clock/advance", json={"seconds": 1})
    answer = await call(kross_http, headers, "reservations/get-list", {})
    assert answer.status_code == 401
    assert answer.json()["error_code"] == "INVALID_TOKEN"


async def test_fifty_active_tokens_block_new_sessions_until_they_expire(
    kross_http: httpx.AsyncClient, kross_store: KrossStore, clock: ManualClock
) -> None:
    facility, _ = await session(kross_http)
    for _ in range(49):
        assert (await get_token(kross_http, facility)).status_code == 200
    refused = await get_token(kross_http, facility)
    assert refused.status_code == 429
    assert refused.json()["error_code"] == "TOO_MANY_SESSIONS"
    # Sessions are counted per hotel_id: another facility is unaffected.
    assert (
        await get_token(kross_http, await facility_of(kross_http, "partner"))
    ).status_code == 200
    clock.advance(7 * 24 * 3600)
    assert kross_store.active_tokens(facility["hotel_id"]) == 0
    assert (await get_token(kross_http, facility)).status_code == 200


async def test_password_change_invalidates_tokens_and_the_old_password(
    kross_http: httpx.AsyncClient,
) -> None:
    facility, headers = await session(kross_http)
    changed = await kross_http.post(
        f"/_sandbox/facilities/{facility['hotel_id']}/password", json={"password": "n3w-secret"}
    )
    assert changed.status_code == 200
    assert (await call(kross_http, headers, "reservations/get-list", {})).status_code == 401
    assert (await get_token(kross_http, facility)).json()["error_code"] == "AUTH_FAILED"
    assert (await get_token(kross_http, {**facility, "password": "n3w-secret"})).status_code == 200


# --- rate limits ---------------------------------------------------------------------------


async def test_eleventh_request_in_a_minute_gets_429_with_retry_after(
    kross_http: httpx.AsyncClient, clock: ManualClock
) -> None:
    facility, headers = await session(kross_http, roomy=False)  # get-token is request 1
    for _ in range(8):
        clock.advance(1)
        assert (await call(kross_http, headers, "reservations/get-list", {})).status_code == 200
    clock.advance(1)
    # An error answer still counts: this is request 10.
    assert (await call(kross_http, headers, "get-contract", {})).status_code == 400
    limited = await call(kross_http, headers, "reservations/get-list", {})
    assert limited.status_code == 429
    assert limited.json()["error_code"] == "RATE_LIMITED"
    # The first request (the token, at t=0) leaves the window at t=60; we are at t=9.
    assert limited.headers["Retry-After"] == "51"
    clock.advance(50)
    again = await call(kross_http, headers, "reservations/get-list", {})
    assert again.status_code == 429 and again.headers["Retry-After"] == "1"
    clock.advance(1)
    assert (await call(kross_http, headers, "reservations/get-list", {})).status_code == 200
    # Another facility has its own allowance.
    assert (
        await get_token(kross_http, await facility_of(kross_http, "partner"))
    ).status_code == 200
    assert facility["hotel_id"]


async def test_hourly_limit_of_300_holds_when_the_minute_limit_is_lifted(
    kross_http: httpx.AsyncClient, clock: ManualClock
) -> None:
    facility, headers = await session(kross_http, roomy=False)
    await kross_http.put(
        f"/_sandbox/facilities/{facility['hotel_id']}/limits", json={"per_minute": 1000}
    )
    for _ in range(299):
        assert (await call(kross_http, headers, "get-house-manual", {})).status_code == 400
    limited = await call(kross_http, headers, "reservations/get-list", {})
    assert limited.status_code == 429
    assert limited.headers["Retry-After"] == "3600"
    clock.advance(3600)
    assert (await call(kross_http, headers, "reservations/get-list", {})).status_code == 200


async def test_daily_limit_uses_a_sliding_day_window(
    kross_http: httpx.AsyncClient, clock: ManualClock
) -> None:
    facility, headers = await session(kross_http, roomy=False)
    await kross_http.put(
        f"/_sandbox/facilities/{facility['hotel_id']}/limits",
        json={"per_minute": 1000, "per_hour": 1000, "per_day": 5},
    )
    for _ in range(4):
        clock.advance(3600)
        assert (await call(kross_http, headers, "reservations/get-list", {})).status_code == 200
    limited = await call(kross_http, headers, "reservations/get-list", {})
    assert limited.status_code == 429
    # The token request at t=0 leaves the day window at t=86400; we are at t=14400.
    assert limited.headers["Retry-After"] == str(86400 - 4 * 3600)
    clock.advance(86400 - 4 * 3600)
    assert (await call(kross_http, headers, "reservations/get-list", {})).status_code == 200


def test_default_limits_are_ten_per_minute_300_per_hour_5000_per_day(
    kross_store: KrossStore,
) -> None:
    for facility in kross_store.facilities():
        limits = kross_store.limits(facility.hotel_id)
        assert (limits.per_minute, limits.per_hour, limits.per_day) == (10, 300, 5000)


# --- reads -----------------------------------------------------------------------------------


async def test_availability_counts_rooms_not_held_by_live_reservations(
    kross_http: httpx.AsyncClient, kross_store: KrossStore
) -> None:
    headers, seeded = await seeded_session(kross_http, kross_store)
    answer = await call(
        kross_http,
        headers,
        "calendar/get-availability",
        {"date_from": "2026-11-20", "date_to": "2026-12-19"},
    )
    assert answer.status_code == 200
    body = answer.json()
    assert body["count"] == body["total_count"] == 30 * len(seeded.apartments)
    for row in body["data"]:
        night = date.fromisoformat(row["date"])
        held = {
            r.id_room
            for r in live(seeded)
            if r.id_room_type == row["id_room_type"] and r.arrival <= night < r.departure
        }
        assert row["rooms_total"] == len(seeded.apartments[row["id_room_type"]].rooms)
        assert row["rooms_available"] == row["rooms_total"] - len(held)
        assert row["name_room_type"].startswith("Apartment ")
        assert row["price"] > 0 and row["currency"] == "EUR" and row["min_stay"] >= 1
    one_type = next(iter(seeded.apartments))
    only = await call(
        kross_http,
        headers,
        "calendar/get-availability",
        {"date_from": "2026-11-20", "date_to": "2026-11-20", "id_room_type": one_type},
    )
    assert [r["id_room_type"] for r in only.json()["data"]] == [one_type]
    unknown = await call(
        kross_http,
        headers,
        "calendar/get-availability",
        {"date_from": "2026-11-20", "date_to": "2026-11-20", "id_room_type": 999999},
    )
    assert unknown.status_code == 404 and unknown.json()["error_code"] == "NOT_FOUND"


async def test_reservation_list_rows_carry_rooms_portal_payments_and_guests(
    kross_http: httpx.AsyncClient, kross_store: KrossStore
) -> None:
    headers, seeded = await seeded_session(kross_http, kross_store)
    answer = await call(kross_http, headers, "reservations/get-list", {"limit": 500})
    body = answer.json()
    assert answer.status_code == 200
    assert body["total_count"] == body["count"] == len(seeded.reservations)
    assert (body["limit"], body["offset"]) == (500, 0)
    row = body["data"][0]
    for name in ("id_reservation", "label", "arrival", "departure", "lang", "note", "channel"):
        assert name in row
    assert row["cod_reservation_status"] in {"CONF", "PEND", "CANC", "CHIN", "CHOUT"}
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", row["date_reservation"])
    assert set(row["rooms"][0]) == {"id_room", "id_room_type", "name_room_type", "qt_guests"}
    portal = row["guest_portal"]
    assert portal["status"] in {"not_started", "incomplete", "complete"}
    assert set(portal) == {"link", "status", "guests_registered", "guests_expected", "missing"}
    assert isinstance(row["payments"], list) and isinstance(row["guests"], list)
    page = await call(kross_http, headers, "reservations/get-list", {"limit": 5, "offset": 5})
    assert page.json()["count"] == 5
    assert page.json()["data"][0]["id_reservation"] == body["data"][5]["id_reservation"]


async def test_date_filters_are_ignored_by_default(kross_http: httpx.AsyncClient) -> None:
    _, headers = await session(kross_http)
    everything = await call(kross_http, headers, "reservations/get-list", {"limit": 500})
    filtered = await call(
        kross_http,
        headers,
        "reservations/get-list",
        {
            "limit": 500,
            "arrival_from": "2026-12-01",
            "arrival_to": "2026-12-02",
            "date_reservation_from": "2026-11-01 00:00",
        },
    )
    assert filtered.json()["total_count"] == everything.json()["total_count"]
    assert any(r["arrival"] < "2026-12-01" for r in filtered.json()["data"])


async def test_date_filters_apply_when_the_quirk_is_switched_off(
    kross_http: httpx.AsyncClient,
) -> None:
    _, headers = await session(kross_http)
    await kross_http.put("/_sandbox/config", json={"ignore_date_filters": False})
    answer = await call(
        kross_http,
        headers,
        "reservations/get-list",
        {"limit": 500, "arrival_from": "2026-12-01", "arrival_to": "2026-12-10"},
    )
    rows = answer.json()["data"]
    assert rows
    assert all("2026-12-01" <= r["arrival"] <= "2026-12-10" for r in rows)
    booked = await call(
        kross_http,
        headers,
        "reservations/get-list",
        {"limit": 500, "date_reservation_to": "2026-09-01 00:00"},
    )
    assert booked.json()["data"]
    assert all(r["date_reservation"] <= "2026-09-01 00:00" for r in booked.json()["data"])
    aware = await call(
        kross_http,
        headers,
        "reservations/get-list",
        {"limit": 500, "date_reservation_to": "2026-09-01T02:00:00+02:00"},
    )
    assert aware.json()["total_count"] == booked.json()["total_count"]


async def test_in_house_and_status_filters_are_applied(
    kross_http: httpx.AsyncClient, kross_store: KrossStore
) -> None:
    headers, seeded = await seeded_session(kross_http, kross_store)
    in_house = await call(kross_http, headers, "reservations/get-list", {"in_house": True})
    expected = {r.id_reservation for r in live(seeded) if r.arrival <= TODAY < r.departure}
    assert {r["id_reservation"] for r in in_house.json()["data"]} == expected
    cancelled = await call(
        kross_http, headers, "reservations/get-list", {"cod_reservation_status": "CANC"}
    )
    assert cancelled.json()["data"]
    assert {r["cod_reservation_status"] for r in cancelled.json()["data"]} == {"CANC"}
    one = next(iter(seeded.reservations))
    single = await call(kross_http, headers, "reservations/get-list", {"id_reservation": one})
    assert [r["id_reservation"] for r in single.json()["data"]] == [one]


async def test_guest_documents_are_answered_by_room_type_or_reservation_on_both_paths(
    kross_http: httpx.AsyncClient, kross_store: KrossStore
) -> None:
    headers, seeded = await seeded_session(kross_http, kross_store)
    apartment = next(iter(seeded.apartments.values()))
    res = next(r for r in seeded.reservations.values() if r.id_room_type == apartment.id_room_type)
    for prefix in ("", "reservations/"):
        instructions = await call(
            kross_http,
            headers,
            f"{prefix}get-check-in-instructions",
            {"id_reservation": res.id_reservation},
        )
        assert instructions.status_code == 200
        assert instructions.json()["data"]["id_room_type"] == apartment.id_room_type
        assert {"address", "check_in_from", "check_in_until", "check_out_until"} <= set(
            instructions.json()["data"]
        )
        manual = await call(
            kross_http,
            headers,
            f"{prefix}get-house-manual",
            {"id_room_type": apartment.id_room_type},
        )
        assert manual.json()["data"]["sections"][0]["title"] == "WiFi"
        contract = await call(
            kross_http, headers, f"{prefix}get-contract", {"id_room_type": apartment.id_room_type}
        )
        assert set(contract.json()["data"]) == {"id_room_type", "title", "version", "text"}
    missing = await call(kross_http, headers, "get-contract", {"id_room_type": 999999})
    assert missing.status_code == 404 and missing.json()["error_code"] == "NOT_FOUND"


async def test_rooms_and_portal_blocks_can_be_left_out(kross_http: httpx.AsyncClient) -> None:
    _, headers = await session(kross_http)
    answer = await call(
        kross_http,
        headers,
        "reservations/get-list",
        {"with_rooms": False, "with_guest_portal": False, "limit": 1},
    )
    row = answer.json()["data"][0]
    assert "rooms" not in row and "guest_portal" not in row


# --- writes ----------------------------------------------------------------------------------


async def test_changing_dates_onto_another_reservation_answers_409_and_changes_nothing(
    kross_http: httpx.AsyncClient, kross_store: KrossStore
) -> None:
    headers, seeded = await seeded_session(kross_http, kross_store)
    res, blocker = next(
        (a, b)
        for a in upcoming(seeded)
        for b in live(seeded)
        if b.id_room == a.id_room and b.arrival >= a.departure
    )
    before = (res.arrival, res.departure)
    answer = await move_stay(
        kross_http, headers, res, res.arrival, blocker.arrival + timedelta(days=1)
    )
    assert answer.status_code == 409
    assert answer.json()["error_code"] == "NOT_AVAILABLE"
    assert (res.arrival, res.departure) == before


async def test_extending_into_free_nights_moves_the_dates_and_the_availability(
    kross_http: httpx.AsyncClient, kross_store: KrossStore
) -> None:
    headers, seeded = await seeded_session(kross_http, kross_store)
    res = next(
        r
        for r in upcoming(seeded)
        if room_is_free(seeded, r, r.departure, r.departure + timedelta(days=1))
    )
    new_departure = res.departure + timedelta(days=1)
    answer = await move_stay(kross_http, headers, res, res.arrival, new_departure)
    assert answer.status_code == 200
    assert answer.json()["data"] == {
        "id_reservation": res.id_reservation,
        "cod_reservation": res.label,
        "arrival": res.arrival.isoformat(),
        "departure": new_departure.isoformat(),
    }
    listed = await call(
        kross_http, headers, "reservations/get-list", {"id_reservation": res.id_reservation}
    )
    assert listed.json()["data"][0]["departure"] == new_departure.isoformat()
    extra_night = (new_departure - timedelta(days=1)).isoformat()
    calendar = await call(
        kross_http,
        headers,
        "calendar/get-availability",
        {"date_from": extra_night, "date_to": extra_night, "id_room_type": res.id_room_type},
    )
    row = calendar.json()["data"][0]
    assert row["rooms_available"] < row["rooms_total"]


async def test_dates_of_unknown_reservations_answer_not_found(
    kross_http: httpx.AsyncClient,
) -> None:
    _, headers = await session(kross_http)
    answer = await call(
        kross_http,
        headers,
        "reservations/save",
        {"id_reservation": 999999, "arrival": "2026-12-01", "departure": "2026-12-03"},
    )
    assert answer.status_code == 404 and answer.json()["error_code"] == "NOT_FOUND"


async def test_payments_are_appended_to_the_reservation(
    kross_http: httpx.AsyncClient, kross_store: KrossStore
) -> None:
    headers, res = await next_arrival(kross_http, kross_store)
    before = len(res.payments)
    answer = await call(
        kross_http,
        headers,
        "reservations/add-payment",
        {
            "id_reservation": res.id_reservation,
            "amount": 100.0,
            "currency": "EUR",
            "method": "card",
            "date": "2026-11-22",
            "note": "late check-in",
        },
    )
    assert answer.status_code == 200
    payment = answer.json()["data"]
    assert payment["id_reservation"] == res.id_reservation and payment["amount"] == 100.0
    listed = await call(
        kross_http, headers, "reservations/get-list", {"id_reservation": res.id_reservation}
    )
    payments = listed.json()["data"][0]["payments"]
    assert len(payments) == before + 1
    assert payments[-1]["id_payment"] == payment["id_payment"]


async def test_registering_every_guest_and_a_picture_completes_the_portal(
    kross_http: httpx.AsyncClient, kross_store: KrossStore
) -> None:
    facility, headers = await session(kross_http)
    res = next(r for r in upcoming(kross_store.facility(facility["hotel_id"])) if not r.guests)
    answers = [
        await call(
            kross_http,
            headers,
            "check-in-guest",
            {"id_reservation": res.id_reservation, "guest": GUEST},
        )
        for _ in range(res.qt_guests)
    ]
    first_portal = answers[0].json()["data"]["guest_portal"]
    assert first_portal["guests_registered"] == 1
    assert first_portal["status"] == "incomplete"
    last_portal = answers[-1].json()["data"]["guest_portal"]
    assert last_portal["guests_registered"] == last_portal["guests_expected"] == res.qt_guests
    assert last_portal["missing"] == ["guest_pictures"]
    saved = await call(
        kross_http,
        headers,
        "save-guest-pictures",
        {
            "id_reservation": res.id_reservation,
            "id_guest": answers[0].json()["data"]["id_guest"],
            "pictures": [picture(), picture("application/pdf", 10)],
        },
    )
    assert saved.status_code == 200
    assert saved.json()["data"]["saved"] == 2
    assert saved.json()["data"]["pictures"][0]["size"] == 1000
    listed = await call(
        kross_http, headers, "reservations/get-list", {"id_reservation": res.id_reservation}
    )
    assert listed.json()["data"][0]["guest_portal"]["status"] == "complete"


async def test_pictures_are_refused_by_type_size_and_count(
    kross_http: httpx.AsyncClient, kross_store: KrossStore
) -> None:
    headers, res = await next_arrival(kross_http, kross_store)
    before = len(res.pictures)
    cases = [
        ([picture(), picture("image/gif")], 415, "UNSUPPORTED_MEDIA_TYPE"),
        ([picture(size=5 * 1024 * 1024 + 1)], 413, "PAYLOAD_TOO_LARGE"),
        ([picture()] * 11, 400, "INVALID_REQUEST"),
        ([], 400, "INVALID_REQUEST"),
        ([{**picture(), "data_base64": "not base64!"}], 400, "INVALID_REQUEST"),
    ]
    for pictures, status, code in cases:
        answer = await call(
            kross_http,
            headers,
            "save-guest-pictures",
            {"id_reservation": res.id_reservation, "pictures": pictures},
        )
        assert answer.status_code == status
        assert answer.json()["error_code"] == code
    assert len(res.pictures) == before
    exactly_five_mib = await call(
        kross_http,
        headers,
        "save-guest-pictures",
        {"id_reservation": res.id_reservation, "pictures": [picture(size=5 * 1024 * 1024)]},
    )
    assert exactly_five_mib.status_code == 200


# --- faults ----------------------------------------------------------------------------------


async def test_commit_then_disconnect_applies_the_write_before_the_client_fails(
    kross_http: httpx.AsyncClient, kross_store: KrossStore
) -> None:
    headers, res = await next_arrival(kross_http, kross_store)
    before = len(res.payments)
    await kross_http.post(
        "/_sandbox/faults", json={"commit_then_timeout": 1, "timeout_mode": "disconnect"}
    )
    body = {"id_reservation": res.id_reservation, "amount": 50.0}
    with pytest.raises(httpx.TransportError):
        await call(kross_http, headers, "reservations/add-payment", body)
    assert len(res.payments) == before + 1
    # Only the next N writes misbehave.
    assert (await call(kross_http, headers, "reservations/add-payment", body)).status_code == 200
    assert len(res.payments) == before + 2


async def test_commit_then_hang_applies_the_write_and_never_answers_in_time(
    kross_http: httpx.AsyncClient, kross_store: KrossStore
) -> None:
    headers, res = await next_arrival(kross_http, kross_store)
    before = len(res.payments)
    await kross_http.post("/_sandbox/faults", json={"commit_then_timeout": 1})
    answers: list[httpx.Response] = []

    async def pay() -> None:
        body = {"id_reservation": res.id_reservation, "amount": 50.0}
        answers.append(await call(kross_http, headers, "reservations/add-payment", body))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(pay)
        # Once every task is blocked the request is hanging after its commit; give up on it.
        await anyio.wait_all_tasks_blocked()
        assert len(res.payments) == before + 1
        tasks.cancel_scope.cancel()
    assert answers == []
    stats = (await kross_http.get("/_sandbox/stats")).json()
    assert stats["commit_then_timeout_fired"] == 1


async def test_latency_holds_every_answer_back(kross_http: httpx.AsyncClient) -> None:
    _, headers = await session(kross_http)
    await kross_http.post("/_sandbox/faults", json={"latency_s": 30})
    answers: list[httpx.Response] = []

    async def read() -> None:
        answers.append(await call(kross_http, headers, "reservations/get-list", {}))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read)
        await anyio.wait_all_tasks_blocked()
        tasks.cancel_scope.cancel()
    assert answers == []


async def test_error_rate_answers_server_errors(kross_http: httpx.AsyncClient) -> None:
    _, headers = await session(kross_http)
    await kross_http.post("/_sandbox/faults", json={"error_rate": 1.0})
    answer = await call(kross_http, headers, "reservations/get-list", {})
    assert answer.status_code == 503
    assert answer.json()["error_code"] == "SERVER_ERROR"
    await kross_http.delete("/_sandbox/faults")
    assert (await call(kross_http, headers, "reservations/get-list", {})).status_code == 200


# --- controls --------------------------------------------------------------------------------


async def test_stats_count_requests_tokens_and_429s(
    kross_http: httpx.AsyncClient,
) -> None:
    facility, headers = await session(kross_http, roomy=False)
    hotel_id = facility["hotel_id"]
    await kross_http.put(f"/_sandbox/facilities/{hotel_id}/limits", json={"per_minute": 3})
    statuses = [
        (await call(kross_http, headers, "reservations/get-list", {})).status_code for _ in range(3)
    ]
    assert statuses == [200, 200, 429]
    # An unknown operation is refused before attribution: it counts in the total only.
    await call(kross_http, headers, "calendar/get-calendar", {})
    stats = (await kross_http.get("/_sandbox/stats")).json()
    assert stats["requests"]["by_hotel"] == {hotel_id: 4}
    assert stats["requests"]["by_operation"] == {"auth/get-token": 1, "reservations/get-list": 3}
    assert stats["requests"]["total"] == 5
    assert stats["tokens_issued"] == {"total": 1, "by_hotel": {hotel_id: 1}}
    assert stats["rate_limited"] == {"total": 1, "by_hotel": {hotel_id: 1}}


async def test_reset_restores_the_seed_and_forgets_tokens_faults_and_changes(
    kross_http: httpx.AsyncClient, kross_store: KrossStore
) -> None:
    headers, res = await next_arrival(kross_http, kross_store)
    await call(
        kross_http,
        headers,
        "reservations/add-payment",
        {"id_reservation": res.id_reservation, "amount": 5},
    )
    await kross_http.post("/_sandbox/faults", json={"error_rate": 1.0})
    await kross_http.put("/_sandbox/config", json={"token_location": "top"})
    assert (await kross_http.post("/_sandbox/reset")).status_code == 200
    assert (await kross_http.get("/_sandbox/faults")).json()["error_rate"] == 0
    assert (await kross_http.get("/_sandbox/config")).json() == DEFAULTS
    assert (await kross_http.get("/_sandbox/stats")).json()["requests"]["total"] == 0
    assert kross_store.facilities() == build_facilities(7, kross_store.clock.now())
    assert (await call(kross_http, headers, "reservations/get-list", {})).status_code == 401


async def test_controls_refuse_unknown_facilities_and_bad_values(
    kross_http: httpx.AsyncClient,
) -> None:
    unknown = await kross_http.put("/_sandbox/facilities/1/limits", json={"per_minute": 5})
    assert unknown.status_code == 404 and unknown.json()["error_code"] == "NOT_FOUND"
    bad = await kross_http.post("/_sandbox/faults", json={"error_rate": 2})
    assert bad.status_code == 400 and bad.json()["error_code"] == "INVALID_REQUEST"
