"""The signals of docs/operations.md, "What to watch": HTTP latency by route template, the
facility gauges from a snapshot refreshed at most every 60 s, scraped from a real gateway.

The one HTTP layer (pmsgate.gateway.http_front) is timed with an injected timer and the
snapshot's age with the ManualClock: nothing waits.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from pmsgate.clock import ManualClock
from pmsgate.errors import PmsgateError, install_error_handlers
from pmsgate.gateway.http_front import HttpFrontMiddleware
from pmsgate.gateway.metrics import FacilityState, GatewayMetrics, status_class
from tests.e2e.conftest import Gateway, add_seeded_facility
from tests.support.metrics import scrape

pytestmark = pytest.mark.anyio

DURATION = "pmsgate_http_request_duration_seconds"


class StepTimer:
    """A timer that advances ``step`` seconds each time it is read."""

    def __init__(self, step: float) -> None:
        self.step = step
        self.now = 0.0

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def small_app(metrics: GatewayMetrics, timer: StepTimer) -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/items/{item_id}")
    async def item(item_id: int) -> dict[str, int]:
        return {"id": item_id}

    @app.post("/refused")
    async def refused() -> None:
        raise PmsgateError("No budget.", code="upstream_budget_exhausted", status=429)

    @app.get("/crash")
    async def crash() -> None:
        raise RuntimeError("boom")

    app.add_middleware(
        HttpFrontMiddleware, metrics=lambda: metrics, tracing=lambda: None, timer=timer
    )
    return app


def sample(metrics: GatewayMetrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


async def test_requests_are_timed_by_route_template_method_and_status_class() -> None:
    metrics = GatewayMetrics()
    app = small_app(metrics, StepTimer(0.02))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        for item_id in range(5):
            assert (await client.get(f"/items/{item_id}")).status_code == 200
        assert (await client.get("/items/not-a-number")).status_code == 422
        assert (await client.post("/refused")).status_code == 429
        assert (await client.get("/crash")).status_code == 500
        for path in ("/nothing", "/admin/../etc", "/random/123"):
            assert (await client.get(path)).status_code == 404
        assert (await client.request("BREW", "/items/1")).status_code == 405

    count = DURATION + "_count"
    # Five paths, one series: the template, never the raw path.
    assert sample(metrics, count, route="/items/{item_id}", method="GET", status="2xx") == 5
    assert sample(metrics, count, route="/items/{item_id}", method="GET", status="4xx") == 1
    assert sample(metrics, count, route="/refused", method="POST", status="429") == 1
    assert sample(metrics, count, route="/crash", method="GET", status="5xx") == 1
    assert sample(metrics, count, route="unmatched", method="GET", status="4xx") == 3
    assert sample(metrics, count, route="/items/{item_id}", method="OTHER", status="4xx") == 1
    # Each request read the timer twice, 20 ms apart.
    total = sample(metrics, DURATION + "_sum", route="/items/{item_id}", method="GET", status="2xx")
    assert total == pytest.approx(5 * 0.02)
    assert (
        sample(
            metrics, DURATION + "_bucket", route="/crash", method="GET", status="5xx", le="0.025"
        )
        == 1
    )
    routes = {
        s.labels["route"]
        for family in metrics.registry.collect()
        if family.name == DURATION
        for s in family.samples
    }
    assert routes == {"/items/{item_id}", "/refused", "/crash", "unmatched"}


async def test_without_metrics_yet_requests_pass_untimed() -> None:
    app = FastAPI()

    @app.get("/ok")
    async def ok() -> dict[str, bool]:
        return {"ok": True}

    app.add_middleware(HttpFrontMiddleware, metrics=lambda: None, tracing=lambda: None)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        assert (await client.get("/ok")).json() == {"ok": True}


def test_status_classes() -> None:
    assert [status_class(s) for s in (101, 200, 204, 301, 404, 429, 499, 503)] == [
        "1xx", "2xx", "2xx", "3xx", "4xx", "429", "4xx", "5xx",
    ]  # fmt: skip


class Loads:
    """A snapshot loader answering ``states`` (or raising), counting its calls."""

    def __init__(self, states: Iterable[FacilityState]) -> None:
        self.states = list(states)
        self.calls = 0
        self.fail = False

    async def __call__(self) -> list[FacilityState]:
        self.calls += 1
        if self.fail:
            raise ConnectionError("database unreachable")
        return self.states


async def test_the_facility_snapshot_is_refreshed_at_most_every_max_age(clock: ManualClock) -> None:
    metrics = GatewayMetrics(snapshot_max_age_s=60)
    snapshot = metrics.facilities
    load = Loads([FacilityState("H1", "connected", {"day": 10}, {"day": 50})])
    assert sample(metrics, "pmsgate_facility_snapshot_timestamp_seconds") == 0
    assert await snapshot.refresh(clock.now(), load)
    for _ in range(5):  # scrapes within the minute read what is held
        clock.advance(10)
        assert not await snapshot.refresh(clock.now(), load)
    assert load.calls == 1
    load.states = [
        FacilityState("H1", "error", {"day": 0}, {"day": 50}),
        FacilityState("H2", "unverified"),
    ]
    clock.advance(10)  # 60 s after the first
    assert await snapshot.refresh(clock.now(), load)
    assert load.calls == 2
    assert sample(metrics, "pmsgate_facility_status", status="error") == 1
    assert sample(metrics, "pmsgate_facility_status", status="unverified") == 1
    assert sample(metrics, "pmsgate_facility_status", status="connected") == 0
    assert sample(metrics, "pmsgate_facility_error", hotel_id="H1") == 1
    assert metrics.registry.get_sample_value("pmsgate_facility_error", {"hotel_id": "H2"}) is None
    assert sample(metrics, "pmsgate_budget_remaining", hotel_id="H1", window="day") == 0
    assert sample(metrics, "pmsgate_budget_limit", hotel_id="H1", window="day") == 50
    taken = clock.now().timestamp()
    assert sample(metrics, "pmsgate_facility_snapshot_timestamp_seconds") == taken

    # A refresh that fails keeps the previous snapshot (its timestamp shows its age).
    load.fail = True
    clock.advance(120)
    assert not await snapshot.refresh(clock.now(), load)
    assert sample(metrics, "pmsgate_facility_error", hotel_id="H1") == 1
    assert sample(metrics, "pmsgate_facility_snapshot_timestamp_seconds") == taken
    load.fail = False
    assert await snapshot.refresh(clock.now(), load)  # and the next scrape tries again


# --- scraped from a real gateway ---


def value(samples: dict[Any, float], name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


async def test_a_gateway_exports_latency_by_route_and_facility_gauges_from_its_snapshot(
    gateway: Gateway, kross_store: Any, clock: ManualClock
) -> None:
    record, key = await add_seeded_facility(gateway.services, kross_store)
    hotel_id = record["hotel_id"]
    for _ in range(3):
        assert (await gateway.tool("get-in-house-guests", key)).status_code == 200
    assert (await gateway.http.get(f"/no/such/{hotel_id}")).status_code == 404

    first = await scrape(gateway.app)
    count = DURATION + "_count"
    tool_route = "/v1/tools/get-in-house-guests"
    assert value(first, count, route=tool_route, method="POST", status="2xx") == 3
    assert value(first, count, route="unmatched", method="GET", status="4xx") == 1
    assert not any(hotel_id in dict(labels).get("route", "") for _, labels in first)
    assert value(first, "pmsgate_facility_status", status="connected") == 1
    assert value(first, "pmsgate_facility_status", status="error") == 0
    day = value(first, "pmsgate_budget_remaining", hotel_id=hotel_id, window="day")
    assert day is not None and day < 5000
    assert value(first, "pmsgate_budget_limit", hotel_id=hotel_id, window="day") == 5000

    # The integration breaks: within the snapshot's minute the scrape still reads what it
    # holds (no query), after it the broken facility is named.
    await gateway.services.facilities.mark_error(hotel_id, "credentials refused")
    clock.advance(30)
    held = await scrape(gateway.app)
    assert value(held, "pmsgate_facility_status", status="error") == 0
    assert value(held, "pmsgate_facility_snapshot_timestamp_seconds") == value(
        first, "pmsgate_facility_snapshot_timestamp_seconds"
    )
    clock.advance(30)
    fresh = await scrape(gateway.app)
    assert value(fresh, "pmsgate_facility_status", status="error") == 1
    assert value(fresh, "pmsgate_facility_status", status="connected") == 0
    assert value(fresh, "pmsgate_facility_error", hotel_id=hotel_id) == 1
    assert value(fresh, "pmsgate_facility_snapshot_timestamp_seconds") == clock.now().timestamp()
    # The scrapes themselves are requests too.
    assert value(fresh, count, route="/metrics", method="GET", status="2xx") == 2
