"""Redis away, service up (issue 12): a gateway on a Redis of its own that the test stops.

The Redis here is a throwaway ``redis-server`` (no persistence) on a free port, so it
can be stopped, restarted empty and flushed without touching the shared test Redis.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis as sync_redis
from pydantic import SecretStr
from redis.asyncio import Redis
from structlog.testing import capture_logs

from pmsgate.config import Settings
from pmsgate.errors import PmsgateError
from pmsgate.gateway.cache import ReadCache
from pmsgate.gateway.facilities import Limits
from pmsgate.gateway.limiter import FacilityLimiter, OutageBudgetExhausted
from pmsgate.gateway.shared_state import RedisHealth
from pmsgate.gateway.usage import UsageHistory
from pmsgate.jobs.usage import flush_gateway_usage
from pmsgate.storage.db import open_database, session_factory
from pmsgate.storage.gateway_usage import HourCounts, hour_start
from pmsgate.web.users import UserService
from tests.e2e.conftest import add_seeded_facility, gateway_settings, running_gateway
from tests.e2e.processes import free_port

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

LIMITS = Limits(per_minute=10, per_hour=300, per_day=5000)


class ThrowawayRedis:
    """A redis-server process without persistence that a test can stop and start again."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self._process = subprocess.Popen(
            [
                *("redis-server", "--port", str(self.port), "--bind", "127.0.0.1"),
                *("--save", "", "--appendonly", "no"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = sync_redis.Redis(port=self.port, socket_connect_timeout=0.2)
        deadline = time.monotonic() + 10
        try:
            while True:  # a process start, not test logic: wait until it accepts commands
                try:
                    client.ping()
                    return
                except sync_redis.ConnectionError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.02)
        finally:
            client.close()

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=10)
            self._process = None

    def flushall(self) -> None:
        client = sync_redis.Redis(port=self.port)
        try:
            client.flushall()
        finally:
            client.close()


@pytest.fixture
def own_redis() -> Iterator[ThrowawayRedis]:
    server = ThrowawayRedis()
    server.start()
    try:
        yield server
    finally:
        server.stop()


class CuttableProxy:
    """A TCP proxy in front of a Redis: cut it and the Redis is away, its data kept."""

    def __init__(self, target_port: int) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._target = target_port
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()

    async def restore(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def cut(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._open:
            writer.close()
        self._open.clear()
        self._server = None

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection("127.0.0.1", self._target)
        self._open.update((client_w, server_w))

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                sink.close()

        await asyncio.gather(pipe(client_r, server_w), pipe(server_r, client_w))


@pytest.fixture
async def proxy(own_redis) -> AsyncIterator[CuttableProxy]:
    cuttable = CuttableProxy(own_redis.port)
    await cuttable.restore()
    yield cuttable
    if cuttable._server is not None:
        await cuttable.cut()


def events(logs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry["event"] == name]


async def test_a_redis_outage_answers_what_it_safely_can_and_recovers_without_restart(
    database_url, own_redis, kross_http, kross_store, clock
):
    settings = gateway_settings(
        database_url, own_redis.url, limiter_outage_share=0.2, redis_retry_interval_s=2.0
    )
    async with running_gateway(settings, kross_http, clock) as gateway:
        record, key = await add_seeded_facility(gateway.services, kross_store)
        hotel_id = record["hotel_id"]
        await gateway.services.facilities.set_limits(hotel_id, LIMITS)
        apartment = record["apartments"][0]["id_room_type"]

        async def uncached_read(day: int):
            # Beyond the cached availability window: each range is its own upstream read.
            arrival = clock.now().date() + dt.timedelta(days=120 + day)
            return await gateway.tool(
                "check-availability",
                key,
                apartment_id=apartment,
                arrival=arrival.isoformat(),
                departure=(arrival + dt.timedelta(days=2)).isoformat(),
            )

        warm = await gateway.tool("get-incomplete-portals", key)
        assert warm.status_code == 200, warm.text
        before_outage = kross_store.stats.requests_by_hotel[hotel_id]
        clock.advance(61)  # the warm-up's permits leave the minute window

        with capture_logs() as logs:
            own_redis.stop()
            answers = []
            cached = await gateway.tool("get-incomplete-portals", key)
            answers.append(cached)
            write = await gateway.http.post(
                "/v1/operations/reservations/add-payment",
                json={"id_reservation": 1, "amount": 50, "currency": "EUR", "method": "card"},
                headers={"Authorization": f"Bearer {key}", "Idempotency-Key": "pay-outage"},
            )
            answers.append(write)
            reads = [await uncached_read(day) for day in range(6)]
            answers += reads
            ready = await gateway.http.get("/readyz")
            answers.append(ready)
            during_outage = kross_store.stats.requests_by_hotel[hotel_id] - before_outage
            remaining_in_outage = await gateway.services.limiter.remaining(hotel_id, LIMITS)

            own_redis.start()  # back, and empty: no persistence
            clock.advance(2.0)  # the retry interval: the next call tries Redis again
            after = await uncached_read(100)
            answers.append(after)
            ready_again = await gateway.http.get("/readyz")

        # A cached read answers from the process's own copy.
        assert cached.status_code == 200, cached.text
        assert cached.json()["data"] == warm.json()["data"]
        # A write is never sent without the shared state.
        assert write.status_code == 503, write.text
        assert write.json()["error"]["code"] == "shared_state_unavailable"
        assert "Redis" in write.json()["error"]["message"]
        assert int(write.headers["Retry-After"]) >= 1
        assert kross_store.stats.requests_by_operation["reservations/add-payment"] == 0
        # Uncached reads: within the outage budget (10 x 0.2 = 2 a minute) they go upstream,
        # beyond it they get 503 with Retry-After.
        assert during_outage == 2
        assert [r.status_code for r in reads].count(200) == during_outage
        refused = [r for r in reads if r.status_code != 200]
        assert len(refused) == 6 - during_outage
        for answer in refused:
            assert answer.status_code == 503, answer.text
            assert answer.json()["error"]["code"] == "shared_state_unavailable"
            assert int(answer.headers["Retry-After"]) >= 1
        assert remaining_in_outage["minute"] == 0
        # /readyz: still ready (a failed probe would pull every replica at once), degraded,
        # naming Redis.
        assert ready.status_code == 200
        assert ready.json()["status"] == "degraded"
        assert ready.json()["checks"] == {"database": "ok", "vault": "ok", "redis": "unavailable"}
        # Recovered without a restart.
        assert after.status_code == 200, after.text
        assert ready_again.status_code == 200
        assert ready_again.json()["status"] == "ready"
        assert ready_again.json()["checks"] == {"database": "ok", "vault": "ok", "redis": "ok"}
        assert all(answer.status_code != 500 for answer in answers)
        # One line per change of state, not one per call; no traceback, no URL.
        assert len(events(logs, "redis_unavailable")) == 1
        assert len(events(logs, "redis_recovered")) == 1
        assert events(logs, "redis_unavailable")[0]["error_type"] == "ConnectionError"
        assert not events(logs, "unexpected_error")
        assert str(own_redis.port) not in repr(logs)
        # The outage's permits count in the shared window once Redis is back (it came back
        # empty): the outage's two and the read after it.
        remaining = await gateway.services.limiter.remaining(hotel_id, LIMITS)
        assert remaining["minute"] == LIMITS.per_minute - (during_outage + 1)


async def test_hour_and_day_windows_are_rebuilt_after_redis_loses_them(
    database_url, own_redis, kross_http, kross_store, clock
):
    settings = gateway_settings(database_url, own_redis.url)
    clock.advance(17 * 60)  # 09:17, inside an hour
    async with running_gateway(settings, kross_http, clock) as gateway:
        record, key = await add_seeded_facility(gateway.services, kross_store)
        hotel_id = record["hotel_id"]
        await gateway.services.facilities.set_limits(hotel_id, LIMITS)
        apartment = record["apartments"][0]["id_room_type"]
        now = clock.now()
        # What the database knows: 40 requests in the previous hour, 3 in this one, and 1000
        # two days ago (outside the day window).
        await UsageHistory(session_factory(gateway.services.engine)).add(
            {
                (hotel_id, hour_start(now - dt.timedelta(hours=1))): HourCounts(0, 40),
                (hotel_id, hour_start(now)): HourCounts(0, 3),
                (hotel_id, hour_start(now - dt.timedelta(hours=50))): HourCounts(0, 1000),
            }
        )

        async def uncached_read(day: int):
            arrival = clock.now().date() + dt.timedelta(days=120 + day)
            return await gateway.tool(
                "check-availability",
                key,
                apartment_id=apartment,
                arrival=arrival.isoformat(),
                departure=(arrival + dt.timedelta(days=2)).isoformat(),
            )

        first = await uncached_read(0)
        assert first.status_code == 200, first.text

        own_redis.flushall()  # what a restart without persistence leaves
        assert await gateway.services.limiter.remaining(hotel_id, LIMITS) == {
            "minute": 10,
            "hour": 300,
            "day": 5000,
        }
        with capture_logs() as logs:
            second = await uncached_read(1)
        assert second.status_code == 200, second.text
        assert len(events(logs, "limiter_window_rebuilt")) == 1
        sent = kross_store.stats.requests_by_hotel[hotel_id]  # all in the last minute

        remaining = await gateway.services.limiter.remaining(hotel_id, LIMITS)
        # Rebuilt: the database's 43 requests of the last day (this hour's stamped now, so
        # they count in the minute window too; the previous hour's at its end, 09:00),
        # this process's own permits of the minute before, and the new read.
        assert remaining == {
            "minute": 10 - 3 - sent,
            "hour": 300 - 43 - sent,
            "day": 5000 - 43 - sent,
        }
        # An hour after 09:00, the previous hour's 40 have left the hour window.
        clock.advance(45 * 60)
        remaining = await gateway.services.limiter.remaining(hotel_id, LIMITS)
        assert remaining["hour"] == 300 - 3 - sent


async def test_usage_counts_survive_a_killed_replica_through_redis(
    database_url, redis_url, redis_namespace, kross_http, kross_store, clock
):
    settings = gateway_settings(database_url, redis_url, redis_namespace=redis_namespace)
    async with running_gateway(settings, kross_http, clock) as doomed:
        record, key = await add_seeded_facility(doomed.services, kross_store)
        answer = await doomed.tool("get-incomplete-portals", key)
        assert answer.status_code == 200, answer.text
        await doomed.services.usage.settle()  # the end of the tick: written to Redis
        # Killed now: whatever the process still held in memory is gone, never flushed.
        doomed.services.usage.drain()
    async with running_gateway(settings, kross_http, clock) as survivor:
        await flush_gateway_usage(survivor.services)
        hours = UsageHistory(session_factory(survivor.services.engine))
        total = await hours.total(record["hotel_id"])
    assert total.tool_calls == 1
    assert total.upstream_calls == kross_store.stats.requests_by_hotel[record["hotel_id"]] >= 2


async def test_without_redis_a_new_token_is_refused_rather_than_fetched_uncoordinated(
    database_url, own_redis, kross_http, kross_store, clock
):
    settings = gateway_settings(database_url, own_redis.url)
    async with running_gateway(settings, kross_http, clock) as gateway:
        record, key = await add_seeded_facility(gateway.services, kross_store)
        own_redis.stop()
        answer = await gateway.tool("get-incomplete-portals", key)
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["code"] == "shared_state_unavailable"
    assert int(answer.headers["Retry-After"]) >= 1
    # No token was requested: two replicas doing so at once would open two sessions.
    assert kross_store.stats.tokens_issued[record["hotel_id"]] == 0


async def test_without_redis_console_sign_in_fails_closed(database_url, own_redis, clock):
    settings = Settings(database_url=database_url, redis_url=own_redis.url)
    async with open_database(database_url) as engine:
        client = Redis.from_url(own_redis.url, socket_connect_timeout=1, socket_timeout=1)
        try:
            users = UserService(
                session_factory(engine), clock=clock, settings=settings, redis=client
            )
            await users.add("ops@example.com", SecretStr("a long enough password"), role="admin")
            own_redis.stop()
            with pytest.raises(PmsgateError) as refused:
                await users.sign_in(
                    "ops@example.com", SecretStr("a long enough password"), client="192.0.2.1"
                )
        finally:
            await client.aclose()
    # Failed attempts of other replicas cannot be counted: no sign-in, and no 500.
    assert refused.value.code == "shared_state_unavailable"
    assert refused.value.status == 503


async def test_invalidations_made_while_redis_is_away_reach_it_when_it_is_back(
    own_redis, proxy, clock
):
    health = RedisHealth(clock, retry_interval_s=2.0)
    cut_off = ReadCache(
        clock=clock, redis_url=proxy.url, namespace="t", health=health, redis_timeout_s=0.5
    )
    other = ReadCache(clock=clock, redis_url=own_redis.url, namespace="t")
    try:
        await cut_off.get("h1:x", max_age_s=60, fetch=lambda: _value("before"))
        await proxy.cut()
        # Away: the process's own copy answers, then the invalidation drops it at once.
        held = await cut_off.get("h1:x", max_age_s=60, fetch=lambda: _value("unused"))
        assert (held.value, held.source) == ("before", "cache")
        await cut_off.invalidate("h1")
        again = await cut_off.get("h1:x", max_age_s=60, fetch=lambda: _value("during"))
        assert (again.value, again.source) == ("during", "upstream")
        assert not health.available
        # Another replica still sees the old entry: Redis never heard of the invalidation.
        assert (await other.peek("h1:x")).value == "before"  # type: ignore[union-attr]

        await proxy.restore()
        clock.advance(2.0)
        await cut_off.peek("h1:y")  # any use of the store after the outage applies it
        assert health.available
        assert await other.peek("h1:x") is None
    finally:
        await cut_off.close()
        await other.close()


async def _value(value: str) -> str:
    return value


async def test_permits_of_an_outage_count_in_the_window_that_survived_it(own_redis, proxy, clock):
    limits = LIMITS
    direct = Redis.from_url(own_redis.url)
    through = Redis.from_url(proxy.url, socket_connect_timeout=0.5, socket_timeout=0.5)
    health = RedisHealth(clock, retry_interval_s=2.0)
    cut_off = FacilityLimiter(clock=clock, redis=through, health=health, outage_share=0.3)
    other = FacilityLimiter(clock=clock, redis=direct)
    try:
        await other.acquire("h1", limits)
        clock.advance(61)  # out of the minute window (still in the hour)
        await proxy.cut()
        for _ in range(3):  # 10 x 0.3
            await cut_off.acquire("h1", limits)
        with pytest.raises(OutageBudgetExhausted) as refused:
            await cut_off.acquire("h1", limits)
        assert refused.value.status == 503
        assert refused.value.code == "shared_state_unavailable"
        # A share that leaves a window under one call admits nothing in the outage.
        with pytest.raises(OutageBudgetExhausted) as tiny:
            await cut_off.acquire("h2", Limits(per_minute=3, per_hour=300, per_day=5000))
        assert tiny.value.window == "minute"
        # Writes never use the outage budget.
        with pytest.raises(PmsgateError) as write:
            await cut_off.acquire("h1", limits, shared_only=True)
        assert write.value.code == "shared_state_unavailable"
        # The other replica, still on Redis, does not see them yet.
        assert (await other.remaining("h1", limits))["minute"] == 10

        await proxy.restore()
        clock.advance(2.0)
        await cut_off.acquire("h1", limits)
        assert await other.remaining("h1", limits) == {"minute": 6, "hour": 295, "day": 4995}
    finally:
        await direct.aclose()
        await through.aclose()


async def test_usage_counted_while_redis_is_away_is_flushed_from_memory_and_none_is_lost(
    database_url, proxy, kross_http, kross_store, clock
):
    settings = gateway_settings(database_url, proxy.url, redis_timeout_s=0.5)
    async with running_gateway(settings, kross_http, clock) as gateway:
        record, key = await add_seeded_facility(gateway.services, kross_store)
        hours = UsageHistory(session_factory(gateway.services.engine))
        warm = await gateway.tool("get-incomplete-portals", key)
        assert warm.status_code == 200, warm.text
        await gateway.services.usage.settle()
        assert gateway.services.usage.pending() == {}  # in Redis, not in memory

        await proxy.cut()
        cached = await gateway.tool("get-incomplete-portals", key)
        assert cached.status_code == 200, cached.text
        await gateway.services.usage.settle()
        # Redis away: the count stays in memory, and the flush writes it to the database;
        # the counts Redis holds wait there.
        assert gateway.services.usage.pending() != {}
        await flush_gateway_usage(gateway.services)
        assert (await hours.total(record["hotel_id"])).tool_calls == 1

        await proxy.restore()
        clock.advance(2.0)
        await flush_gateway_usage(gateway.services)
        total = await hours.total(record["hotel_id"])
    assert total.tool_calls == 2
    assert total.upstream_calls == kross_store.stats.requests_by_hotel[record["hotel_id"]]
