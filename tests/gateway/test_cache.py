"""The read cache: freshness on the injected clock, coalescing, stale answers, invalidation."""

from __future__ import annotations

import gc
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked

from pmsgate.clock import ManualClock
from pmsgate.gateway.cache import Cached, ReadCache
from pmsgate.gateway.limiter import BudgetExhausted
from pmsgate.integrations.kross.errors import InvalidRequest, UpstreamUnavailable

pytestmark = pytest.mark.anyio

STALE_ON = (UpstreamUnavailable, BudgetExhausted)


class Upstream:
    """Test data: answers with a counter, fails when told, can hold its answer until released."""

    def __init__(self, *, held: bool = False) -> None:
        self.calls = 0
        self.failure: BaseException | None = None
        self.gate: anyio.Event | None = anyio.Event() if held else None

    async def fetch(self) -> dict[str, Any]:
        self.calls += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.failure is not None:
            raise self.failure
        return {"answer": self.calls, "rows": [{"id": 1}]}


async def all_waiting_then_released(
    upstream: Upstream, reads: list[Callable[[], Awaitable[None]]]
) -> None:
    """Start every read, wait until all of them wait, then let the held upstream answer."""
    assert upstream.gate is not None
    async with anyio.create_task_group() as tg:
        for read in reads:
            tg.start_soon(read)
        await wait_all_tasks_blocked()
        upstream.gate.set()


async def fetched_then_aged(cache: ReadCache, clock: ManualClock, seconds: float) -> Upstream:
    """An upstream whose first answer the cache now holds, ``seconds`` old."""
    upstream = Upstream()
    await get(cache, "h1:reservations", upstream)
    clock.advance(seconds)
    return upstream


@pytest.fixture
async def replicas(
    redis_url: str, redis_namespace: str, clock: ManualClock
) -> AsyncIterator[list[ReadCache]]:
    """Two caches on one Redis namespace, as two replicas have them."""
    caches = [
        ReadCache(clock=clock, redis_url=redis_url, namespace=redis_namespace) for _ in range(2)
    ]
    try:
        yield caches
    finally:
        for cache in caches:
            await cache.close()


@pytest.fixture(params=["memory", "redis"])
def cache_url(request: pytest.FixtureRequest) -> str | None:
    """No URL (in memory) or the test Redis."""
    return request.getfixturevalue("redis_url") if request.param == "redis" else None


@pytest.fixture
async def open_cache(
    cache_url: str | None, clock: ManualClock, redis_namespace: str
) -> AsyncIterator[Callable[[], ReadCache]]:
    """Opens caches on one store; with Redis they share the namespace like replicas do."""
    opened: list[ReadCache] = []

    def make() -> ReadCache:
        cache = ReadCache(clock=clock, redis_url=cache_url, namespace=redis_namespace)
        opened.append(cache)
        return cache

    yield make
    for cache in opened:
        await cache.close()


@pytest.fixture
def cache(open_cache: Callable[[], ReadCache]) -> ReadCache:
    return open_cache()


@pytest.fixture
async def memory_cache(clock: ManualClock) -> AsyncIterator[ReadCache]:
    cache = ReadCache(clock=clock)
    yield cache
    await cache.close()


def get(cache: ReadCache, key: str, upstream: Upstream, max_age_s: float = 60) -> Awaitable[Cached]:
    return cache.get(key, max_age_s=max_age_s, fetch=upstream.fetch, stale_on=STALE_ON)


async def test_a_fresh_value_is_served_from_the_cache_with_its_age(
    cache: ReadCache, clock: ManualClock
) -> None:
    upstream = Upstream()
    first = await get(cache, "h1:reservations", upstream)
    assert (first.source, first.stale, first.age_s) == ("upstream", False, 0.0)
    assert first.value == {"answer": 1, "rows": [{"id": 1}]}

    clock.advance(45)
    second = await get(cache, "h1:reservations", upstream)
    assert (second.source, second.stale, second.age_s) == ("cache", False, 45.0)
    assert second.value == first.value
    assert second.fetched_at == first.fetched_at
    assert upstream.calls == 1


async def test_an_expired_value_is_fetched_again(cache: ReadCache, clock: ManualClock) -> None:
    upstream = await fetched_then_aged(cache, clock, 60.5)
    again = await get(cache, "h1:reservations", upstream)
    assert again.source == "upstream"
    assert again.value["answer"] == 2
    assert upstream.calls == 2


async def test_each_caller_applies_its_own_freshness_bound(
    cache: ReadCache, clock: ManualClock
) -> None:
    upstream = await fetched_then_aged(cache, clock, 90)
    assert (await get(cache, "h1:reservations", upstream, max_age_s=300)).source == "cache"
    assert (await get(cache, "h1:reservations", upstream, max_age_s=60)).source == "upstream"
    assert upstream.calls == 2


async def test_concurrent_reads_of_one_key_make_one_fetch(cache: ReadCache) -> None:
    upstream = Upstream(held=True)
    results: list[Cached] = []

    async def read() -> None:
        results.append(await get(cache, "h1:reservations", upstream))

    await all_waiting_then_released(upstream, [read] * 100)

    assert upstream.calls == 1
    assert len(results) == 100
    assert {r.value["answer"] for r in results} == {1}


async def test_a_failed_fetch_fails_once_for_all_concurrent_readers(
    memory_cache: ReadCache,
) -> None:
    # In memory only: with Redis a reader may still be reading the store when the failure
    # lands, and then rightly tries again; the coalescing code is the same for both stores.
    upstream = Upstream(held=True)
    upstream.failure = UpstreamUnavailable("down")
    errors: list[BaseException] = []

    async def read() -> None:
        try:
            await get(memory_cache, "h1:reservations", upstream)
        except UpstreamUnavailable as error:
            errors.append(error)

    await all_waiting_then_released(upstream, [read] * 50)

    assert upstream.calls == 1
    assert len(errors) == 50


async def test_a_cancelled_reader_does_not_cancel_the_fetch_for_the_others(
    cache: ReadCache,
) -> None:
    upstream = Upstream(held=True)
    results: list[Cached] = []
    impatient: list[anyio.CancelScope] = []

    async def impatient_read() -> None:
        with anyio.CancelScope() as scope:
            impatient.append(scope)
            await get(cache, "h1:reservations", upstream)

    async def read() -> None:
        results.append(await get(cache, "h1:reservations", upstream))

    async with anyio.create_task_group() as tg:
        tg.start_soon(impatient_read)
        await wait_all_tasks_blocked()
        tg.start_soon(read)
        await wait_all_tasks_blocked()
        impatient[0].cancel()
        await wait_all_tasks_blocked()
        upstream.gate.set()

    assert upstream.calls == 1
    assert [r.value["answer"] for r in results] == [1]
    assert (await cache.peek("h1:reservations")) is not None


async def test_the_last_good_value_is_served_stale_with_its_age_when_the_fetch_fails(
    cache: ReadCache, clock: ManualClock
) -> None:
    upstream = await fetched_then_aged(cache, clock, 600)

    upstream.failure = BudgetExhausted(retry_after_s=30, window="minute")
    stale = await get(cache, "h1:reservations", upstream)
    assert (stale.source, stale.stale, stale.age_s) == ("cache", True, 600.0)
    assert stale.value["answer"] == 1

    upstream.failure = UpstreamUnavailable("down")
    clock.advance(5)
    assert (await get(cache, "h1:reservations", upstream)).age_s == 605.0


async def test_a_failure_without_an_earlier_value_is_raised(cache: ReadCache) -> None:
    upstream = Upstream()
    upstream.failure = UpstreamUnavailable("down")
    with pytest.raises(UpstreamUnavailable):
        await get(cache, "h1:reservations", upstream)


async def test_a_failure_not_listed_in_stale_on_is_raised_even_with_an_earlier_value(
    cache: ReadCache, clock: ManualClock
) -> None:
    upstream = await fetched_then_aged(cache, clock, 600)
    upstream.failure = InvalidRequest("bad filter")
    with pytest.raises(InvalidRequest):
        await get(cache, "h1:reservations", upstream)


async def test_values_older_than_keep_s_are_not_served(
    open_cache: Callable[[], ReadCache], clock: ManualClock
) -> None:
    cache = open_cache()
    upstream = await fetched_then_aged(cache, clock, 86401)
    upstream.failure = UpstreamUnavailable("down")
    with pytest.raises(UpstreamUnavailable):
        await get(cache, "h1:reservations", upstream)
    assert await cache.peek("h1:reservations") is None


async def test_invalidating_a_prefix_drops_every_key_under_it(cache: ReadCache) -> None:
    upstream = Upstream()
    for key in ("h1", "h1:reservations", "h1:availability:2026-11-22:2026-11-25", "h10:x", "h2:y"):
        await get(cache, key, upstream)

    await cache.invalidate("h1")

    assert await cache.peek("h1") is None
    assert await cache.peek("h1:reservations") is None
    assert await cache.peek("h1:availability:2026-11-22:2026-11-25") is None
    assert await cache.peek("h10:x") is not None
    assert await cache.peek("h2:y") is not None
    assert (await get(cache, "h1:reservations", upstream)).source == "upstream"


async def test_invalidating_one_key_keeps_its_siblings(cache: ReadCache) -> None:
    upstream = Upstream()
    await get(cache, "h1:reservations", upstream)
    await get(cache, "h1:availability", upstream)
    await cache.invalidate("h1:reservations")
    assert await cache.peek("h1:reservations") is None
    assert await cache.peek("h1:availability") is not None


async def test_a_fetch_overtaken_by_a_write_is_not_cached(cache: ReadCache) -> None:
    async def fetch_while_a_write_lands() -> dict[str, Any]:
        # The write's invalidation arrives while this read is on the wire.
        await cache.invalidate("h1")
        return {"before": "the write"}

    answer = await cache.get("h1:reservations", max_age_s=60, fetch=fetch_while_a_write_lands)
    assert answer.source == "upstream"
    assert await cache.peek("h1:reservations") is None


async def test_peek_reports_age_and_staleness_without_fetching(
    cache: ReadCache, clock: ManualClock
) -> None:
    upstream = Upstream()
    assert await cache.peek("h1:reservations") is None
    await get(cache, "h1:reservations", upstream)
    clock.advance(120)
    peeked = await cache.peek("h1:reservations", max_age_s=60)
    assert peeked is not None
    assert (peeked.source, peeked.stale, peeked.age_s) == ("cache", True, 120.0)
    assert upstream.calls == 1


async def test_a_replica_never_serves_its_decoded_copy_after_another_replaced_the_value(
    replicas: list[ReadCache],
) -> None:
    upstream = Upstream()
    assert (await get(replicas[0], "h1:reservations", upstream)).value["answer"] == 1
    await replicas[1].invalidate("h1")
    # Same instant on the clock: only the version tells the two values apart.
    assert (await get(replicas[1], "h1:reservations", upstream)).value["answer"] == 2
    assert (await get(replicas[0], "h1:reservations", upstream)).value["answer"] == 2


async def test_values_must_be_json(cache: ReadCache) -> None:
    async def not_json() -> object:
        return {"when": object()}

    with pytest.raises(TypeError):
        await cache.get("h1:x", max_age_s=60, fetch=not_json)


async def test_keys_with_wildcards_are_refused(cache: ReadCache) -> None:
    with pytest.raises(ValueError):
        await cache.invalidate("h1*")


async def test_two_replicas_sharing_redis_share_values_and_fetch_once(
    replicas: list[ReadCache],
) -> None:
    upstream = Upstream(held=True)
    results: list[Cached] = []

    def reader(replica: ReadCache) -> Callable[[], Awaitable[None]]:
        async def read() -> None:
            results.append(await get(replica, "h1:reservations", upstream))

        return read

    await all_waiting_then_released(upstream, [reader(replicas[i % 2]) for i in range(40)])

    assert upstream.calls == 1
    assert len(results) == 40
    assert {r.value["answer"] for r in results} == {1}

    await replicas[0].invalidate("h1")
    assert await replicas[1].peek("h1:reservations") is None


# --- memory bounds: the held entries and their parsed forms (docs/deploy.md, Sizing) ---------


class Parsed:
    """A parsed form that keeps its value, as models keep the strings of the JSON."""

    def __init__(self, value: Any) -> None:
        self.value = value


class Parser:
    """Counts how often a value had to be parsed."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, value: Any) -> Parsed:
        self.calls += 1
        return Parsed(value)


@pytest.fixture
async def bounded_cache(
    cache_url: str | None, clock: ManualClock, redis_namespace: str
) -> AsyncIterator[ReadCache]:
    cache = ReadCache(
        clock=clock, redis_url=cache_url, namespace=redis_namespace, max_entries=3, max_parsed=2
    )
    yield cache
    await cache.close()


async def parsed(cache: ReadCache, key: str, upstream: Upstream, parse: Parser) -> Parsed:
    cached = await get(cache, key, upstream)
    return cache.parsed(key, cached.value, parse)


async def test_a_held_value_is_parsed_once(bounded_cache: ReadCache) -> None:
    upstream, parse = Upstream(), Parser()
    first = await parsed(bounded_cache, "h1:reservations", upstream, parse)
    again = await parsed(bounded_cache, "h1:reservations", upstream, parse)
    assert again is first
    assert (parse.calls, upstream.calls) == (1, 1)


async def test_parsed_forms_are_capped_least_recently_used_first(bounded_cache: ReadCache) -> None:
    upstream, parse = Upstream(), Parser()
    kept = [await parsed(bounded_cache, f"h{i}:reservations", upstream, parse) for i in (1, 2)]
    # h1 used again, so h2 is the least recently used when h3 comes in.
    assert await parsed(bounded_cache, "h1:reservations", upstream, parse) is kept[0]
    third = await parsed(bounded_cache, "h3:reservations", upstream, parse)
    assert parse.calls == 3
    assert len(bounded_cache._parsed) == 2
    # h1 and h3 are still held parsed; h2 is parsed again (its entry is still cached).
    assert await parsed(bounded_cache, "h1:reservations", upstream, parse) is kept[0]
    assert await parsed(bounded_cache, "h3:reservations", upstream, parse) is third
    assert parse.calls == 3
    assert await parsed(bounded_cache, "h2:reservations", upstream, parse) is not kept[1]
    assert (parse.calls, upstream.calls) == (4, 3)
    assert len(bounded_cache._parsed) == 2


def _freed(reference: weakref.ref[Parsed]) -> bool:
    gc.collect()
    return reference() is None


async def test_a_parsed_form_is_dropped_when_its_entry_is_replaced(
    bounded_cache: ReadCache, clock: ManualClock
) -> None:
    upstream, parse = Upstream(), Parser()
    old = weakref.ref(await parsed(bounded_cache, "h1:reservations", upstream, parse))
    clock.advance(120)
    new = await parsed(bounded_cache, "h1:reservations", upstream, parse)
    assert new.value["answer"] == 2
    assert _freed(old)


async def test_a_parsed_form_is_dropped_when_its_entry_is_invalidated(
    bounded_cache: ReadCache,
) -> None:
    upstream, parse = Upstream(), Parser()
    held = weakref.ref(await parsed(bounded_cache, "h1:reservations", upstream, parse))
    await bounded_cache.invalidate("h1")
    assert _freed(held)


async def test_a_parsed_form_is_dropped_when_its_entry_is_evicted(bounded_cache: ReadCache) -> None:
    upstream, parse = Upstream(), Parser()
    first = weakref.ref(await parsed(bounded_cache, "h1:reservations", upstream, parse))
    # Three more entries (max_entries=3) push h1's entry out; its parsed form goes with it
    # although the parsed map (max_parsed=2) would have had room had only h2 been parsed.
    await parsed(bounded_cache, "h2:reservations", upstream, parse)
    for key in ("h3:availability", "h4:availability"):
        await get(bounded_cache, key, upstream)
    assert len(bounded_cache._decoded) == 3
    assert _freed(first)


async def test_a_value_not_held_is_parsed_but_not_kept(bounded_cache: ReadCache) -> None:
    parse = Parser()
    value = {"answer": 0, "rows": []}
    result = weakref.ref(bounded_cache.parsed("h1:reservations", value, parse))
    assert _freed(result)
    bounded_cache.parsed("h1:reservations", value, parse)
    assert parse.calls == 2


async def test_the_memory_backend_holds_each_entry_once_and_at_most_max_entries(
    clock: ManualClock,
) -> None:
    cache = ReadCache(clock=clock, max_entries=2)
    try:
        upstream = Upstream()
        for key in ("h1:a", "h2:a", "h3:a"):
            await get(cache, key, upstream)
        # Not in cashews too (the decoded map is the memory backend's store) ...
        assert await cache._cache.get(cache._entry_key("h3:a")) is None
        # ... and h1, the least recently used, is gone: fetched again.
        assert (await get(cache, "h2:a", upstream)).value["answer"] == 2
        assert (await get(cache, "h1:a", upstream)).value["answer"] == 4
        assert upstream.calls == 4
    finally:
        await cache.close()
