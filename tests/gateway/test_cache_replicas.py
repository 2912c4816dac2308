"""Replicas on one Redis: a cache hit costs no Redis round trip, and a change made by one
replica reaches the other at once through the cache's pub/sub channel; a lost message is
seen within ``trust_s`` (pmsgate.gateway.cache, ReadCache.listen).

Each replica is a ReadCache of its own with its own Redis client, on one namespace. The
time a held entry is trusted is measured on an injected timer moved by hand: nothing waits
but the messages themselves.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from typing import Any

import pytest
from redis.asyncio import Redis

from pmsgate.clock import ManualClock
from pmsgate.gateway.cache import ReadCache

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

KEY = "h1:reservations"
TRUST_S = 2.0


class Ticks:
    """A monotonic timer that moves only when told."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Answers:
    """The upstream: numbered answers."""

    def __init__(self) -> None:
        self.calls = 0

    async def fetch(self) -> dict[str, Any]:
        self.calls += 1
        return {"answer": self.calls}


@pytest.fixture
async def replicas(
    redis_url: str, redis_namespace: str, clock: ManualClock
) -> AsyncIterator[Callable[..., Any]]:
    """Opens replicas' caches on the test Redis, listening unless told not to."""
    async with AsyncExitStack() as stack:

        async def open_replica(*, listen: bool = True, timer: Ticks | None = None) -> ReadCache:
            cache = ReadCache(
                clock=clock,
                redis_url=redis_url,
                namespace=redis_namespace,
                trust_s=TRUST_S,
                timer=timer or Ticks(),
            )
            stack.push_async_callback(cache.close)
            if listen:
                client = Redis.from_url(redis_url)
                stack.push_async_callback(client.aclose)
                await cache.listen(client)
                assert cache.heard is not None
                await cache.heard.subscribed.wait()
            return cache

        yield open_replica


async def value(cache: ReadCache, upstream: Answers, max_age_s: float = 3600) -> Any:
    return (await cache.get(KEY, max_age_s=max_age_s, fetch=upstream.fetch)).value["answer"]


async def both_hold_the_first_answer(replicas: Any) -> tuple[ReadCache, ReadCache, Answers, int]:
    """Two replicas that both hold the upstream's first answer, the upstream, and how many
    changes the second has heard of by then."""
    a, b = await replicas(), await replicas()
    upstream = Answers()
    assert await value(a, upstream) == 1
    assert await value(b, upstream) == 1
    assert b.heard is not None
    return a, b, upstream, b.heard.applied


async def test_a_hit_asks_redis_nothing_while_the_channel_is_heard(replicas: Any) -> None:
    a, b = await replicas(), await replicas()
    upstream = Answers()
    assert await value(a, upstream) == 1
    assert await value(b, upstream) == 1  # read from Redis once: version and record
    reads = b.store_reads
    for _ in range(5):
        assert await value(b, upstream) == 1
        assert (await b.peek(KEY)) is not None
    assert b.store_reads == reads  # no round trip per hit
    assert upstream.calls == 1


async def test_a_new_entry_stored_by_one_replica_is_served_by_the_other_at_once(
    replicas: Any, clock: ManualClock
) -> None:
    a, b, upstream, heard = await both_hold_the_first_answer(replicas)
    clock.advance(10)
    assert await value(a, upstream, max_age_s=5) == 2  # a refills: a new entry in Redis
    await b.heard.wait_applied(heard + 1)
    assert await value(b, upstream) == 2  # checked against Redis once, then held
    reads = b.store_reads
    assert await value(b, upstream) == 2
    assert b.store_reads == reads
    assert upstream.calls == 2


async def test_an_invalidation_by_one_replica_drops_the_others_copy_at_once(
    replicas: Any,
) -> None:
    a, b, upstream, heard = await both_hold_the_first_answer(replicas)
    await a.invalidate("h1")  # a write: every read of the facility
    await b.heard.wait_applied(heard + 1)
    assert await b.peek(KEY) is None
    assert await value(b, upstream) == 2
    assert await value(a, upstream) == 2


async def test_a_change_whose_message_is_lost_is_seen_within_trust_s(
    replicas: Any, clock: ManualClock
) -> None:
    timer = Ticks()
    b = await replicas(timer=timer)
    silent = await replicas(listen=False)  # publishes nothing: its messages are "lost"
    upstream = Answers()
    assert await value(silent, upstream) == 1
    assert await value(b, upstream) == 1
    clock.advance(10)
    assert await value(silent, upstream, max_age_s=5) == 2
    timer.now += TRUST_S  # still trusted: the held entry is served
    assert await value(b, upstream) == 1
    timer.now += 0.1  # past trust_s: checked against Redis, the new entry found
    assert await value(b, upstream) == 2


async def test_the_hits_that_find_the_held_entry_due_share_one_read_of_redis(
    replicas: Any,
) -> None:
    timer = Ticks()
    b = await replicas(timer=timer)
    upstream = Answers()
    assert await value(b, upstream) == 1
    timer.now += TRUST_S + 0.1  # due: the next read asks Redis for the version
    reads = b.store_reads
    hits = await asyncio.gather(*(value(b, upstream) for _ in range(50)))
    assert hits == [1] * 50
    assert b.store_reads == reads + 1  # one version read for the fifty, not fifty
    assert upstream.calls == 1


async def test_a_replica_that_does_not_hear_the_channel_asks_redis_on_every_hit(
    replicas: Any,
) -> None:
    a = await replicas(listen=False)
    upstream = Answers()
    assert await value(a, upstream) == 1
    reads = a.store_reads
    assert await value(a, upstream) == 1
    assert await value(a, upstream) == 1
    assert a.store_reads == reads + 2  # the version, per hit (as before the channel)
