"""Client behaviour the emulator cannot produce: transport failures and odd answers.

These use ``httpx.MockTransport`` as a fake network (our own code is never mocked);
everything the emulator can show is tested against it in ``test_client.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from pmsgate.clock import ManualClock
from pmsgate.config import DEFAULT_USER_AGENT, Settings
from pmsgate.pms.client import PmsClient
from pmsgate.pms.credentials import Credentials
from pmsgate.pms.errors import (
    AccessDenied,
    HtmlInsteadOfJson,
    InvalidRequest,
    PmsError,
    RateLimited,
    UnexpectedResponse,
    UnknownOperation,
    UpstreamUnavailable,
    WriteOutcomeUnknown,
)
from pmsgate.pms.operations import load_operations

pytestmark = pytest.mark.anyio

BASE = "http://kross.fake"
CREDS = Credentials(
    hotel_id="123456",
    username="api12345",
    password="pw-not-shown",
    api_key="0123456789abcdef0123456789abcdef",
)

Handler = Callable[[httpx.Request], httpx.Response]


def _client(handler: Handler, clock: ManualClock) -> PmsClient:
    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return PmsClient(
        http,
        base_url=BASE,
        operations=load_operations(),
        user_agent=DEFAULT_USER_AGENT,
        clock=clock,
    )


def _raise(exc_type: type[httpx.TransportError]) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc_type("simulated", request=request)

    return handler


def _answer(status: int, body: object = None, **kwargs: object) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        if body is None:
            return httpx.Response(status, **kwargs)  # type: ignore[arg-type]
        return httpx.Response(status, json=body, **kwargs)  # type: ignore[arg-type]

    return handler


@pytest.mark.parametrize("exc_type", [httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout])
@pytest.mark.parametrize("operation", ["reservations/get-list", "reservations/save"])
async def test_a_request_that_never_left_is_retryable_for_reads_and_writes(
    clock: ManualClock, exc_type: type[httpx.TransportError], operation: str
) -> None:
    client = _client(_raise(exc_type), clock)
    with pytest.raises(UpstreamUnavailable) as caught:
        await client.call(operation, {}, "tok")
    assert caught.value.retryable
    assert caught.value.code == "pms_unavailable"


@pytest.mark.parametrize(
    "exc_type", [httpx.ReadTimeout, httpx.WriteTimeout, httpx.RemoteProtocolError, httpx.ReadError]
)
async def test_a_read_whose_answer_is_lost_is_retryable(
    clock: ManualClock, exc_type: type[httpx.TransportError]
) -> None:
    client = _client(_raise(exc_type), clock)
    with pytest.raises(UpstreamUnavailable) as caught:
        await client.call("calendar/get-availability", {}, "tok")
    assert caught.value.retryable


@pytest.mark.parametrize(
    "exc_type", [httpx.ReadTimeout, httpx.WriteTimeout, httpx.RemoteProtocolError, httpx.ReadError]
)
@pytest.mark.parametrize(
    "operation",
    ["reservations/save", "reservations/add-payment", "check-in-guest", "save-guest-pictures"],
)
async def test_a_write_whose_answer_is_lost_has_an_unknown_outcome(
    clock: ManualClock, exc_type: type[httpx.TransportError], operation: str
) -> None:
    client = _client(_raise(exc_type), clock)
    with pytest.raises(WriteOutcomeUnknown) as caught:
        await client.call(operation, {}, "tok")
    assert not caught.value.retryable
    assert caught.value.code == "pms_write_outcome_unknown"


async def test_a_lost_token_answer_is_retryable_because_a_token_request_is_replay_safe(
    clock: ManualClock,
) -> None:
    client = _client(_raise(httpx.ReadTimeout), clock)
    with pytest.raises(UpstreamUnavailable):
        await client.get_token(CREDS)


async def test_a_gateway_timeout_on_a_write_is_an_unknown_outcome(clock: ManualClock) -> None:
    client = _client(_answer(504, text="upstream timed out"), clock)
    with pytest.raises(WriteOutcomeUnknown):
        await client.call("reservations/add-payment", {}, "tok")
    with pytest.raises(UpstreamUnavailable):
        await client.call("reservations/get-list", {}, "tok")


async def test_an_html_error_page_from_a_proxy_on_5xx_is_retryable(clock: ManualClock) -> None:
    page = "<!DOCTYPE html><html><body>502 Bad Gateway</body></html>"
    client = _client(_answer(502, text=page, headers={"content-type": "text/html"}), clock)
    with pytest.raises(UpstreamUnavailable) as caught:
        await client.call("reservations/get-list", {}, "tok")
    assert caught.value.status == 502


async def test_an_html_page_on_200_is_html_instead_of_json(clock: ManualClock) -> None:
    client = _client(_answer(200, text="<html><h1>API v5</h1></html>"), clock)
    with pytest.raises(HtmlInsteadOfJson):
        await client.call("reservations/get-list", {}, "tok")


async def test_retry_after_as_an_http_date_is_turned_into_seconds(clock: ManualClock) -> None:
    when = clock.now() + timedelta(seconds=42)
    header = when.astimezone(UTC).strftime("%a, %d %b %Y %H:%M:%S GMT")
    body = {"error_code": "RATE_LIMITED", "error_message": "slow down", "ruid": "r-1"}
    client = _client(_answer(429, body, headers={"Retry-After": header}), clock)
    with pytest.raises(RateLimited) as caught:
        await client.call("reservations/get-list", {}, "tok")
    assert caught.value.retry_after == pytest.approx(42)
    assert caught.value.retryable
    assert caught.value.ruid == "r-1"


async def test_a_rate_limit_without_retry_after_has_none(clock: ManualClock) -> None:
    client = _client(_answer(429, {"error_code": "RATE_LIMITED"}), clock)
    with pytest.raises(RateLimited) as caught:
        await client.call("reservations/get-list", {}, "tok")
    assert caught.value.retry_after is None


async def test_a_forbidden_answer_that_is_not_the_edge_block_is_access_denied(
    clock: ManualClock,
) -> None:
    client = _client(_answer(403, {"error_code": "IP_NOT_ALLOWED"}), clock)
    with pytest.raises(AccessDenied) as caught:
        await client.call("reservations/get-list", {}, "tok")
    assert caught.value.upstream_code == "IP_NOT_ALLOWED"


async def test_an_error_envelope_on_http_200_is_still_an_error(clock: ManualClock) -> None:
    client = _client(_answer(200, {"error_code": "NOT_FOUND", "error_message": "no"}), clock)
    with pytest.raises(InvalidRequest) as caught:
        await client.call("get-contract", {"id_room_type": 1}, "tok")
    assert caught.value.upstream_code == "NOT_FOUND"


async def test_a_json_answer_that_is_not_an_envelope_is_unexpected(clock: ManualClock) -> None:
    client = _client(_answer(200, [1, 2, 3]), clock)
    with pytest.raises(UnexpectedResponse):
        await client.call("reservations/get-list", {}, "tok")


async def test_a_plain_404_without_json_is_an_unknown_operation(clock: ManualClock) -> None:
    client = _client(_answer(404, text="Not Found"), clock)
    with pytest.raises(UnknownOperation) as caught:
        await client.call("get-contract", {}, "tok")
    assert caught.value.status == 404


async def test_a_token_answer_without_a_token_is_unexpected(clock: ManualClock) -> None:
    client = _client(_answer(200, {"data": {"token": "x"}, "ruid": "r"}), clock)
    with pytest.raises(UnexpectedResponse):
        await client.get_token(CREDS)


async def test_token_expiry_is_read_from_the_expire_timestamp_when_seconds_are_absent(
    clock: ManualClock,
) -> None:
    body = {"data": {"auth_token": "t", "auth_token_expire": "2026-11-25 10:30:00"}}
    token = await _client(_answer(200, body), clock).get_token(CREDS)
    assert token.expires_at == datetime(2026, 11, 25, 10, 30, tzinfo=UTC)


async def test_token_expiry_defaults_to_seven_days_from_now(clock: ManualClock) -> None:
    token = await _client(_answer(200, {"auth_token": "t"}), clock).get_token(CREDS)
    assert token.expires_at == clock.now() + timedelta(days=7)


async def test_relative_expiry_seconds_win_over_the_timestamp(clock: ManualClock) -> None:
    body = {
        "auth_token": "t",
        "auth_token_expire": "2030-01-01 00:00:00",
        "auth_token_expire_seconds": 3600,
    }
    token = await _client(_answer(200, body), clock).get_token(CREDS)
    assert token.expires_at == clock.now() + timedelta(hours=1)


async def test_every_request_goes_to_the_v5_path_with_a_browser_user_agent(
    clock: ManualClock,
) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path.endswith("auth/get-token"):
            return httpx.Response(200, json={"data": {"auth_token": "tok-1"}})
        return httpx.Response(200, json={"data": [], "count": 0, "ruid": "r"})

    client = _client(handler, clock)
    token = await client.get_token(CREDS)
    await client.call("reservations/get-list", {"with_rooms": True}, token)
    assert [r.url.path for r in seen] == ["/v5/auth/get-token", "/v5/reservations/get-list"]
    assert all(r.method == "POST" for r in seen)
    assert all(r.headers["user-agent"].startswith("Mozilla/5.0") for r in seen)
    assert "authorization" not in seen[0].headers
    assert seen[1].headers["authorization"] == "Bearer tok-1"


async def test_from_settings_applies_base_url_path_overrides_and_user_agent(
    clock: ManualClock,
) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"data": {}, "ruid": "r"})

    settings = Settings(
        kross_base_url="http://kross.fake/",
        kross_paths={"get-house-manual": "reservations/get-house-manual"},
        user_agent="Mozilla/5.0 test",
    )
    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    client = PmsClient.from_settings(settings, http, clock)
    await client.call("get-house-manual", {"id_room_type": 1}, "tok")
    assert str(seen[0].url) == "http://kross.fake/v5/reservations/get-house-manual"
    assert seen[0].headers["user-agent"] == "Mozilla/5.0 test"


async def test_every_pms_error_carries_a_stable_pms_code(clock: ManualClock) -> None:
    client = _client(_answer(500, {"error_code": "SERVER_ERROR"}), clock)
    with pytest.raises(PmsError) as caught:
        await client.call("reservations/get-list", {}, "tok")
    assert caught.value.code.startswith("pms_")
    assert caught.value.retryable


async def test_a_success_answer_without_data_is_unexpected(clock: ManualClock) -> None:
    client = _client(_answer(200, {"ruid": "r", "count": 0}), clock)
    with pytest.raises(UnexpectedResponse):
        await client.call("reservations/get-list", {}, "tok")
