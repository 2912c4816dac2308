"""Hostile request shapes on the assembled app: deep JSON, large bodies, wrong methods.

Every one is answered with a real status and the service's error body, never a 500, and
a large body is refused before it is read whole.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio
import httpx
import pytest
from fastapi import FastAPI, Request
from pydantic import SecretStr

from pmsgate.boundary import MAX_JSON_DEPTH
from pmsgate.clock import ManualClock
from pmsgate.errors import install_error_handlers
from pmsgate.gateway.context import GatewayServices
from pmsgate.gateway.scopes import all_scopes
from pmsgate.sandbox.kross.store import KrossStore
from tests.support.answers import assert_refusal
from tests.support.facilities import emulator_settings, served_gateway
from tests.support.front import behind_the_front

pytestmark = pytest.mark.anyio

BASE_URL = "http://gateway.test"
ADMIN_TOKEN = "admin-token-for-limit-tests-0123"
MAX_BODY = 64 * 1024
MAX_UPLOAD = 256 * 1024


@dataclass
class Gateway:
    app: FastAPI
    services: GatewayServices
    key: str

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app), base_url=BASE_URL)

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


@pytest.fixture
async def gateway(
    database_url: str, kross_http: httpx.AsyncClient, kross_store: KrossStore, clock: ManualClock
) -> AsyncIterator[Gateway]:
    settings = emulator_settings(
        database_url,
        kross_http,
        admin_token=SecretStr(ADMIN_TOKEN),
        max_body_bytes=MAX_BODY,
        max_upload_body_bytes=MAX_UPLOAD,
    )
    every_route = list(all_scopes())
    async with served_gateway(
        settings, kross_http, kross_store, clock, scopes=every_route
    ) as served:
        assert served.first_key is not None
        yield Gateway(app=served.app, services=served.container.gateway, key=served.first_key)


def _nested(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


# --- nesting depth ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/v1/tools/check-availability", "/v1/operations/reservations/get-list"]
)
@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 10_000])
async def test_deeply_nested_json_is_a_422_not_a_recursion_error(
    gateway: Gateway, path: str, depth: int
) -> None:
    body = _nested(depth)
    async with gateway.client() as client:
        answer = await client.post(
            path,
            content=body,
            headers={**gateway.auth, "Content-Type": "application/json", "Idempotency-Key": "k1"},
        )
    assert_refusal(answer, 422, "json_too_deep")


async def test_deeply_nested_arrays_are_refused_too(gateway: Gateway) -> None:
    body = b'{"a":' + b"[" * 10_000 + b"]" * 10_000 + b"}"
    async with gateway.client() as client:
        answer = await client.post(
            "/v1/tools/check-availability", content=body, headers=gateway.auth
        )
    assert_refusal(answer, 422, "json_too_deep")


async def test_nesting_within_the_limit_reaches_the_tool(gateway: Gateway) -> None:
    async with gateway.client() as client:
        answer = await client.post(
            "/v1/tools/check-availability",
            content=_nested(MAX_JSON_DEPTH - 1),
            headers=gateway.auth,
        )
    # The tool's own argument check answers: the depth was accepted.
    assert_refusal(answer, 422, "invalid_arguments")


# --- body size ----------------------------------------------------------------------------


async def _chunks(total: int, size: int = 16 * 1024) -> AsyncIterator[bytes]:
    sent = 0
    while sent < total:
        yield b" " * min(size, total - sent)
        sent += size


@pytest.mark.parametrize(
    "path",
    [
        "/v1/tools/check-availability",
        "/v1/operations/reservations/get-list",
        "/admin/facilities",
        "/mcp",
    ],
)
async def test_a_body_over_the_limit_is_a_413_by_content_length(
    gateway: Gateway, path: str
) -> None:
    async with gateway.client() as client:
        answer = await client.post(
            path, content=b" " * (MAX_BODY + 1), headers={**gateway.auth, "X-Request-Id": "r1"}
        )
    assert_refusal(answer, 413, "payload_too_large")
    assert answer.headers["x-request-id"] == "r1"


@pytest.mark.parametrize("path", ["/v1/tools/check-availability", "/admin/facilities", "/mcp"])
async def test_a_streamed_body_over_the_limit_is_a_413_without_content_length(
    gateway: Gateway, path: str
) -> None:
    headers = {**gateway.auth, "Content-Type": "application/json"}
    if path.startswith("/admin"):
        headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
    async with gateway.client() as client:
        request = client.build_request("POST", path, content=_chunks(MAX_BODY * 4), headers=headers)
        assert "content-length" not in request.headers
        answer = await client.send(request)
    assert_refusal(answer, 413, "payload_too_large")


async def test_the_pictures_operation_accepts_bodies_up_to_its_own_limit(gateway: Gateway) -> None:
    path = "/v1/operations/save-guest-pictures"
    headers = {**gateway.auth, "Idempotency-Key": "pics-1"}
    async with gateway.client() as client:
        within = await client.post(path, content=b" " * (MAX_BODY * 2) + b"{}", headers=headers)
        over = await client.post(path, content=b" " * (MAX_UPLOAD + 1), headers=headers)
    assert within.status_code != 413  # read and answered by the operation itself
    assert within.json()["error"]["code"] != "payload_too_large"
    assert_refusal(over, 413, "payload_too_large")


async def test_the_middleware_stops_reading_at_the_limit() -> None:
    app = FastAPI()
    install_error_handlers(app)
    read: list[int] = []

    @app.post("/echo")
    async def echo(request: Request) -> dict[str, int]:
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            read.append(size)
        return {"size": size}

    transport = httpx.ASGITransport(app=behind_the_front(app))
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
        ok = await client.post("/echo", content=_chunks(1000, 100))
        refused = await client.post("/echo", content=_chunks(10_000, 100))
    assert ok.json() == {"size": 1000}
    assert_refusal(refused, 413, "payload_too_large")
    assert max(read) <= 1100  # the rest of the body was never read


# --- methods ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("DELETE", "/v1/tools", "GET"),
        ("GET", "/v1/tools/check-availability", "POST"),
        ("PUT", "/admin/facilities", "GET, POST"),
        ("PATCH", "/admin/facilities/123/keys", "GET, POST"),
    ],
)
async def test_a_405_names_the_allowed_methods(
    gateway: Gateway, method: str, path: str, allow: str
) -> None:
    async with gateway.client() as client:
        answer = await client.request(method, path, headers=gateway.auth)
    assert_refusal(answer, 405, "method_not_allowed")
    assert answer.headers["allow"] == allow


@pytest.mark.parametrize("with_key", [True, False])
@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
async def test_mcp_answers_only_post_and_never_opens_a_stream(
    gateway: Gateway, method: str, with_key: bool
) -> None:
    headers = {"Accept": "text/event-stream", **(gateway.auth if with_key else {})}
    async with gateway.client() as client:
        with anyio.fail_after(5):  # a held-open stream would never end
            async with client.stream(method, "/mcp", headers=headers) as answer:
                await answer.aread()
    assert answer.status_code == 405
    assert answer.headers["allow"] == "POST"
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["error"]["code"] == "method_not_allowed"
