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
from pmsgate.integrations.kross import errors
from pmsgate.integrations.kross.client import KrossClient
from pmsgate.integrations.kross.credentials import Credentials
from pmsgate.integrations.kross.operations import load_operations

pytestmark = pytest.mark.anyio

BASE = "http://kross.fake"
CREDS = Credentials(
    hotel_id="123456",
    username="api12345",
    password="pw-not-shown",
    api_key="0123456789abcdef0123456789abcdef",
)

Handler = Callable[[httpx.Request], httpx.Response]


def _client(handler: Handler, clock: ManualClock) -> KrossClient:
    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return KrossClient(
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
    with pytest.raises(errors.UpstreamUnavailable) as caught:
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
    with pytest.raises(errors.UpstreamUnavailable) as caught:
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
    with pytest.raises(errors.WriteOutcomeUnknown) as caught:
        await client.call(operation, {}, "tok")
    assert not caught.value.retryable
    assert caught.value.code == "pms_write_outcome_unknown"


async def test_a_lost_token_answer_is_retryable_because_a_token_request_is_replay_safe(
    clock: ManualClock,
) -> None:
    client = _client(_raise(httpx.ReadTimeout), clock)
    with pytest.raises(errors.UpstreamUnavailable):
        await client.get_token(CREDS)


async def test_a_gateway_timeout_on_a_write_is_an_unknown_outcome(clock: ManualClock) -> None:
    client = _client(_answer(504, text="upstream timed out"), clock)
    with pytest.raises(errors.WriteOutcomeUnknown):
        await client.call("reservations/add-payment", {}, "tok")
    with pytest.raises(errors.UpstreamUnavailable):
        await client.call("reservations/get-list", {}, "tok")


async def test_an_html_error_page_from_a_proxy_on_5xx_is_retryable(clock: ManualClock) -> None:
    page = "<!DOCTYPE html><html><body>502 Bad Gateway</body></html>"
    client = _client(_answer(502, text=page, headers={"content-type": "text/html"}), clock)
    with pytest.raises(errors.UpstreamUnavailable) as caught:
        await client.call("reservations/get-list", {}, "tok")
    assert caught.value.status == 502


async def test_an_html_page_on_200_is_html_instead_of_json(clock: ManualClock) -> None:
    client = _client(_answer(200, text="<html><h1>API v5</h1></html>"), clock)
    with pytest.raises(errors.HtmlInsteadOfJson):
        await client.call("reservations/get-list", {}, "tok")


async def test_retry_after_as_an_http_date_is_turned_into_seconds(clock: ManualClock) -> None:
    when = clock.now() + timedelta(seconds=42)
    header = when.astimezone(UTC).strftime("%a, %d %b %Y %H:%M:%S GMT")
    body = {"error_code": "RATE_LIMITED", "error_message": "slow down", "ruid": "r-1"}
    client = _client(_answer(429, body, headers={"Retry-After": header}), clock)
    with pytest.raises(errors.RateLimited) as caught:
        await client.call("reservations/get-list", {}, "tok")
    assert caught.value.retry_after == pytest.approx(42)
    assert caught.value.retryable
    assert caught.value.ruid == "r-1"


async def test_a_rate_limit_without_retry_after_has_none(clock: ManualClock) -> None:
    client = _client(_answer(429, {"error_code": "RATE_LIMITED"}), clock)
    with pytest.raises(errors.RateLimited) as caught:
        await client.call("reservations/get-list", {}, "tok")
    assert caught.value.retry_after is None


async def test_a_forbidden_answer_that_is_not_the_edge_block_is_access_denied(
    clock: ManualClock,
) -> None:
    client = _client(_answer(403, {"error_code": "IP_NOT_ALLOWED"}), clock)
    with pytest.raises(errors.AccessDenied) as caught:
        await client.call("reservations/get-list", {}, "tok")
    assert caught.value.upstream_code == "IP_NOT_ALLOWED"


async def test_an_error_envelope_on_http_200_is_still_an_error(clock: ManualClock) -> None:
    client = _client(_answer(200, {"error_code": "NOT_FOUND", "error_message": "no"}), clock)
    with pytest.raises(errors.InvalidRequest) as caught:
        await client.call("get-contract", {"id_room_type": 1}, "tok")
    assert caught.value.upstream_code == "NOT_FOUND"


async def test_a_json_answer_that_is_not_an_envelope_is_unexpected(clock: ManualClock) -> None:
    client = _client(_answer(200, [1, 2, 3]), clock)
    with pytest.raises(errors.UnexpectedResponse):
        await client.call("reservations/get-list", {}, "tok")


async def test_a_plain_404_without_json_is_an_unknown_operation(clock: ManualClock) -> None:
    client = _client(_answer(404, text="Not Found"), clock)
    with pytest.raises(errors.UnknownOperation) as caught:
        await client.call("get-contract", {}, "tok")
    assert caught.value.status == 404


async def test_a_token_answer_without_a_token_is_unexpected(clock: ManualClock) -> None:
    client = _client(_answer(200, {"data": {"token": "x"}, "ruid": "r"}), clock)
    with pytest.raises(errors.UnexpectedResponse):
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
    client = KrossClient.from_settings(settings, http, clock)
    await client.call("get-house-manual", {"id_room_type": 1}, "tok")
    assert str(seen[0].url) == "http://kross.fake/v5/reservations/get-house-manual"
    assert seen[0].headers["user-agent"] == "Mozilla/5.0 test"


async def test_every_kross_error_carries_a_stable_kross_code(clock: ManualClock) -> None:
    client = _client(_answer(500, {"error_code": "SERVER_ERROR"}), clock)
    with pytest.raises(errors.KrossError) as caught:
        await client.call("reservations/get-list", {}, "tok")
    assert caught.value.code.startswith("pms_")
    assert caught.value.retryable


async def test_a_success_answer_without_data_is_unexpected(clock: ManualClock) -> None:
    client = _client(_answer(200, {"ruid": "r", "count": 0}), clock)
    with pytest.raises(errors.UnexpectedResponse):
        await client.call("reservations/get-list", {}, "tok")


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (401, {"error_code": "AUTH_FAILED"}),
        (400, {"error_code": 1001, "error_message": "Invalid credentials."}),
        (403, {"error_code": "INVALID_CREDENTIALS"}),
        (422, {"error_message": "username must be apiNNNNN"}),
        (200, {"error_code": "LOGIN_FAILED", "error_message": "Login failed."}),
        (200, {"error_code": "ANYTHING_ELSE"}),
    ],
)
async def test_every_non_transient_refusal_of_a_login_is_an_authentication_failure(
    clock: ManualClock, status: int, body: dict[str, object]
) -> None:
    client = _client(_answer(status, body), clock)
    with pytest.raises(errors.AuthenticationFailed) as caught:
        await client.get_token(CREDS)
    assert caught.value.code == "pms_auth_failed"
    assert caught.value.may_have_been_sent is False


@pytest.mark.parametrize(
    ("status", "body", "error_class"),
    [
        (429, {"error_code": "TOO_MANY_SESSIONS"}, errors.TooManySessions),
        (429, {"error_code": "RATE_LIMITED"}, errors.RateLimited),
        (503, {"error_code": "SERVER_ERROR"}, errors.UpstreamUnavailable),
        (408, None, errors.UpstreamUnavailable),
    ],
)
async def test_a_transient_refusal_of_a_login_is_not_a_verdict_on_the_credentials(
    clock: ManualClock,
    status: int,
    body: dict[str, object] | None,
    error_class: type[errors.KrossError],
) -> None:
    client = _client(_answer(status, body), clock)
    with pytest.raises(error_class):
        await client.get_token(CREDS)


async def test_the_edge_block_on_a_login_stays_a_configuration_fault(clock: ManualClock) -> None:
    client = _client(_answer(403, text="error code: 1010"), clock)
    with pytest.raises(errors.EdgeBlocked) as caught:
        await client.get_token(CREDS)
    assert caught.value.upstream_code == "1010"


@pytest.mark.parametrize("code", ["TOKEN_EXPIRED", "EXPIRED_TOKEN", "invalid_auth_token"])
async def test_a_token_refused_in_a_200_answer_is_a_rejected_token(
    clock: ManualClock, code: str
) -> None:
    client = _client(_answer(200, {"error_code": code, "ruid": "r-7"}), clock)
    with pytest.raises(errors.TokenRejected) as caught:
        await client.call("reservations/get-list", {}, "tok")
    assert caught.value.ruid == "r-7"
    assert caught.value.may_have_been_sent is False


async def test_an_unknown_error_code_in_a_200_answer_is_an_error_not_data(
    clock: ManualClock,
) -> None:
    body = {"data": [], "error_code": "QUOTA_RULE_42", "ruid": "r"}
    client = _client(_answer(200, body), clock)
    with pytest.raises(errors.InvalidRequest) as caught:
        await client.call("reservations/get-list", {}, "tok")
    assert caught.value.upstream_code == "QUOTA_RULE_42"


@pytest.mark.parametrize("no_code", [None, "", 0, "0", False])
async def test_an_empty_error_code_on_a_success_is_data(
    clock: ManualClock, no_code: object
) -> None:
    body = {"data": [], "count": 0, "error_code": no_code, "ruid": "r"}
    result = await _client(_answer(200, body), clock).call("reservations/get-list", {}, "tok")
    assert result.data == []


async def test_a_request_that_never_left_was_not_sent(clock: ManualClock) -> None:
    client = _client(_raise(httpx.ConnectError), clock)
    with pytest.raises(errors.UpstreamUnavailable) as caught:
        await client.call("reservations/save", {}, "tok")
    assert caught.value.may_have_been_sent is False


async def test_a_service_unavailable_answer_carries_its_retry_after(clock: ManualClock) -> None:
    client = _client(
        _answer(503, {"error_code": "SERVER_ERROR"}, headers={"Retry-After": "5"}), clock
    )
    with pytest.raises(errors.UpstreamUnavailable) as caught:
        await client.call("reservations/get-list", {}, "tok")
    assert caught.value.retry_after == 5
