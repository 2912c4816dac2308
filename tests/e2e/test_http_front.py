"""The one HTTP layer of ``create_app`` (pmsgate.gateway.http_front) does what the five
middlewares it replaced did: latency by route template and status class, the request id in
the answer and in the logs, the body limit, the last-resort error guard, a trace's span.

And the documented tool and operation routes are answered without FastAPI's dependency
resolution (pmsgate.gateway.http.DirectRoute), their checks and schema unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import structlog
from fastapi import FastAPI, Request
from structlog.testing import capture_logs

from pmsgate.errors import PmsgateError, install_error_handlers
from pmsgate.gateway import http
from pmsgate.gateway.http_front import HttpFrontMiddleware
from pmsgate.gateway.metrics import GatewayMetrics
from pmsgate.request_context import current_client_address, current_request_id
from tests.e2e.conftest import Gateway

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

    app.add_middleware(
        HttpFrontMiddleware,
        metrics=lambda: metrics,
        tracing=lambda: None,
        max_body_bytes=1000,
        max_upload_body_bytes=1000,
    )
    return app


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
    assert crashed.status_code == 500
    assert crashed.json()["error"]["code"] == "internal_error"
    assert crashed.headers["x-request-id"]
    assert [(e["event"], e["error_type"]) for e in crash_logs] == [
        ("unexpected_error", "RuntimeError")
    ]
    assert "secret" not in str(crash_logs)
    # The body limit: declared or counted, one 413 with the error body and the id.
    for answer in (declared, counted):
        assert answer.status_code == 413
        assert answer.json()["error"]["code"] == "payload_too_large"
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


async def test_the_documented_tool_and_operation_routes_skip_dependency_resolution(
    gateway: Gateway, facility: tuple[dict[str, Any], str]
) -> None:
    auth = {"Authorization": f"Bearer {facility[1]}"}
    client = gateway.http
    answer = await client.post("/v1/tools/get-in-house-guests", json={}, headers=auth)
    no_key = await client.post("/v1/tools/get-in-house-guests", json={})
    control = await client.post("/v1/tools/get-in-house-guests?x=%01", json={}, headers=auth)
    assert answer.status_code == 200
    assert no_key.status_code == 401
    assert no_key.json()["error"]["code"] == "missing_gateway_key"
    assert control.status_code == 422
    assert control.json()["error"]["code"] == "invalid_characters"
    assert "/v1/tools/get-in-house-guests" in http.direct_paths
    assert "/v1/operations/reservations/save" in http.direct_paths
    assert "/v1/tools/{name}" not in http.direct_paths  # the fallback stays FastAPI's
