"""The real client against the booking-system emulator (``kross_http``): every operation,
every documented quirk and every upstream error the gateway has to tell apart."""

from __future__ import annotations

import base64
import logging
from datetime import date, timedelta
from typing import Any

import httpx
import pytest
import structlog

from pmsgate.clock import ManualClock
from pmsgate.config import DEFAULT_USER_AGENT
from pmsgate.integrations.kross import errors
from pmsgate.integrations.kross.client import KrossClient, Token
from pmsgate.integrations.kross.credentials import Credentials
from pmsgate.integrations.kross.dates import enforce_reservation_filters, filter_availability
from pmsgate.integrations.kross.models import (
    AddPayment,
    AvailabilityNight,
    AvailabilityQuery,
    ChangeDates,
    CheckInInstructions,
    Contract,
    GuestDetails,
    GuestPictures,
    GuestRegistered,
    HouseManual,
    Payment,
    Picture,
    PicturesSaved,
    RegisterGuest,
    Reservation,
    ReservationDates,
    ReservationQuery,
)
from pmsgate.integrations.kross.operations import load_operations

pytestmark = pytest.mark.anyio

BASE_URL = "http://kross.test"
LIVE = {"CONF", "PEND"}


# --- fixtures --------------------------------------------------------------------------------


@pytest.fixture
async def facility(kross_http: httpx.AsyncClient) -> dict[str, Any]:
    facilities = (await kross_http.get("/_sandbox/facilities")).json()
    return facilities[0]


@pytest.fixture
async def roomy_limits(kross_http: httpx.AsyncClient, facility: dict[str, Any]) -> None:
    """Tests that send many requests lift the facility's 10/min limit out of the way."""
    response = await kross_http.put(
        f"/_sandbox/facilities/{facility['hotel_id']}/limits",
        json={"per_minute": 1000, "per_hour": 1000, "per_day": 1000},
    )
    response.raise_for_status()


@pytest.fixture
def credentials(facility: dict[str, Any]) -> Credentials:
    return Credentials(
        hotel_id=facility["hotel_id"],
        username=facility["username"],
        password=facility["password"],
        api_key=facility["api_key"],
    )


def make_client(
    http: httpx.AsyncClient,
    clock: ManualClock,
    *,
    base_url: str = BASE_URL,
    user_agent: str = DEFAULT_USER_AGENT,
    overrides: dict[str, str] | None = None,
    timeout_s: float = 20.0,
) -> KrossClient:
    return KrossClient(
        http,
        base_url=base_url,
        operations=load_operations(overrides),
        user_agent=user_agent,
        clock=clock,
        timeout_s=timeout_s,
    )


@pytest.fixture
def client(kross_http: httpx.AsyncClient, clock: ManualClock) -> KrossClient:
    return make_client(kross_http, clock)


@pytest.fixture
async def token(client: KrossClient, credentials: Credentials) -> Token:
    return await client.get_token(credentials)


async def requests_seen(http: httpx.AsyncClient) -> int:
    stats = (await http.get("/_sandbox/stats")).json()
    return int(stats["requests"]["total"]) + int(stats["user_agent_blocked"])


async def reservations(client: KrossClient, token: Token) -> list[Reservation]:
    result = await client.call("reservations/get-list", {"limit": 500}, token)
    return result.many(Reservation)


def free_extension(rows: list[Reservation]) -> Reservation:
    """A live reservation whose room is free the night after its departure."""
    for res in rows:
        if res.cod_reservation_status not in LIVE:
            continue
        room = res.rooms[0].id_room
        blocked = any(
            o.rooms[0].id_room == room
            and o.cod_reservation_status != "CANC"
            and o.arrival <= res.departure < o.departure
            for o in rows
            if o.id_reservation != res.id_reservation
        )
        if not blocked:
            return res
    raise AssertionError("the seed has no extendable reservation")


def blocked_extension(rows: list[Reservation]) -> tuple[Reservation, Reservation]:
    """A live reservation and the next live one on the same room."""
    for res in rows:
        if res.cod_reservation_status not in LIVE:
            continue
        for other in rows:
            if (
                other.id_reservation != res.id_reservation
                and other.cod_reservation_status != "CANC"
                and other.rooms[0].id_room == res.rooms[0].id_room
                and other.arrival >= res.departure
            ):
                return res, other
    raise AssertionError("the seed has no back-to-back reservations")


def guest_details() -> GuestDetails:
    return GuestDetails(
        first_name="Anna",
        last_name="Esempio",
        birth_date=date(1990, 1, 31),
        nationality="IT",
        document_type="passport",
        document_number="X0000000",
    )


# --- tokens ----------------------------------------------------------------------------------


async def test_a_token_is_obtained_with_valid_credentials_and_lives_seven_days(
    client: KrossClient, credentials: Credentials, clock: ManualClock
) -> None:
    token = await client.get_token(credentials)
    assert token.value.get_secret_value()
    assert token.expires_at == clock.now() + timedelta(days=7)


@pytest.mark.parametrize("location", ["data", "top", "nested"])
async def test_the_token_is_found_wherever_the_server_puts_it(
    kross_http: httpx.AsyncClient,
    client: KrossClient,
    credentials: Credentials,
    clock: ManualClock,
    location: str,
) -> None:
    await kross_http.put("/_sandbox/config", json={"token_location": location})
    token = await client.get_token(credentials)
    assert token.expires_at == clock.now() + timedelta(days=7)
    result = await client.call("get-contract", {"id_room_type": 10}, token)
    assert result.one(Contract).id_room_type == 10


async def test_a_token_past_its_expiry_on_the_clock_is_rejected_upstream(
    kross_http: httpx.AsyncClient, client: KrossClient, token: Token, clock: ManualClock
) -> None:
    clock.advance(timedelta(days=7, seconds=1).total_seconds())
    with pytest.raises(errors.TokenRejected) as caught:
        await client.call("reservations/get-list", {}, token.value.get_secret_value())
    assert caught.value.code == "kross_token_rejected"
    assert caught.value.upstream_code == "INVALID_TOKEN"
    assert caught.value.ruid


async def test_a_token_refused_as_a_200_with_error_code_401_is_a_rejected_token(
    kross_http: httpx.AsyncClient, client: KrossClient, token: Token, clock: ManualClock
) -> None:
    await kross_http.put("/_sandbox/config", json={"token_rejection": "200-401"})
    clock.advance(timedelta(days=7, seconds=1).total_seconds())
    with pytest.raises(errors.TokenRejected) as caught:
        await client.call("reservations/get-list", {}, token.value.get_secret_value())
    assert caught.value.status == 200
    assert caught.value.upstream_code == "401"
    assert caught.value.ruid


async def test_a_token_known_to_be_expired_is_not_sent_at_all(
    kross_http: httpx.AsyncClient, client: KrossClient, token: Token, clock: ManualClock
) -> None:
    clock.advance(timedelta(days=7).total_seconds())
    before = await requests_seen(kross_http)
    with pytest.raises(errors.TokenRejected):
        await client.call("reservations/get-list", {}, token)
    assert await requests_seen(kross_http) == before


async def test_a_token_still_valid_one_second_before_expiry_works(
    client: KrossClient, token: Token, clock: ManualClock
) -> None:
    clock.advance(timedelta(days=7, seconds=-1).total_seconds())
    result = await client.call("reservations/get-list", {"limit": 1}, token)
    assert result.count == 1


async def test_wrong_credentials_are_authentication_failed(
    client: KrossClient, facility: dict[str, Any]
) -> None:
    wrong = Credentials(
        hotel_id=facility["hotel_id"],
        username=facility["username"],
        password="not-the-password",
        api_key=facility["api_key"],
    )
    with pytest.raises(errors.AuthenticationFailed) as caught:
        await client.get_token(wrong)
    assert caught.value.code == "pms_auth_failed"
    assert not caught.value.retryable
    assert caught.value.status == 401


async def test_a_changed_password_turns_tokens_and_credentials_into_failures(
    kross_http: httpx.AsyncClient, client: KrossClient, credentials: Credentials, token: Token
) -> None:
    await kross_http.post(
        f"/_sandbox/facilities/{credentials.hotel_id}/password", json={"password": "new-one"}
    )
    with pytest.raises(errors.TokenRejected):
        await client.call("reservations/get-list", {}, token)
    with pytest.raises(errors.AuthenticationFailed):
        await client.get_token(credentials)


async def test_the_fifty_first_session_is_refused_with_too_many_sessions(
    kross_http: httpx.AsyncClient, client: KrossClient, credentials: Credentials, roomy_limits: None
) -> None:
    for _ in range(50):
        await client.get_token(credentials)
    with pytest.raises(errors.TooManySessions) as caught:
        await client.get_token(credentials)
    assert caught.value.code == "pms_too_many_sessions"
    assert not caught.value.retryable


async def test_get_token_is_not_callable_through_call(
    kross_http: httpx.AsyncClient, client: KrossClient
) -> None:
    with pytest.raises(ValueError):
        await client.call("auth/get-token", {}, "anything")
    assert await requests_seen(kross_http) == 0


# --- every operation -------------------------------------------------------------------------


async def test_availability_is_read_per_room_type_and_night(
    client: KrossClient, token: Token, clock: ManualClock
) -> None:
    start = clock.now().date()
    query = AvailabilityQuery(date_from=start, date_to=start + timedelta(days=2))
    result = await client.call("calendar/get-availability", query, token)
    nights = result.many(AvailabilityNight)
    assert {n.date for n in nights} == {start + timedelta(days=d) for d in range(3)}
    assert all(0 <= n.rooms_available <= (n.rooms_total or 0) for n in nights)
    assert filter_availability(nights, query.date_from, query.date_to).dropped_out_of_range == 0


async def test_reservations_are_listed_with_rooms_portal_payments_and_guests(
    client: KrossClient, token: Token
) -> None:
    result = await client.call(
        "reservations/get-list", ReservationQuery(with_rooms=True, limit=500), token
    )
    rows = result.many(Reservation)
    assert result.count == len(rows) > 0
    assert result.total_count == len(rows)
    assert result.limit == 500
    assert result.offset == 0
    assert result.ruid
    assert all(r.rooms and r.guest_portal is not None for r in rows)


async def test_in_house_guests_come_from_the_in_house_filter(
    client: KrossClient, token: Token, clock: ManualClock
) -> None:
    today = clock.now().date()
    rows = (await client.call("reservations/get-list", {"in_house": True}, token)).many(Reservation)
    assert rows
    assert all(r.arrival <= today < r.departure for r in rows)


@pytest.mark.parametrize(
    ("operation", "model"),
    [
        ("get-check-in-instructions", CheckInInstructions),
        ("get-house-manual", HouseManual),
        ("get-contract", Contract),
    ],
)
async def test_room_type_documents_are_read_by_room_type(
    client: KrossClient, token: Token, operation: str, model: type[Any]
) -> None:
    result = await client.call(operation, {"id_room_type": 10}, token)
    document = result.one(model)
    assert document.id_room_type == 10


async def test_check_in_instructions_can_be_read_for_a_reservation(
    client: KrossClient, token: Token
) -> None:
    res = (await reservations(client, token))[0]
    result = await client.call(
        "get-check-in-instructions", {"id_reservation": res.id_reservation}, token
    )
    assert result.one(CheckInInstructions).id_room_type == res.rooms[0].id_room_type


async def test_a_path_override_reaches_the_operation_under_its_other_spelling(
    kross_http: httpx.AsyncClient, clock: ManualClock, credentials: Credentials
) -> None:
    client = make_client(
        kross_http,
        clock,
        overrides={"get-check-in-instructions": "reservations/get-check-in-instructions"},
    )
    token = await client.get_token(credentials)
    result = await client.call("get-check-in-instructions", {"id_room_type": 10}, token)
    assert result.one(CheckInInstructions).check_in_from


async def test_an_override_to_a_path_the_server_lacks_is_an_unknown_operation(
    kross_http: httpx.AsyncClient, clock: ManualClock, credentials: Credentials
) -> None:
    # calendar/get-availability has no alternate path to fall back to.
    client = make_client(
        kross_http, clock, overrides={"calendar/get-availability": "calendar/get-availabilty"}
    )
    token = await client.get_token(credentials)
    with pytest.raises(errors.UnknownOperation) as caught:
        await client.call("calendar/get-availability", {}, token)
    assert caught.value.status == 404
    assert caught.value.upstream_code == "OPERATION_NOT_FOUND"


async def test_a_stay_is_extended_by_a_night_when_the_room_is_free(
    client: KrossClient, token: Token, roomy_limits: None
) -> None:
    res = free_extension(await reservations(client, token))
    change = ChangeDates(
        id_reservation=res.id_reservation,
        arrival=res.arrival,
        departure=res.departure + timedelta(days=1),
    )
    answer = (await client.call("reservations/save", change, token)).one(ReservationDates)
    assert answer.departure == res.departure + timedelta(days=1)
    again = await client.call(
        "reservations/get-list", {"id_reservation": res.id_reservation}, token
    )
    assert again.many(Reservation)[0].departure == res.departure + timedelta(days=1)


async def test_extending_into_another_reservation_is_refused_as_not_available(
    client: KrossClient, token: Token
) -> None:
    res, other = blocked_extension(await reservations(client, token))
    change = ChangeDates(
        id_reservation=res.id_reservation,
        arrival=res.arrival,
        departure=other.arrival + timedelta(days=1),
    )
    with pytest.raises(errors.InvalidRequest) as caught:
        await client.call("reservations/save", change, token)
    assert caught.value.status == 409
    assert caught.value.upstream_code == "NOT_AVAILABLE"
    assert not caught.value.retryable


async def test_a_reservation_that_does_not_exist_is_an_invalid_request_not_found(
    client: KrossClient, token: Token
) -> None:
    payment = AddPayment(id_reservation=999999, amount=10, currency="EUR", method="card")
    with pytest.raises(errors.InvalidRequest) as caught:
        await client.call("reservations/add-payment", payment, token)
    assert caught.value.upstream_code == "NOT_FOUND"
    assert caught.value.status == 404


async def test_a_payment_is_added_to_a_reservation(
    client: KrossClient, token: Token, clock: ManualClock
) -> None:
    res = (await reservations(client, token))[0]
    payment = AddPayment(
        id_reservation=res.id_reservation, amount=55.5, currency="EUR", method="card"
    )
    answer = (await client.call("reservations/add-payment", payment, token)).one(Payment)
    assert answer.amount == 55.5
    assert answer.id_reservation == res.id_reservation
    assert answer.date == clock.now().date()


async def test_a_guest_is_registered_and_the_portal_moves_along(
    client: KrossClient, token: Token
) -> None:
    res = next(
        r
        for r in await reservations(client, token)
        if r.cod_reservation_status in LIVE and r.guest_portal and not r.guests
    )
    body = RegisterGuest(id_reservation=res.id_reservation, guest=guest_details())
    answer = (await client.call("check-in-guest", body, token)).one(GuestRegistered)
    assert answer.id_reservation == res.id_reservation
    assert answer.guest_portal is not None
    assert answer.guest_portal.guests_registered == 1


async def test_guest_pictures_are_stored(client: KrossClient, token: Token) -> None:
    res = (await reservations(client, token))[0]
    picture = Picture(
        filename="document.jpg",
        content_type="image/jpeg",
        data_base64=base64.b64encode(b"\xff\xd8\xff fake jpeg").decode(),
    )
    body = GuestPictures(id_reservation=res.id_reservation, pictures=[picture, picture])
    answer = (await client.call("save-guest-pictures", body, token)).one(PicturesSaved)
    assert answer.saved == 2
    assert [p.size for p in answer.pictures] == [len(b"\xff\xd8\xff fake jpeg")] * 2


async def test_a_picture_type_the_server_refuses_is_an_invalid_request_415(
    client: KrossClient, token: Token
) -> None:
    res = (await reservations(client, token))[0]
    # A raw payload: the typed model would refuse this before it is sent.
    body = {
        "id_reservation": res.id_reservation,
        "pictures": [{"filename": "a.gif", "content_type": "image/gif", "data_base64": "R0lGODlh"}],
    }
    with pytest.raises(errors.InvalidRequest) as caught:
        await client.call("save-guest-pictures", body, token)
    assert caught.value.status == 415
    assert caught.value.upstream_code == "UNSUPPORTED_MEDIA_TYPE"


async def test_a_malformed_body_is_an_invalid_request_400(
    client: KrossClient, token: Token
) -> None:
    with pytest.raises(errors.InvalidRequest) as caught:
        await client.call("calendar/get-availability", {"date_from": "tomorrow"}, token)
    assert caught.value.status == 400
    assert caught.value.upstream_code == "INVALID_REQUEST"


# --- date filters (spec §7) ------------------------------------------------------------------


async def test_the_server_ignores_date_filters_and_enforcement_drops_the_extra_rows(
    kross_http: httpx.AsyncClient, client: KrossClient, token: Token, clock: ManualClock
) -> None:
    await kross_http.put("/_sandbox/config", json={"ignore_date_filters": True})
    today = clock.now().date()
    query = ReservationQuery(
        arrival_from=today, arrival_to=today + timedelta(days=14), limit=500
    ).to_wire()
    result = await client.call("reservations/get-list", query, token)
    rows = result.many(Reservation)
    filtered = enforce_reservation_filters(rows, query)
    assert filtered.returned == len(rows)
    assert filtered.dropped_out_of_range > 0
    assert filtered.server_ignored_filter
    assert filtered.items
    assert all(today <= r.arrival <= today + timedelta(days=14) for r in filtered.items)


async def test_enforcement_changes_nothing_when_the_server_honours_the_filter(
    kross_http: httpx.AsyncClient, client: KrossClient, token: Token, clock: ManualClock
) -> None:
    await kross_http.put("/_sandbox/config", json={"ignore_date_filters": False})
    today = clock.now().date()
    query = ReservationQuery(arrival_from=today, arrival_to=today + timedelta(days=14)).to_wire()
    rows = (await client.call("reservations/get-list", query, token)).many(Reservation)
    filtered = enforce_reservation_filters(rows, query)
    assert filtered.items == rows
    assert filtered.dropped_out_of_range == 0


# --- refused locally, never sent -------------------------------------------------------------


@pytest.mark.parametrize(
    ("operation", "error"),
    [
        ("calendar/get-calendar", errors.UnknownOperation),
        ("reservations/change-channel", errors.UnknownOperation),
        ("channel/save-cm", errors.OutOfScopeOperation),
        ("messaging/send", errors.OutOfScopeOperation),
        ("users/create", errors.OutOfScopeOperation),
        ("apiv5/reservations/get-list", errors.UnknownOperation),
    ],
)
async def test_refused_operations_never_reach_the_booking_system(
    kross_http: httpx.AsyncClient,
    client: KrossClient,
    operation: str,
    error: type[errors.KrossError],
) -> None:
    with pytest.raises(error) as caught:
        await client.call(operation, {}, "any-token")
    assert caught.value.operation == operation
    assert await requests_seen(kross_http) == 0


# --- edge and configuration faults -----------------------------------------------------------


async def test_a_request_without_a_browser_user_agent_is_edge_blocked(
    kross_http: httpx.AsyncClient, clock: ManualClock, credentials: Credentials
) -> None:
    client = make_client(kross_http, clock, user_agent="python-httpx")
    with pytest.raises(errors.EdgeBlocked) as caught:
        await client.get_token(credentials)
    assert caught.value.code == "pms_edge_blocked"
    assert caught.value.status == 403
    assert not caught.value.retryable
    with pytest.raises(errors.EdgeBlocked):
        await client.call("reservations/get-list", {}, "token")
    stats = (await kross_http.get("/_sandbox/stats")).json()
    assert stats["user_agent_blocked"] == 2


async def test_a_base_url_on_apiv5_gets_html_instead_of_json(
    kross_http: httpx.AsyncClient, clock: ManualClock, credentials: Credentials
) -> None:
    client = make_client(kross_http, clock, base_url=f"{BASE_URL}/apiv5")
    with pytest.raises(errors.HtmlInsteadOfJson) as caught:
        await client.get_token(credentials)
    assert caught.value.code == "pms_html_instead_of_json"
    assert not caught.value.retryable


# --- limits ----------------------------------------------------------------------------------


async def test_a_spent_rate_limit_is_rate_limited_with_retry_after(
    kross_http: httpx.AsyncClient,
    client: KrossClient,
    credentials: Credentials,
    clock: ManualClock,
) -> None:
    await kross_http.put(
        f"/_sandbox/facilities/{credentials.hotel_id}/limits", json={"per_minute": 3}
    )
    token = await client.get_token(credentials)
    await client.call("get-contract", {"id_room_type": 10}, token)
    await client.call("get-contract", {"id_room_type": 10}, token)
    with pytest.raises(errors.RateLimited) as caught:
        await client.call("get-contract", {"id_room_type": 10}, token)
    assert caught.value.code == "pms_rate_limited"
    assert caught.value.retryable
    assert caught.value.retry_after is not None
    assert 0 < caught.value.retry_after <= 60
    clock.advance(caught.value.retry_after)
    await client.call("get-contract", {"id_room_type": 10}, token)


# --- transient faults and lost answers -------------------------------------------------------


async def test_a_server_error_is_upstream_unavailable_and_retryable(
    kross_http: httpx.AsyncClient, client: KrossClient, token: Token
) -> None:
    await kross_http.post("/_sandbox/faults", json={"error_rate": 1.0})
    with pytest.raises(errors.UpstreamUnavailable) as caught:
        await client.call("reservations/get-list", {}, token)
    assert caught.value.retryable
    assert caught.value.status is not None and caught.value.status >= 500
    assert caught.value.code == "pms_unavailable"


async def test_a_server_error_on_a_write_is_retryable_because_nothing_was_committed(
    kross_http: httpx.AsyncClient, client: KrossClient, token: Token
) -> None:
    await kross_http.post("/_sandbox/faults", json={"error_rate": 1.0})
    payment = AddPayment(id_reservation=1001, amount=1, currency="EUR", method="card")
    with pytest.raises(errors.UpstreamUnavailable):
        await client.call("reservations/add-payment", payment, token)


@pytest.mark.parametrize("mode", ["hang", "disconnect"])
async def test_a_write_that_commits_and_then_times_out_has_an_unknown_outcome(
    kross_http: httpx.AsyncClient,
    clock: ManualClock,
    credentials: Credentials,
    mode: str,
) -> None:
    client = make_client(kross_http, clock, timeout_s=0.05)
    token = await client.get_token(credentials)
    res = (await reservations(client, token))[0]
    await kross_http.post(
        "/_sandbox/faults",
        json={"commit_then_timeout": 1, "timeout_mode": mode, "hang_s": 30},
    )
    payment = AddPayment(
        id_reservation=res.id_reservation, amount=12.34, currency="EUR", method="card"
    )
    with pytest.raises(errors.WriteOutcomeUnknown) as caught:
        await client.call("reservations/add-payment", payment, token)
    assert not caught.value.retryable
    assert caught.value.code == "pms_write_outcome_unknown"
    # The write did land: exactly why the client must not say "failed, send again".
    after = await client.call(
        "reservations/get-list", {"id_reservation": res.id_reservation}, token
    )
    assert any(p.amount == 12.34 for p in after.many(Reservation)[0].payments)


async def test_a_read_that_times_out_is_upstream_unavailable(
    kross_http: httpx.AsyncClient, clock: ManualClock, credentials: Credentials
) -> None:
    client = make_client(kross_http, clock, timeout_s=0.05)
    token = await client.get_token(credentials)
    await kross_http.post("/_sandbox/faults", json={"latency_s": 30})
    with pytest.raises(errors.UpstreamUnavailable) as caught:
        await client.call("reservations/get-list", {}, token)
    assert caught.value.retryable


# --- secrets ---------------------------------------------------------------------------------


async def test_no_password_api_key_or_token_in_logs_reprs_or_errors(
    kross_http: httpx.AsyncClient,
    clock: ManualClock,
    credentials: Credentials,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    secrets = [credentials.password.get_secret_value(), credentials.api_key.get_secret_value()]
    rendered: list[str] = [repr(credentials), str(credentials), str(credentials.model_dump())]
    client = make_client(kross_http, clock)
    with structlog.testing.capture_logs() as logs:
        token = await client.get_token(credentials)
        secrets.append(token.value.get_secret_value())
        rendered += [repr(token), str(token), str(token.model_dump())]
        await client.call("reservations/get-list", {"limit": 1}, token)
        failures: list[errors.KrossError] = []
        await kross_http.post(
            f"/_sandbox/facilities/{credentials.hotel_id}/password", json={"password": "other"}
        )
        for attempt in (
            client.call("reservations/get-list", {}, token),
            client.call("reservations/get-list", {}, token.value.get_secret_value()),
            client.get_token(credentials),
            make_client(kross_http, clock, user_agent="curl/8").get_token(credentials),
        ):
            with pytest.raises(errors.KrossError) as caught:
                await attempt
            failures.append(caught.value)
    assert [e.code for e in failures] == [
        "kross_token_rejected",
        "kross_token_rejected",
        "pms_auth_failed",
        "pms_edge_blocked",
    ]
    assert any(entry["event"] == "kross_request" for entry in logs)
    rendered += [str(entry) for entry in logs]
    rendered += [caplog.text]
    for error in failures:
        rendered += [str(error), repr(error), error.message, str(vars(error))]
    text = "\n".join(rendered)
    for secret in secrets:
        assert secret not in text


async def test_each_request_leaves_one_debug_line_with_operation_status_ruid_and_time(
    client: KrossClient, credentials: Credentials
) -> None:
    with structlog.testing.capture_logs() as logs:
        token = await client.get_token(credentials)
        result = await client.call("get-house-manual", {"id_room_type": 10}, token)
    lines = [entry for entry in logs if entry["event"] == "kross_request"]
    assert [line["operation"] for line in lines] == ["auth/get-token", "get-house-manual"]
    assert lines[1]["status"] == 200
    assert lines[1]["ruid"] == result.ruid
    assert all(line["log_level"] == "debug" and "elapsed_ms" in line for line in lines)
