"""The one HTTP layer of ``create_app`` (pmsgate.gateway.http_front) does what the five
middlewares it replaced did: latency by route template and status class, the request id in
the answer and in the logs, the body limit, the last-resort error guard, a trace's span.

And the documented tool and operation routes are answered by exact path ahead of FastAPI's
router (pmsgate.gateway.http.front_routes), their checks, errors and metrics unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import structlog
from fastapi import Depends, FastAPI, Request
from structlog.testing import capture_logs

from pmsgate.errors import PmsgateError, install_error_handlers
from pmsgate.gateway import http
from pmsgate.gateway.metrics import GatewayMetrics
from pmsgate.request_context import current_client_address, current_request_id
from tests.e2e.conftest import Gateway
from tests.support.answers import assert_error
from tests.support.front import behind_the_front

pytestmark = pytest.mark.anyio

DURATION = "pmsgate_http_request_duration_seconds_count"


def small_app(metrics: GatewayMetrics) -> FastAPI:
    app = FastAPI()
    install_error_handlers(app, guard=False)

    @app.get("/items/{item_id}")
    async def item(item_id: int) -> dict[str, str | None]:
        logged = structlog.contextvars.get_contextvars().get("request_id")
        return {"id": current_request_id(), "client": current_client_address(), "log": logged}

    @app.post("/refused")
    async def refused() -> None:
        raise PmsgateError("No budget.", code="upstream_budget_exhausted", status=429)

    @app.get("/crash")
    async def crash() -> None:
        raise RuntimeError("a secret in the message")

    @app.post("/echo")
    async def echo(request: Request) -> dict[str, int]:
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
        return {"size": size}

    return behind_the_front(app, metrics)


def count(metrics: GatewayMetrics, route: str, method: str, status: str) -> float:
    labels = {"route": route, "method": method, "status": status}
    return metrics.registry.get_sample_value(DURATION, labels) or 0.0


async def _chunks(total: int, size: int) -> AsyncIterator[bytes]:
    for _ in range(total // size):
        yield b" " * size


async def test_one_layer_does_what_the_five_middlewares_did() -> None:
    metrics = GatewayMetrics()
    transport = httpx.ASGITransport(app=small_app(metrics), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        mine = await client.get("/items/1", headers={"X-Request-ID": "abc-1"})
        made = await client.get("/items/2", headers={"X-Request-ID": "bad id!"})
        refused = await client.post("/refused")
        with capture_logs() as crash_logs:
            crashed = await client.get("/crash")
        declared = await client.post("/echo", content=b" " * 1001)
        counted = await client.post("/echo", content=_chunks(10_000, 100))
        within = await client.post("/echo", content=_chunks(1000, 100))
        missing = await client.get("/nothing")
    assert missing.status_code == 404 and missing.headers["x-request-id"]

    # The caller's acceptable id is used everywhere; an unacceptable one is replaced.
    assert mine.headers["x-request-id"] == "abc-1" == mine.json()["id"]
    assert mine.json()["client"] == "127.0.0.1"
    assert mine.json()["log"] == "abc-1"  # in every log line of the request
    assert made.headers["x-request-id"] == made.json()["id"] != "bad id!"
    assert len(made.headers["x-request-id"]) == 16
    assert structlog.contextvars.get_contextvars().get("request_id") is None
    # Errors keep their body and id; the unforeseen one logs its type, not its message.
    assert refused.status_code == 429 and "x-request-id" in refused.headers
    assert_error(crashed, 500, "internal_error")
    assert crashed.headers["x-request-id"]
    assert [(e["event"], e["error_type"]) for e in crash_logs] == [
        ("unexpected_error", "RuntimeError")
    ]
    assert "secret" not in str(crash_logs)
    # The body limit: declared or counted, one 413 with the error body and the id.
    for answer in (declared, counted):
        assert_error(answer, 413, "payload_too_large")
        assert answer.headers["x-request-id"]
    assert within.json() == {"size": 1000}
    # Every request timed by route template and status class.
    assert count(metrics, "/items/{item_id}", "GET", "2xx") == 2
    assert count(metrics, "/refused", "POST", "429") == 1
    assert count(metrics, "/crash", "GET", "5xx") == 1
    assert count(metrics, "/echo", "POST", "4xx") == 1  # the counted one reached the route
    assert count(metrics, "unmatched", "POST", "4xx") == 1  # refused before routing
    assert count(metrics, "/echo", "POST", "2xx") == 1
    assert count(metrics, "unmatched", "GET", "4xx") == 1


async def test_the_documented_tool_and_operation_routes_are_answered_ahead_of_the_router(
    gateway: Gateway, facility: tuple[dict[str, Any], str]
) -> None:
    auth = {"Authorization": f"Bearer {facility[1]}"}
    client = gateway.http
    metrics = gateway.services.metrics
    answer = await client.post("/v1/tools/get-in-house-guests", json={}, headers=auth)
    no_key = await client.post("/v1/tools/get-in-house-guests", json={})
    control = await client.post("/v1/tools/get-in-house-guests?x=%01", json={}, headers=auth)
    bad_json = await client.post("/v1/tools/get-in-house-guests", content=b"{", headers=auth)
    unknown = await client.post("/v1/tools/no-such-tool", json={}, headers=auth)
    wrong_method = await client.get("/v1/tools/get-in-house-guests", headers=auth)
    token = await client.post("/v1/operations/auth/get-token", json={}, headers=auth)
    assert answer.status_code == 200 and answer.headers["x-request-id"]
    assert answer.headers["content-type"] == "application/json"
    assert_error(no_key, 401, "missing_gateway_key")
    assert_error(control, 422, "invalid_characters")
    assert bad_json.status_code == 422 and bad_json.headers["x-request-id"]
    assert unknown.status_code == 404  # the fallback route: FastAPI's, as before
    assert unknown.json()["error"]["code"] == "unknown_tool"
    assert wrong_method.status_code == 405
    assert token.status_code == 403
    # Labelled by the declared route, as when FastAPI's router answered.
    route = "/v1/tools/get-in-house-guests"
    assert count(metrics, route, "POST", "2xx") == 1
    assert count(metrics, route, "POST", "4xx") == 3
    assert count(metrics, "/v1/tools/{name}", "POST", "4xx") == 1

    fronted = http.front_routes(gateway.app.router.dependencies)
    assert "/v1/tools/get-in-house-guests" in fronted
    assert "/v1/operations/reservations/save" in fronted
    assert "/v1/tools/{name}" not in fronted  # the fallback stays FastAPI's
    assert "/v1/operations/auth/get-token" not in fronted
    # Another app-wide dependency: FastAPI must resolve it, so nothing is answered ahead.
    assert http.front_routes([*gateway.app.router.dependencies, Depends(lambda: None)]) == {}


async def test_every_documented_tool_and_operation_route_is_a_front_route_and_stays_documented(
    gateway: Gateway,
) -> None:
    # The routes answered ahead of the router are exactly the ones /openapi.json documents:
    # the document is still FastAPI's, made from the declared routes (byte-identical to the
    # one before the front routes, compared by hand on the day: bench/README.md).
    document = (await gateway.http.get("/openapi.json")).json()
    documented = {
        path
        for path, operations in document["paths"].items()
        if path.startswith("/v1/") and "post" in operations
    }
    fronted = http.front_routes(gateway.app.router.dependencies)
    assert documented == set(fronted)
    for path, front in fronted.items():
        assert front.path == path
        operation_id = document["paths"][path]["post"]["operationId"]
        assert operation_id.startswith(("tool_", "operation_"))
