"""The gateway on the emulator's variants of the booking system (reference/upstreams.md §1):
a login refused in every public shape, a token rejected as a 200 with an error code (named,
or the number 401), and the operations living under ``reservations/`` only (the bare path
answered "no such operation" by name, as a JSON 404 with ``error_code: 404``, or as text).
The last tests use ``httpx.MockTransport`` for upstream answers the emulator does not give
(a token rejected again right after a refresh, a Retry-After of an hour)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import structlog
from pydantic import SecretStr

from pmsgate.gateway.facilities import NewFacility
from tests.e2e.conftest import Gateway, gateway_settings, running_gateway
from tests.support.answers import assert_error
from tests.support.payments import future_confirmed

pytestmark = pytest.mark.anyio

GET_TOKEN = "auth/get-token"
INSTRUCTIONS = "get-check-in-instructions"


async def budget_left(gateway: Gateway, hotel_id: str) -> int:
    facility = await gateway.services.facilities.get(hotel_id)
    remaining = await gateway.services.limiter.remaining(
        gateway.services.gateway.limit_key(facility), facility.limits
    )
    return remaining["minute"]


@pytest.mark.parametrize("refusal", ["401", "400", "403", "200"])
async def test_a_refused_login_in_any_shape_puts_the_facility_in_error_with_one_login_upstream(
    gateway: Gateway,
    facility: tuple[dict[str, Any], str],
    kross_store: Any,
    clock: Any,
    refusal: str,
) -> None:
    record, key = facility
    hotel_id = record["hotel_id"]
    kross_store.configure(login_refusal=refusal)
    kross_store.change_password(hotel_id, "changed-by-the-customer")

    for _ in range(20):
        answer = await gateway.tool("get-in-house-guests", key)
        assert_error(answer, 502, "pms_auth_failed")
    assert (await gateway.services.facilities.get(hotel_id)).status == "error"
    assert kross_store.stats.requests_by_operation[GET_TOKEN] == 1

    # Not a second before the re-authentication interval is over.
    clock.advance(gateway.services.settings.reauth_interval_s - 1)
    await gateway.tool("get-in-house-guests", key)
    assert kross_store.stats.requests_by_operation[GET_TOKEN] == 1

    clock.advance(1)
    for _ in range(5):
        await gateway.tool("get-in-house-guests", key)
    assert kross_store.stats.requests_by_operation[GET_TOKEN] == 2
    assert (await gateway.services.facilities.get(hotel_id)).status == "error"


@pytest.mark.parametrize("rejection", ["401", "200", "200-401"])
async def test_a_token_rejected_in_any_shape_gets_one_new_token_and_one_retry(
    gateway: Gateway, facility: tuple[dict[str, Any], str], kross_store: Any, rejection: str
) -> None:
    record, key = facility
    hotel_id = record["hotel_id"]
    apartments = [a["id_room_type"] for a in record["apartments"]]
    # "200-401": HTTP 200 with {"error_code": 401, "error_message", "ruid"}.
    kross_store.configure(token_rejection=rejection)
    assert (
        await gateway.tool("get-checkin-instructions", key, apartment_id=apartments[0])
    ).is_success
    # Same password: every token the facility holds stops working, the credentials still do.
    kross_store.change_password(hotel_id, record["password"])

    answer = await gateway.tool("get-checkin-instructions", key, apartment_id=apartments[1])
    assert answer.status_code == 200, answer.text
    assert kross_store.stats.tokens_issued[hotel_id] == 2
    assert kross_store.stats.requests_by_operation[GET_TOKEN] == 2
    # the first call, the rejected one, the retry with the new token
    assert kross_store.stats.requests_by_operation[INSTRUCTIONS] == 3
    assert (await gateway.services.facilities.get(hotel_id)).status == "connected"


@pytest.mark.parametrize("no_such_operation", ["named", "404", "plain"])
async def test_operations_found_only_under_their_group_are_found_once_and_remembered(
    gateway: Gateway,
    facility: tuple[dict[str, Any], str],
    kross_store: Any,
    no_such_operation: str,
) -> None:
    record, key = facility
    hotel_id = record["hotel_id"]
    apartments = [a["id_room_type"] for a in record["apartments"]]
    # "404": a JSON 404 with {"error_code": 404}; "plain": a text 404.
    kross_store.configure(grouped_paths=True, unknown_operation=no_such_operation)
    before = await budget_left(gateway, hotel_id)

    with structlog.testing.capture_logs() as logs:
        first = await gateway.tool("get-checkin-instructions", key, apartment_id=apartments[0])
    assert first.status_code == 200, first.text
    # the login, the spec path ("no such operation"), the grouped path: three permits
    assert kross_store.stats.requests_total == 3
    # one grouped-path try, which answered
    assert kross_store.stats.requests_by_operation[INSTRUCTIONS] == 1
    assert await budget_left(gateway, hotel_id) == before - 3
    fallbacks = [e for e in logs if e["event"] == "kross_path_fallback"]
    assert [(e["operation"], e["path"]) for e in fallbacks] == [
        (INSTRUCTIONS, "reservations/get-check-in-instructions")
    ]

    second = await gateway.tool("get-checkin-instructions", key, apartment_id=apartments[1])
    assert second.status_code == 200, second.text
    assert kross_store.stats.requests_total == 4
    assert await budget_left(gateway, hotel_id) == before - 4
    assert gateway.services.kross.resolved_paths()[INSTRUCTIONS] == (
        "reservations/get-check-in-instructions"
    )


def guest_body(kross_store: Any, hotel_id: str, clock: Any) -> dict[str, Any]:
    today = clock.now().date()
    reservation = future_confirmed(kross_store, hotel_id, today).id_reservation
    return {
        "id_reservation": reservation,
        "guest": {
            "first_name": "Test",
            "last_name": "Guest",
            "birth_date": "1990-01-01",
            "nationality": "IT",
            "document_type": "passport",
            "document_number": "X0000000",
        },
    }


async def write(gateway: Gateway, key: str, path: str, body: dict[str, Any], idem: str) -> Any:
    headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": idem}
    return await gateway.http.post(f"/v1/operations/{path}", json=body, headers=headers)


async def guest_registered_on_grouped_paths(
    gateway: Gateway, facility: tuple[dict[str, Any], str], kross_store: Any, clock: Any, idem: str
) -> tuple[Any, int]:
    """check-in-guest with the emulator answering only on its grouped paths; the answer and
    how many guests the reservation gained."""
    record, key = facility
    kross_store.configure(grouped_paths=True)
    body = guest_body(kross_store, record["hotel_id"], clock)

    def guests() -> int:
        reservations = kross_store.facility(record["hotel_id"]).reservations
        return len(reservations[body["id_reservation"]].guests)

    before = guests()
    answer = await write(gateway, key, "check-in-guest", body, idem)
    return answer, guests() - before


async def test_a_write_answered_no_such_operation_is_applied_once_on_the_grouped_path(
    gateway: Gateway, facility: tuple[dict[str, Any], str], kross_store: Any, clock: Any
) -> None:
    answer, added = await guest_registered_on_grouped_paths(
        gateway, facility, kross_store, clock, "guest-grouped"
    )
    assert answer.status_code == 200, answer.text
    assert added == 1
    # the login, the spec path (nothing applied), the grouped path (applied)
    assert kross_store.stats.requests_total == 3
    assert kross_store.stats.requests_by_operation["check-in-guest"] == 1


async def test_a_write_lost_on_the_grouped_path_is_read_back_never_sent_again(
    gateway: Gateway, facility: tuple[dict[str, Any], str], kross_store: Any, clock: Any
) -> None:
    kross_store.set_faults(commit_then_timeout=1, timeout_mode="disconnect")
    answer, added = await guest_registered_on_grouped_paths(
        gateway, facility, kross_store, clock, "g"
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["meta"]["recovered"] is True
    assert added == 1
    # the login, the spec path (nothing applied), the grouped path (applied), the read-back
    assert kross_store.stats.requests_total == 4
    assert kross_store.stats.requests_by_operation["check-in-guest"] == 1


# --- answer shapes the emulator does not produce: httpx.MockTransport as the upstream ---------


class FakeKross:
    """Answers every login with a new token and every operation with ``answer``; counts both."""

    def __init__(self, answer: httpx.Response) -> None:
        self.answer = answer
        self.logins = 0
        self.calls = 0

    def handler(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith(GET_TOKEN):
            self.logins += 1
            return httpx.Response(200, json={"data": {"auth_token": f"token-{self.logins}"}})
        self.calls += 1
        return self.answer


async def fake_gateway_call(
    database_url: str, clock: Any, fake: FakeKross
) -> tuple[httpx.Response, Gateway]:
    settings = gateway_settings(database_url)
    kross = httpx.AsyncClient(transport=httpx.MockTransport(fake.handler))
    async with kross, running_gateway(settings, kross, clock) as gateway:
        _, key = await gateway.services.facilities.add(
            NewFacility(
                hotel_id="123456",
                username="api12345",
                password=SecretStr("pw-not-shown"),
                kind="partner",
                integration_id="int-fake",
            )
        )
        answer = await gateway.tool("get-checkin-instructions", key, apartment_id=1)
    return answer, gateway


async def rate_limited_call(
    database_url: str, clock: Any, *, retry_after: str
) -> tuple[FakeKross, httpx.Response]:
    """A tool call on a booking system that answers every request 429 with ``retry_after``;
    the fake and the gateway's answer."""
    limited = {"error_code": "RATE_LIMITED"}
    fake = FakeKross(httpx.Response(429, json=limited, headers={"Retry-After": retry_after}))
    answer, _ = await fake_gateway_call(database_url, clock, fake)
    return fake, answer


async def test_a_token_rejected_again_after_the_refresh_fails_the_call_without_a_third_login(
    database_url: str, clock: Any
) -> None:
    fake = FakeKross(httpx.Response(200, json={"error_code": "AUTH_TOKEN_EXPIRED", "ruid": "r"}))
    answer, _ = await fake_gateway_call(database_url, clock, fake)
    assert_error(answer, 502, "kross_token_rejected")
    assert (fake.logins, fake.calls) == (2, 2)


async def test_a_retry_after_longer_than_the_read_deadline_is_not_waited(
    database_url: str, clock: Any
) -> None:
    fake, answer = await rate_limited_call(database_url, clock, retry_after="3600")
    assert_error(answer, 429, "pms_rate_limited")
    assert fake.calls == 1


async def test_a_short_retry_after_is_honoured_within_the_attempts(
    database_url: str, clock: Any
) -> None:
    fake, answer = await rate_limited_call(database_url, clock, retry_after="1")
    assert answer.status_code == 429
    # stamina's testing mode in tests/e2e fixes the attempts at 3
    assert fake.calls == 3
