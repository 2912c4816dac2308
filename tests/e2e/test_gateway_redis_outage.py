"""Redis away, service up (issue 12): a gateway on a Redis of its own that the test stops.

The Redis here is a throwaway ``redis-server`` (no persistence) on a free port, so it
can be stopped, restarted empty and flushed without touching the shared test Redis.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import gc
import signal
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
from pmsgate.gateway.limiter import BudgetExhausted, FacilityLimiter, OutageBudgetExhausted
from pmsgate.gateway.shared_state import RedisHealth
from pmsgate.gateway.usage import UsageHistory
from pmsgate.jobs.usage import flush_gateway_usage
from pmsgate.ratelimit import ClockTime
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

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): connections open, no answers, data kept."""
        assert self._process is not None
        self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self._process is not None:
            self._process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self._process is not None:
            self._process.send_signal(signal.SIGCONT)  # a paused server would not end
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
            return await gateway.availability(key, arrival, apartment_id=apartment)

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
            # For a minute after the outage the replica stays within its outage share (the
            # other replicas' outage permits may not be in Redis yet): used up here.
            fenced = await uncached_read(99)
            answers.append(fenced)
            clock.advance(61)
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
        assert fenced.status_code == 429, fenced.text
        assert fenced.json()["error"]["code"] == "upstream_budget_exhausted"
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
        # empty): the outage's two and the read after it, in the hour.
        remaining = await gateway.services.limiter.remaining(hotel_id, LIMITS)
        assert remaining["minute"] == LIMITS.per_minute - 1
        assert remaining["hour"] == LIMITS.per_hour - (during_outage + 1)


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
            return await gateway.availability(key, arrival, apartment_id=apartment)

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


async def take_n(limiter: FacilityLimiter, key: str, limits: Limits, n: int) -> None:
    for _ in range(n):
        await limiter.acquire(key, limits)


async def test_permits_of_an_outage_count_in_the_window_that_survived_it(own_redis, proxy, clock):
    limits = LIMITS
    direct = Redis.from_url(own_redis.url)
    through = Redis.from_url(proxy.url, socket_connect_timeout=0.5, socket_timeout=0.5)
    health = RedisHealth(clock, retry_interval_s=2.0)
    shared = ClockTime(clock)
    cut_off = FacilityLimiter(
        clock=clock, redis=through, health=health, outage_share=0.3, reference=shared
    )
    other = FacilityLimiter(clock=clock, redis=direct, reference=shared)
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
        # Write back first: the outage's permits are in Redis before anything new is decided.
        assert await cut_off.remaining("h1", limits) == {"minute": 7, "hour": 296, "day": 4996}
        assert await other.remaining("h1", limits) == {"minute": 7, "hour": 296, "day": 4996}
        # For a minute after the outage, each replica stays within its outage share (3 of
        # 10), whatever the shared window shows: the other replicas' outage permits may not
        # be in Redis yet.
        with pytest.raises(BudgetExhausted) as fenced:
            await cut_off.acquire("h1", limits)
        assert fenced.value.code == "upstream_budget_exhausted"
        # One that never saw the outage learns of the fence from Redis: its share (0.2) of
        # the 7 it saw left.
        await take_n(other, "h1", limits, 1)
        with pytest.raises(BudgetExhausted):
            await other.acquire("h1", limits)
        clock.advance(61)  # the fence is down: the shared window alone decides again
        await cut_off.acquire("h1", limits)
        assert await other.remaining("h1", limits) == {"minute": 9, "hour": 294, "day": 4994}
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


async def test_a_refill_lock_left_behind_by_an_outage_leaves_no_unretrieved_task(
    own_redis, proxy, clock
):
    """Issue 25: Redis lost in the middle of a refill skipped the lock's release.

    cashews' ``lock()`` is an async generator: a release never run left it suspended, and
    when the garbage collector finalised it, its ``finally`` tried Redis in a task nobody
    awaited ("Task exception was never retrieved … CacheBackendInteractionError").
    """
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: reported.append(context))
    health = RedisHealth(clock, retry_interval_s=2.0)
    cache = ReadCache(
        clock=clock, redis_url=proxy.url, namespace="t", health=health, redis_timeout_s=0.5
    )

    async def fetch_while_redis_goes() -> str:
        await proxy.cut()
        return "fetched"

    try:
        answer = await cache.get("h1:x", max_age_s=60, fetch=fetch_while_redis_goes)
        assert answer.value == "fetched"
        assert not health.available
        gc.collect()
        for _ in range(5):  # let the loop run whatever the collector scheduled
            await asyncio.sleep(0)
        # The lock is still in Redis (its release could not reach it): it expires on its own.
        direct = Redis.from_url(own_redis.url)
        assert await direct.pttl("t:cache-lock:h1:x") > 0
        await direct.aclose()
    finally:
        loop.set_exception_handler(previous)
        await cache.close()
    assert reported == []


@pytest.mark.postgres
async def test_two_replicas_under_load_through_a_killed_and_a_paused_redis_get_no_upstream_429(
    postgres_url, own_redis, kross_http, kross_store, clock
):
    """Issue 25, "Done when": two replicas on PostgreSQL + Redis, one with its clock 2 s off,
    under load; the minute full when Redis is killed (40 s, back empty) and later paused
    (SIGSTOP, 40 s, back with its data), each mid-minute. Not one request reaches the booking
    system beyond its limit, no answer is a 500, and no task is left with an exception nobody
    retrieved (the cache's refill lock)."""
    from tests.e2e.test_gateway_replicas import fresh_schema
    from tests.support.clocks import SkewedClock

    await fresh_schema(postgres_url)
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: reported.append(context))
    settings = gateway_settings(
        postgres_url, own_redis.url, redis_timeout_s=0.2, redis_retry_interval_s=2.0
    )
    statuses: list[int] = []
    timeline: list[int] = []
    day = 0
    try:
        async with (
            running_gateway(
                settings, kross_http, SkewedClock(clock, 2.0), shared_clock=clock
            ) as first,  # type: ignore[arg-type]
            running_gateway(settings, kross_http, clock) as second,
        ):
            replicas = (first, second)
            record, key = await add_seeded_facility(first.services, kross_store)
            hotel_id = record["hotel_id"]
            await first.services.facilities.set_limits(hotel_id, LIMITS)
            apartment = record["apartments"][0]["id_room_type"]

            async def load(seconds: int, per_second: int = 4) -> None:
                """``per_second`` uncached reads a second, alternating replicas."""
                nonlocal day
                for _ in range(seconds):
                    for index in range(per_second):
                        day += 1
                        arrival = clock.now().date() + dt.timedelta(days=120 + day % 600)
                        answer = await replicas[index % 2].tool(
                            "check-availability",
                            key,
                            apartment_id=apartment,
                            arrival=arrival.isoformat(),
                            departure=(arrival + dt.timedelta(days=2)).isoformat(),
                        )
                        statuses.append(answer.status_code)
                        if answer.status_code in (429, 503):
                            assert answer.json()["error"]["code"] in (
                                "upstream_budget_exhausted",
                                "shared_state_unavailable",
                            )
                            assert int(answer.headers["Retry-After"]) >= 1
                    clock.advance(1)
                    timeline.append(kross_store.stats.requests_by_hotel[hotel_id])

            with capture_logs() as logs:
                await load(30)  # the minute fills at once, both replicas see it full
                assert kross_store.stats.requests_by_hotel[hotel_id] >= 10
                own_redis.stop()  # killed mid-minute, the window full
                await load(40)
                own_redis.start()  # back, empty (no persistence)
                # A minute on the outage share (the recovery fence), then the shared window
                # alone: it fills again.
                await load(80)
                own_redis.pause()  # frozen mid-minute, the window full again
                await load(40)
                own_redis.resume()
                await load(70)
            sent = kross_store.stats.requests_by_hotel[hotel_id]
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(previous)

    assert kross_store.stats.rate_limited.total() == 0
    assert 500 not in statuses
    assert set(statuses) <= {200, 429, 503}
    assert not events(logs, "unexpected_error")
    assert reported == []
    # The budget was used, not only refused: each outage and the minute after it on the
    # outage share (2 of 10 a minute per replica), the shared window whole in between.
    assert sent >= 30
    assert timeline[-1] == sent


async def test_the_outage_budget_counts_the_window_as_last_seen_with_every_replicas_permits(
    own_redis, proxy, clock
):
    """Issue 25: seeded with its own permits only, a replica that took 1 of a full window
    granted its share again when Redis went (upstream 429s at the start of the outage)."""
    shared = ClockTime(clock)
    through = [
        Redis.from_url(proxy.url, socket_connect_timeout=0.5, socket_timeout=0.5) for _ in range(2)
    ]
    busy, quiet = (
        FacilityLimiter(
            clock=clock,
            redis=client,
            health=RedisHealth(clock, retry_interval_s=2.0),
            outage_share=0.5,
            reference=shared,
        )
        for client in through
    )
    try:
        await take_n(busy, "h1", LIMITS, 9)
        clock.advance(10)
        await take_n(quiet, "h1", LIMITS, 1)  # the tenth: its answer shows the window full
        await proxy.cut()
        for replica in (busy, quiet):
            with pytest.raises(OutageBudgetExhausted) as refused:
                await replica.acquire("h1", LIMITS)
            # Nothing until the first replica's nine leave the minute (50.5 s from now).
            assert refused.value.retry_after_s == pytest.approx(50.501)
        clock.advance(50.501)
        # The quiet replica's own permit is still in the minute: half of the 9 left.
        assert await quiet.remaining("h1", LIMITS) == {"minute": 4, "hour": 145, "day": 2495}
        await take_n(quiet, "h1", LIMITS, 4)
        with pytest.raises(OutageBudgetExhausted):
            await quiet.acquire("h1", LIMITS)
        # The busy replica never saw the tenth: half of the 10 its view leaves.
        await take_n(busy, "h1", LIMITS, 5)
        with pytest.raises(OutageBudgetExhausted):
            await busy.acquire("h1", LIMITS)
        # From t = 10 s on: the tenth and 9 outage permits, the limit and not one more.
    finally:
        for client in through:
            await client.aclose()


async def test_a_recovery_noticed_by_any_user_of_redis_writes_the_outage_permits_back(
    own_redis, proxy, clock
):
    """Write back first: not only on the replica's next permit, but as soon as any of its
    users of Redis (a cache read, /readyz) finds Redis back."""
    shared = ClockTime(clock)
    direct = Redis.from_url(own_redis.url)
    through = Redis.from_url(proxy.url, socket_connect_timeout=0.5, socket_timeout=0.5)
    health = RedisHealth(clock, retry_interval_s=2.0)
    cut_off = FacilityLimiter(clock=clock, redis=through, health=health, reference=shared)
    other = FacilityLimiter(clock=clock, redis=direct, reference=shared)
    try:
        await proxy.cut()
        await take_n(cut_off, "h1", LIMITS, 2)
        await proxy.restore()
        clock.advance(2.0)
        assert await health.check(through)  # what /readyz does
        await cut_off.aclose()  # the write-back it started
        assert (await other.remaining("h1", LIMITS))["minute"] == 8
        # ... and the fence stands: the other replica learns of it from its next put.
        await take_n(other, "h1", LIMITS, 1)  # its share (0.2) of the 8 it saw left
        with pytest.raises(BudgetExhausted):
            await other.acquire("h1", LIMITS)
    finally:
        await direct.aclose()
        await through.aclose()
