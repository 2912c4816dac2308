"""Sliding rate windows per key, in memory or shared through Redis: the one rate primitive.

Every rate window of pmsgate is a :class:`RateWindows`: the facility limiter
(:mod:`pmsgate.gateway.limiter`, three windows per facility), the assistant platform's
and the notes workspace's client throttles (:mod:`pmsgate.integrations`) and the console's
sign-in throttle (:mod:`pmsgate.web.users`). Each keeps its own policy on top — who may
use how much, what a refusal answers, what happens when Redis is away.

The contract:

* A key (a facility, a workspace, a hashed address…; never a secret) has **one history
  of permits** (millisecond stamps). The pyrate-limiter :class:`~pyrate_limiter.Rate`\\ s
  to check are given **per call**, so two callers can see the same permits through
  different limits (the limiter's interactive and background shares).
* :meth:`RateWindows.put` takes one permit if every rate has room, atomically, and
  records it; :meth:`RateWindows.wait_ms` says when every rate has room for one more
  (0 now) and which rate frees last; :meth:`RateWindows.counts` counts each window;
  :meth:`RateWindows.acquire` waits (through the injected ``sleep``) and takes one.
* **Counting.** A permit counts while its stamp is ``>= now - interval`` — with no upper
  bound: a permit stamped in the future (by a replica whose clock is ahead) counts too. It
  frees one millisecond after it reaches the window's edge.
* **Time** comes from our :class:`~pmsgate.clock.Clock` (as a pyrate-limiter clock,
  :class:`PyrateClock`), so tests move time instead of sleeping; waits go through an
  injected ``sleep``.
* **Holds.** :meth:`RateWindows.hold` lets no permit of a key be given before a moment
  (an upstream's ``Retry-After``); this process only.
* **Backends.** In memory: a pyrate-limiter ``InMemoryBucket`` per call over the key's
  item list. In Redis: one sorted set per key (``<key_prefix>:<key>``) and a
  ``RedisBucket`` running our Lua script :data:`PUT_ITEM` (pyrate-limiter's arguments;
  it counts future stamps, which pyrate-limiter's does not), so replicas share the
  windows. A lost script cache (Redis restart, ``SCRIPT FLUSH``) is reloaded once.
  Redis errors propagate: the policy decides what an outage means.
* **Lost windows** (``marker_prefix`` given): next to each sorted set is a marker key
  holding a *generation*; when Redis loses it (a restart without persistence, a flush),
  :meth:`RateWindows.put` takes nothing and raises :class:`WindowLost`, so the caller can
  rebuild the window (:meth:`RateWindows.restore`) before counting on it.
  :meth:`RateWindows.generation` is the last generation a put saw. Permits can be written
  by member name (:meth:`RateWindows.record`): writing the same member twice adds nothing.
* **Bounded.** Permits older than ``retention_ms`` are dropped at most every
  ``trim_every_ms`` per key; idle Redis keys expire ``expiry_margin_s`` after that;
  in-memory keys whose permits all left are forgotten.

We use pyrate-limiter's buckets but not its ``Limiter``: its delay loop sleeps on the
real clock, its ``Leaker`` starts a background thread or task, and on refusal it reports
only the first full window, not when *all* windows have room again.
"""

from __future__ import annotations

import math
import uuid
from bisect import bisect_left
from collections.abc import Awaitable, Mapping, Sequence
from fnmatch import fnmatchcase
from inspect import isawaitable
from typing import Any, TypeVar

from pyrate_limiter import AbstractClock, InMemoryBucket, Rate, RateItem, RedisBucket
from pyrate_limiter.abstracts import AbstractBucket
from redis.asyncio import Redis
from redis.exceptions import NoScriptError

from pmsgate.clock import Clock, Sleep

T = TypeVar("T")

# A permit counts while its stamp >= now - interval (inclusive): it frees 1 ms later.
EDGE_MS = 1

# pyrate-limiter's PUT_ITEM with the same arguments, except that:
# - a window counts every permit from ``now - interval`` on, including permits stamped in the
#   future by a replica whose clock is ahead (pyrate-limiter stops at ``now``);
# - KEYS[2], when given, is the window's marker: when it is missing, Redis has lost the window
#   (a restart without persistence, a flush), and the script takes nothing and answers -2;
# - it answers {index of the full window or -1, the marker's generation (false without one)}.
PUT_ITEM = """
local bucket = KEYS[1]
local now = tonumber(ARGV[1])
local space_required = tonumber(ARGV[2])
local item_name = ARGV[3]
local rates_count = tonumber(ARGV[4])

local generation = false
if #KEYS > 1 then
    generation = redis.call('GET', KEYS[2])
    if not generation then
        return {-2, false}
    end
end

for i=1,rates_count do
    local offset = (i - 1) * 2
    local interval = tonumber(ARGV[5 + offset])
    local limit = tonumber(ARGV[5 + offset + 1])
    local count = redis.call('ZCOUNT', bucket, now - interval, '+inf')
    if limit - tonumber(count) < space_required then
        return {i - 1, generation}
    end
end

for i=1,space_required do
    redis.call('ZADD', bucket, now, item_name..i)
end
return {-1, generation}
"""


class WindowLost(Exception):
    """The window's marker is gone: Redis lost the window (restart without persistence)."""


class PyrateClock(AbstractClock):
    """Our injectable clock as pyrate-limiter's clock: milliseconds since the epoch."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock

    def now(self) -> int:
        """Current time in milliseconds."""
        return int(self._clock.now().timestamp() * 1000)


async def resolve(value: T | Awaitable[T]) -> T:
    """A pyrate-limiter answer: plain in memory, an awaitable on async Redis."""
    if isawaitable(value):
        return await value
    return value


class _SharedBucket(RedisBucket):
    """pyrate-limiter's RedisBucket running :data:`PUT_ITEM` (with the marker, if any).

    The permit's member in the sorted set is the item's name plus "1" (the weight index),
    so writing the same permit again adds nothing twice.
    """

    def __init__(
        self,
        rates: list[Rate],
        redis: Redis,
        bucket_key: str,
        script_hash: str,
        marker_key: str | None,
    ) -> None:
        super().__init__(rates, redis, bucket_key, script_hash)
        self.marker_key = marker_key
        self.generation: str | None = None

    async def _check_and_insert(self, item: RateItem) -> Rate | None:
        rates = [value for rate in self.rates for value in (rate.interval, rate.limit)]
        args: list[str | int] = [item.timestamp, item.weight, item.name, len(self.rates), *rates]
        keys = [self.bucket_key] if self.marker_key is None else [self.bucket_key, self.marker_key]
        awaited = self.redis.evalsha(self.script_hash, len(keys), *keys, *args)
        index, generation = await resolve(awaited)
        if int(index) == -2:
            raise WindowLost
        self.generation = generation.decode() if isinstance(generation, bytes) else generation
        return None if int(index) < 0 else self.rates[int(index)]


class RateWindows:
    """Permits per key over sliding windows, in memory or in Redis (module docstring)."""

    def __init__(
        self,
        *,
        clock: Clock,
        retention_ms: int,
        redis: Redis | None = None,
        key_prefix: str = "pmsgate:rate",
        marker_prefix: str | None = None,
        expiry_margin_s: int = 120,
        trim_every_ms: int = 60_000,
    ) -> None:
        if retention_ms < 1:
            raise ValueError("retention_ms must be at least 1")
        self._clock = clock
        self.clock = PyrateClock(clock)
        self.redis = redis
        self.retention_ms = retention_ms
        self._key_prefix = key_prefix
        self._marker_prefix = marker_prefix
        self._ttl_s = math.ceil(retention_ms / 1000) + expiry_margin_s
        self._trim_every_ms = trim_every_ms
        self._script_hash: str | None = None
        self._items: dict[str, list[RateItem]] = {}  # in memory: each key's permits, in order
        self._trimmed: dict[str, int] = {}
        self._last_sweep_ms = 0
        self._held_until: dict[str, float] = {}  # key -> epoch seconds
        self._generations: dict[str, str | None] = {}

    def __repr__(self) -> str:
        backend = "redis" if self.redis is not None else "memory"
        return f"RateWindows(backend={backend}, retention_ms={self.retention_ms})"

    @property
    def shared(self) -> bool:
        """True when the windows live in Redis (shared by replicas)."""
        return self.redis is not None

    def now_ms(self) -> int:
        """The injected clock's time in milliseconds."""
        return self.clock.now()

    def redis_key(self, key: str) -> str:
        """The sorted set holding ``key``'s permits in Redis."""
        return f"{self._key_prefix}:{key}"

    def marker_key(self, key: str) -> str:
        """The marker key of ``key``'s window in Redis (needs ``marker_prefix``)."""
        assert self._marker_prefix is not None
        return f"{self._marker_prefix}:{key}"

    def generation(self, key: str) -> str | None:
        """The marker generation the last put on ``key`` saw (None without markers)."""
        return self._generations.get(key)

    # --- taking and waiting ----------------------------------------------------------------

    async def put(
        self, key: str, rates: Sequence[Rate], *, now_ms: int | None = None, member: str = ""
    ) -> bool:
        """Take one permit stamped ``now_ms`` if every rate has room; False when one is full.

        ``member`` names the permit in Redis (plus "1"); a random one when empty.
        WindowLost when Redis lost a marked window (nothing taken).
        """
        now = self.now_ms() if now_ms is None else now_ms
        if self.redis is None:
            memory = self._memory_bucket(key, rates, create=True)
            assert memory is not None
            taken = memory.put(RateItem(key, now))
        else:
            taken = await self._put_shared(
                key, rates, RateItem(member or f"{uuid.uuid4().hex}:", now)
            )
        await self._maybe_trim(key, now)
        return taken

    async def _put_shared(self, key: str, rates: Sequence[Rate], item: RateItem) -> bool:
        for last_try in (False, True):
            bucket = await self._redis_bucket(key, rates)
            try:
                taken = bool(await bucket.put(item))  # type: ignore[misc]  # async with Redis
            except NoScriptError:
                if last_try:
                    raise
                # Redis lost its script cache (restart, SCRIPT FLUSH): load it again, retry once.
                self._script_hash = None
                continue
            self._generations[key] = bucket.generation
            return taken
        raise AssertionError("unreachable")

    async def wait_ms(
        self, key: str, rates: Sequence[Rate], *, now_ms: int | None = None
    ) -> tuple[int, Rate | None]:
        """Milliseconds until every rate has room for one more permit (0: now), and the
        rate that frees last (None when all have room)."""
        now = self.now_ms() if now_ms is None else now_ms
        bucket = await self._bucket(key, rates)
        wait, slowest = 0, None
        if bucket is None:
            return wait, slowest
        for rate in rates:
            # The limit-th newest permit: once it leaves the window, one more fits.
            bound: RateItem | None = await resolve(bucket.peek(rate.limit - 1))
            if bound is None or bound.timestamp < now - rate.interval:
                continue
            frees_in = bound.timestamp + rate.interval - now + EDGE_MS
            if frees_in > wait:
                wait, slowest = frees_in, rate
        return wait, slowest

    async def counts(
        self, key: str, rates: Sequence[Rate], *, now_ms: int | None = None
    ) -> list[int]:
        """Permits in each rate's window now (future stamps included)."""
        now = self.now_ms() if now_ms is None else now_ms
        if self.redis is None:
            stamps = [item.timestamp for item in self._items.get(key, ())]
            return [len(stamps) - bisect_left(stamps, now - rate.interval) for rate in rates]
        name = self.redis_key(key)
        async with self.redis.pipeline(transaction=False) as pipe:
            for rate in rates:
                pipe.zcount(name, now - rate.interval, "+inf")
            answers: list[Any] = await pipe.execute()
        return [int(count) for count in answers]

    async def forget(self, pattern: str) -> int:
        """Drop every key matching the glob ``pattern`` with all its permits; how many.

        What an operator's "unlock" is: the window starts empty again, on every replica.
        """
        if self.redis is None:
            names = [key for key in self._items if fnmatchcase(key, pattern)]
            for key in names:
                del self._items[key]
                self._trimmed.pop(key, None)
                self._held_until.pop(key, None)
            return len(names)
        dropped = 0
        async for name in self.redis.scan_iter(match=self.redis_key(pattern), count=500):
            dropped += int(await self.redis.delete(name))
        return dropped

    def hold(self, key: str, seconds: float) -> None:
        """Give no permit of ``key`` for ``seconds`` from now (this process; the later end wins)."""
        until = self._clock.now().timestamp() + max(0.0, seconds)
        self._held_until[key] = max(until, self._held_until.get(key, until))

    async def acquire(self, key: str, rates: Sequence[Rate], sleep: Sleep) -> float:
        """Take one permit, sleeping until the key's hold ends and a permit frees.

        Returns the seconds slept. For a caller that must not wait past a deadline, use
        :meth:`put` and :meth:`wait_ms`.
        """
        slept, waited_out = 0.0, 0.0
        while True:
            held = self._held_until.get(key, 0.0)
            pause = held - self._clock.now().timestamp()
            if held > waited_out and pause > 0:
                # Sleep out the hold once; sleep again only when it was pushed back meanwhile.
                waited_out = held
            else:
                now = self.now_ms()
                if await self.put(key, rates, now_ms=now):
                    return slept
                wait, _ = await self.wait_ms(key, rates, now_ms=now)
                # A refused put means a full window: never "retry now".
                pause = max(wait, EDGE_MS) / 1000
            slept += pause
            await sleep(pause)

    # --- writing permits (Redis) -------------------------------------------------------------

    async def record(self, permits: Mapping[str, Mapping[str, int]]) -> None:
        """Write permits ({key: {member: stamp}}) into the Redis windows, without checking."""
        assert self.redis is not None
        async with self.redis.pipeline(transaction=False) as pipe:
            for key, members in permits.items():
                if members:
                    pipe.zadd(self.redis_key(key), dict(members))
                    pipe.expire(self.redis_key(key), self._ttl_s)
            await pipe.execute()

    async def restore(self, key: str, members: Mapping[str, int]) -> None:
        """Rebuild a lost window: write ``members`` and set a new generation, atomically."""
        assert self.redis is not None
        name = self.redis_key(key)
        async with self.redis.pipeline(transaction=True) as pipe:
            if members:
                pipe.zadd(name, dict(members))
            pipe.set(self.marker_key(key), uuid.uuid4().hex, nx=True, ex=self._ttl_s)
            pipe.expire(name, self._ttl_s)
            await pipe.execute()

    # --- buckets and upkeep ------------------------------------------------------------------

    async def _bucket(self, key: str, rates: Sequence[Rate]) -> AbstractBucket | None:
        if self.redis is None:
            return self._memory_bucket(key, rates, create=False)
        return await self._redis_bucket(key, rates)

    def _memory_bucket(
        self, key: str, rates: Sequence[Rate], *, create: bool
    ) -> InMemoryBucket | None:
        items = self._items.get(key)
        if items is None:
            if not create:
                return None
            items = self._items[key] = []
        bucket = InMemoryBucket(list(rates))
        # The key's one history: every view of it appends to the same list.
        bucket.items = items
        return bucket

    async def _redis_bucket(self, key: str, rates: Sequence[Rate]) -> _SharedBucket:
        assert self.redis is not None
        if self._script_hash is None:
            self._script_hash = str(await self.redis.script_load(PUT_ITEM))
        marker = self.marker_key(key) if self._marker_prefix is not None else None
        return _SharedBucket(
            list(rates), self.redis, self.redis_key(key), self._script_hash, marker
        )

    async def _maybe_trim(self, key: str, now_ms: int) -> None:
        """Drop permits past the retention; keep idle Redis keys from lingering."""
        if now_ms - self._trimmed.get(key, now_ms - self._trim_every_ms) < self._trim_every_ms:
            return
        self._trimmed[key] = now_ms
        # One millisecond early: a permit stamped exactly at now - retention still counts.
        horizon = now_ms - 1 - self.retention_ms
        if self.redis is None:
            self._drop_before(key, horizon)
            self._sweep(now_ms)
            return
        name = self.redis_key(key)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.zremrangebyscore(name, 0, horizon)
            pipe.expire(name, self._ttl_s)
            if self._marker_prefix is not None:
                pipe.expire(self.marker_key(key), self._ttl_s)
            await pipe.execute()

    def _drop_before(self, key: str, horizon: int) -> None:
        items = self._items.get(key)
        if items is None:
            return
        del items[: bisect_left([item.timestamp for item in items], horizon + 1)]
        if not items:
            del self._items[key]
            self._trimmed.pop(key, None)

    def _sweep(self, now_ms: int) -> None:
        """Forget in-memory keys whose permits all left (bounded memory), once per retention."""
        if now_ms - self._last_sweep_ms < self.retention_ms:
            return
        self._last_sweep_ms = now_ms
        for key in list(self._items):
            self._drop_before(key, now_ms - 1 - self.retention_ms)
        for key in [key for key, until in self._held_until.items() if until * 1000 <= now_ms]:
            del self._held_until[key]
