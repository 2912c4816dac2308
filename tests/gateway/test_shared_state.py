"""RedisHealth: one log line per change of state, one probe per interval while down."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis
from structlog.testing import capture_logs

from pmsgate.clock import ManualClock
from pmsgate.gateway.metrics import GatewayMetrics
from pmsgate.gateway.shared_state import RedisHealth, SharedStateUnavailable
from tests.e2e.processes import free_port

pytestmark = pytest.mark.anyio


async def test_an_outage_is_logged_once_and_redis_is_tried_once_per_interval(
    clock: ManualClock,
) -> None:
    metrics = GatewayMetrics()
    health = RedisHealth(clock, retry_interval_s=2.0, gauge=metrics.redis_up)
    nobody = Redis(port=free_port(), socket_connect_timeout=0.5)  # nothing listens there
    tried = 0

    async def ping() -> None:
        nonlocal tried
        tried += 1
        await nobody.ping()

    try:
        with capture_logs() as logs:
            for _ in range(50):
                with pytest.raises(SharedStateUnavailable) as refused, health.use("do it"):
                    await ping()
            clock.advance(2.0)
            with pytest.raises(SharedStateUnavailable), health.use("do it"):
                await ping()
            assert metrics.registry.get_sample_value("pmsgate_redis_up") == 0
            clock.advance(2.0)
            with health.use("do it"):
                pass  # Redis answered this time
    finally:
        await nobody.aclose()

    # The first call found Redis away; the next 49 did not even try; one probe per interval.
    assert tried == 2
    assert refused.value.status == 503
    assert refused.value.headers["Retry-After"] == "2"
    assert [entry["event"] for entry in logs] == ["redis_unavailable", "redis_recovered"]
    assert logs[0]["error_type"] == "ConnectionError"
    assert logs[1]["down_for_s"] == 4.0
    assert health.available
    assert metrics.registry.get_sample_value("pmsgate_redis_up") == 1


async def test_who_registered_is_called_once_when_redis_answers_again(clock: ManualClock) -> None:
    health = RedisHealth(clock, retry_interval_s=2.0)
    recovered: list[bool] = []
    health.on_recovery(lambda: recovered.append(health.available))
    with health.use("do it"):
        pass  # up all along: nothing to recover from
    health.failed(ConnectionError("gone"))
    clock.advance(2.0)
    with health.use("do it"):
        pass
    with health.use("do it"):
        pass
    assert recovered == [True]
