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
* **One clock for shared windows** (``reference`` given): replicas stamp and judge permits
  on *their own* clock corrected by a measured offset to one reference every replica
  reads the same — in production the Redis server's ``TIME`` (:class:`RedisTime`). See
  :class:`ClockOffset` for why an offset rather than ``TIME`` inside the script.
* **Holds.** :meth:`RateWindows.hold` lets no permit of a key be given before a moment
  (an upstream's ``Retry-After``); this process only.
* **Queue of waiting callers.** A put may name a :class:`Waiter`: refused, it joins the
  key's queue until the waiter's lease ends; taken, it leaves (in the same atomic step). A
  put that ``yields`` is refused (:class:`Yielded`, nothing taken) while anyone is queued.
  :meth:`RateWindows.leave` takes a waiter that gave up out, :meth:`RateWindows.queued`
  counts the queue. In Redis the queue is one sorted set per key
  (``<queue_prefix>:<key>``, scored by lease end) read and written by :data:`PUT_ITEM`, so
  a waiter on one replica makes a yielding put on another refuse; a replica that dies
  leaves its waiters behind only until their leases end.
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
from dataclasses import dataclass
from fnmatch import fnmatchcase
from inspect import isawaitable
from typing import Any, Protocol, TypeVar

import structlog
from pyrate_limiter import AbstractClock, InMemoryBucket, Rate, RateItem, RedisBucket
from pyrate_limiter.abstracts import AbstractBucket
from redis.asyncio import Redis
from redis.exceptions import NoScriptError

from pmsgate.clock import Clock, Sleep

T = TypeVar("T")

log = structlog.get_logger(__name__)

# A measured offset that moves by more than this is logged (clock_offset_measured).
_OFFSET_LOG_MS = 100

# A permit counts while its stamp >= now - interval (inclusive): it frees 1 ms later.
EDGE_MS = 1

# pyrate-limiter's PUT_ITEM with the same first arguments, except that:
# - a window counts every permit from ``now - interval`` on, including permits stamped in the
#   future by a replica whose clock is ahead (pyrate-limiter stops at ``now``);
# - KEYS[2], when ARGV "marked" is 1, is the window's marker: when it is missing, Redis has lost
#   the window (a restart without persistence, a flush), and the script takes nothing, answers -2;
# - KEYS[3], when ARGV "fenced" is 1, is the recovery fence (its end, on the windows' clock):
#   while it stands, a permit the caller's own rule refuses (ARGV "fence_ok" 0) is not taken
#   either, and the answer is -3;
# - KEYS[4], when ARGV "queue" is 'j' (join) or 'y' (yield), is the key's queue of waiting
#   callers (member: a waiter, score: the end of its lease on the windows' clock; leases past
#   now are dropped first); 'y': the put is refused while anyone is queued, answer -4; 'j': a
#   refused put queues the waiter ARGV "waiter" until ARGV "until", a taken one removes it;
# - it answers {index of the full window, -1 taken, -2 lost, -3 fenced or -4 yielded; the
#   marker's generation (false without one); each window's count after the put; the stamps in
#   the first window after the put, oldest first; the fence's remaining milliseconds (<= 0:
#   none)}.
PUT_ITEM = """
local bucket = KEYS[1]
local now = tonumber(ARGV[1])
local space_required = tonumber(ARGV[2])
local item_name = ARGV[3]
local rates_count = tonumber(ARGV[4])
local flags = 5 + rates_count * 2
local marked = ARGV[flags] == '1'
local fenced = ARGV[flags + 1] == '1'
local fence_ok = ARGV[flags + 2] == '1'
local queue_mode = ARGV[flags + 3]
local queued = 0
if queue_mode == 'j' or queue_mode == 'y' then
    redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', '(' .. ARGV[1])
    queued = tonumber(redis.call('ZCARD', KEYS[4]))
end

local generation = false
if marked then
    generation = redis.call('GET', KEYS[2])
    if not generation then
        return {-2, false, {}, {}, -2}
    end
end
local fence = -2
if fenced then
    local until_ms = redis.call('GET', KEYS[3])
    if until_ms then
        fence = tonumber(until_ms) - now
    end
end

local counts = {}
local outcome = -1
for i=1,rates_count do
    local offset = (i - 1) * 2
    local interval = tonumber(ARGV[5 + offset])
    local limit = tonumber(ARGV[5 + offset + 1])
    local count = tonumber(redis.call('ZCOUNT', bucket, now - interval, '+inf'))
    counts[i] = count
    if outcome == -1 and limit - count < space_required then
        outcome = i - 1
    end
end
if outcome == -1 and queue_mode == 'y' and queued > 0 then
    outcome = -4
end
if outcome == -1 and fence > 0 and not fence_ok then
    outcome = -3
end
if outcome == -1 then
    for i=1,space_required do
        redis.call('ZADD', bucket, now, item_name..i)
    end
    for i=1,rates_count do
        counts[i] = counts[i] + space_required
    end
    if queue_mode == 'j' then
        redis.call('ZREM', KEYS[4], ARGV[flags + 4])
    end
elseif queue_mode == 'j' then
    local until_ms = tonumber(ARGV[flags + 5])
    redis.call('ZADD', KEYS[4], until_ms, ARGV[flags + 4])
    -- Upkeep only: the set goes a minute after its longest lease (the TTL is never shortened).
    local keep = math.max(until_ms - now, 0) + 60000
    if tonumber(redis.call('PTTL', KEYS[4])) < keep then
        redis.call('PEXPIRE', KEYS[4], keep)
    end
end
local stamps = {}
if rates_count > 0 then
    local first = now - tonumber(ARGV[5])
    local scored = redis.call('ZRANGEBYSCORE', bucket, first, '+inf', 'WITHSCORES')
    for i=2,#scored,2 do
        stamps[#stamps + 1] = tonumber(scored[i])
    end
end
return {outcome, generation, counts, stamps, fence}
"""
_LOST, _FENCED, _YIELDED = -2, -3, -4

# The recovery fence stands until ARGV[1] (ms on the windows' clock; a later end is kept);
# the key itself expires ARGV[2] ms later in Redis's own time, so a forgotten one goes.
RAISE_FENCE = """
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current < tonumber(ARGV[1]) then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return 1
"""


@dataclass(frozen=True)
class WindowView:
    """A shared window as the last put saw it (Redis only): what a replica knows of the
    permits *every* replica took, kept for when Redis is away (the limiter's outage budget).
    """

    at_ms: int  # the put's time (the windows' time, reference-corrected)
    intervals: tuple[int, ...]  # each rate's interval, as given to the put
    counts: tuple[int, ...]  # permits in each rate's window after the put
    stamps: tuple[int, ...]  # permits in the first rate's window after the put, oldest first
    fence_ms: int  # how much longer the recovery fence stands (0: none)
    fenced: bool  # the put was refused by the fence


class TimeReference(Protocol):
    """A clock every replica reads the same, in milliseconds since the epoch."""

    async def now_ms(self) -> int:
        """The reference's time now."""
        ...


class RedisTime:
    """The Redis server's ``TIME``: the one clock all replicas of a deployment can read."""

    def __init__(self, redis: Redis) -> None:
        self._redis = redis

    def __repr__(self) -> str:
        return "RedisTime()"

    async def now_ms(self) -> int:
        """Redis's time now (one round trip)."""
        answer: tuple[int, int] = await resolve(self._redis.time())
        seconds, micros = answer
        return int(seconds) * 1000 + int(micros) // 1000


class ClockTime:
    """A :class:`~pmsgate.clock.Clock` as the reference: where every replica runs on one
    clock already (tests and the demo, whose emulators share that clock too)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock

    def __repr__(self) -> str:
        return f"ClockTime({type(self._clock).__name__})"

    async def now_ms(self) -> int:
        """The clock's time."""
        return int(self._clock.now().timestamp() * 1000)


class ClockOffset:
    """This process's clock, corrected to a reference by a measured offset.

    Why not Redis ``TIME`` inside the Lua script? Both give every replica one clock. The
    offset keeps the injected :class:`~pmsgate.clock.Clock` in charge of *elapsed* time:
    a stamp is ``own clock + offset``, so tests (and the demo's fast-forward clock, which
    the emulators share) still move a shared window by moving their clock, and the
    in-memory and Redis backends keep one notion of time, while replicas whose clocks are
    seconds (or minutes) apart stamp and judge permits on the reference's time. The
    offset is measured with ``TIME``: best of ``samples`` round trips, at the round trip's
    midpoint, so its error is at most half the shortest round trip (a millisecond on a
    LAN; the limiter's edge margin covers it). It is measured again every
    ``sync_every_ms`` of the own clock (drift, an NTP step), when the own clock went
    back, and after Redis failed (:meth:`invalidate`: it may be another server now).
    The price: one ``TIME`` round trip per ``sync_every_ms`` per process, on the path of
    a permit only (a cached answer never takes one).
    """

    def __init__(
        self,
        clock: Clock,
        reference: TimeReference,
        *,
        sync_every_ms: int = 60_000,
        samples: int = 3,
    ) -> None:
        if samples < 1:
            raise ValueError("samples must be at least 1")
        self._clock = PyrateClock(clock)
        self.reference = reference
        self._sync_every_ms = sync_every_ms
        self._samples = samples
        self.offset_ms = 0
        self.error_ms = 0
        self._synced_at: int | None = None  # own clock, ms

    def __repr__(self) -> str:
        return f"ClockOffset(reference={self.reference!r}, offset_ms={self.offset_ms})"

    @property
    def synced(self) -> bool:
        """True once an offset was measured (and not invalidated since)."""
        return self._synced_at is not None

    def now_ms(self) -> int:
        """The own clock plus the last measured offset (no round trip)."""
        return self._clock.now() + self.offset_ms

    def invalidate(self) -> None:
        """Measure again before the next use (Redis failed: it may come back elsewhere)."""
        self._synced_at = None

    async def sync_if_due(self) -> None:
        """Measure the offset when never measured, invalidated, due, or the clock went back."""
        local = self._clock.now()
        last = self._synced_at
        if last is not None and last <= local < last + self._sync_every_ms:
            return
        best: tuple[int, int] | None = None  # (round trip, offset)
        for _ in range(self._samples):
            before = self._clock.now()
            reference = await self.reference.now_ms()
            after = self._clock.now()
            sample = (after - before, reference - (before + after) // 2)
            if best is None or sample[0] < best[0]:
                best = sample
        assert best is not None
        round_trip, offset = best
        if last is None or abs(offset - self.offset_ms) > _OFFSET_LOG_MS:
            log.info(
                "clock_offset_measured",
                reference=repr(self.reference),
                offset_ms=offset,
                previous_ms=self.offset_ms if last is not None else None,
                round_trip_ms=round_trip,
            )
        self.offset_ms, self.error_ms = offset, (round_trip + 1) // 2
        self._synced_at = self._clock.now()


class WindowLost(Exception):
    """The window's marker is gone: Redis lost the window (restart without persistence)."""


class Yielded(Exception):
    """A put that yields was refused, nothing taken: a caller is queued for the key."""


@dataclass(frozen=True)
class Waiter:
    """A caller queued for a key's permit until ``until_ms`` (the windows' clock) unless it
    gets its permit or leaves first; ``name`` is unique per caller (never a secret)."""

    name: str
    until_ms: int


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
    """pyrate-limiter's RedisBucket running :data:`PUT_ITEM` (with the marker, fence and queue,
    if any).

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
        fence_key: str | None,
        fence_ok: bool,
        queue_key: str | None = None,
        waiter: Waiter | None = None,
        yields: bool = False,
    ) -> None:
        super().__init__(rates, redis, bucket_key, script_hash)
        self.marker_key = marker_key
        self.fence_key = fence_key
        self.fence_ok = fence_ok
        self.queue_key = queue_key
        self.waiter = waiter
        self.yields = yields
        self.generation: str | None = None
        self.view: WindowView | None = None
        self.yielded = False

    async def _check_and_insert(self, item: RateItem) -> Rate | None:
        rates = [value for rate in self.rates for value in (rate.interval, rate.limit)]
        queue_mode = "0"
        if self.queue_key is not None:
            queue_mode = "j" if self.waiter is not None else "y" if self.yields else "0"
        flags: list[str | int] = [
            int(self.marker_key is not None),
            int(self.fence_key is not None),
            int(self.fence_ok),
            queue_mode,
            self.waiter.name if self.waiter is not None else "",
            self.waiter.until_ms if self.waiter is not None else 0,
        ]
        args: list[str | int] = [
            *(item.timestamp, item.weight, item.name, len(self.rates)),
            *rates,
            *flags,
        ]
        # Four keys always; the flags say which of the last three are real.
        keys = [
            self.bucket_key,
            self.marker_key or self.bucket_key,
            self.fence_key or self.bucket_key,
            self.queue_key or self.bucket_key,
        ]
        awaited = self.redis.evalsha(self.script_hash, len(keys), *keys, *args)
        index, generation, counts, stamps, fence = await resolve(awaited)
        if int(index) == _LOST:
            raise WindowLost
        self.yielded = int(index) == _YIELDED
        self.generation = generation.decode() if isinstance(generation, bytes) else generation
        self.view = WindowView(
            at_ms=item.timestamp,
            intervals=tuple(rate.interval for rate in self.rates),
            counts=tuple(int(count) for count in counts),
            stamps=tuple(int(stamp) for stamp in stamps),
            fence_ms=max(0, int(fence)),
            fenced=int(index) == _FENCED,
        )
        if int(index) in (_FENCED, _YIELDED):
            return self.rates[0]
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
        reference: TimeReference | None = None,
        sync_every_ms: int = 60_000,
        fence_key: str | None = None,
        queue_prefix: str | None = None,
    ) -> None:
        if retention_ms < 1:
            raise ValueError("retention_ms must be at least 1")
        self._clock = clock
        self.clock = PyrateClock(clock)
        # Shared windows only: every stamp on the reference's time (ClockOffset).
        self.offset = (
            ClockOffset(clock, reference, sync_every_ms=sync_every_ms)
            if reference is not None and redis is not None
            else None
        )
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
        self._fence_key = fence_key
        self._views: dict[str, WindowView] = {}
        self._queue_prefix = queue_prefix
        self._queues: dict[str, dict[str, int]] = {}  # in memory: key -> waiter -> lease end

    def __repr__(self) -> str:
        backend = "redis" if self.redis is not None else "memory"
        return f"RateWindows(backend={backend}, retention_ms={self.retention_ms})"

    @property
    def shared(self) -> bool:
        """True when the windows live in Redis (shared by replicas)."""
        return self.redis is not None

    def now_ms(self) -> int:
        """The windows' time in milliseconds: the injected clock's, plus the measured offset
        to the reference when there is one (no round trip: the last measurement)."""
        if self.offset is not None:
            return self.offset.now_ms()
        return self.clock.now()

    async def synced_now_ms(self) -> int:
        """:meth:`now_ms`, measuring the offset to the reference first when it is due."""
        if self.offset is not None:
            await self.offset.sync_if_due()
        return self.now_ms()

    def redis_key(self, key: str) -> str:
        """The sorted set holding ``key``'s permits in Redis."""
        return f"{self._key_prefix}:{key}"

    def marker_key(self, key: str) -> str:
        """The marker key of ``key``'s window in Redis (needs ``marker_prefix``)."""
        assert self._marker_prefix is not None
        return f"{self._marker_prefix}:{key}"

    def queue_key(self, key: str) -> str:
        """The sorted set of ``key``'s queued waiters in Redis (needs ``queue_prefix``)."""
        assert self._queue_prefix is not None
        return f"{self._queue_prefix}:{key}"

    def generation(self, key: str) -> str | None:
        """The marker generation the last put on ``key`` saw (None without markers)."""
        return self._generations.get(key)

    def view(self, key: str) -> WindowView | None:
        """``key``'s shared window as this process's last put saw it (None: none yet, or
        in memory)."""
        return self._views.get(key)

    def forget_view(self, key: str) -> None:
        """Drop the remembered view of ``key`` (its permits have all left)."""
        self._views.pop(key, None)

    async def raise_fence(self, ms: int) -> None:
        """Stand the recovery fence for ``ms`` from now on the windows' clock (a fence that
        ends later is kept). Its end is a value on that clock, as permits' stamps are; the
        key's own expiry (in Redis's time) only clears it away some time after."""
        assert self.redis is not None and self._fence_key is not None
        until = await self.synced_now_ms() + ms
        await resolve(self.redis.eval(RAISE_FENCE, 1, self._fence_key, until, ms + 60_000))

    # --- taking and waiting ----------------------------------------------------------------

    async def put(
        self,
        key: str,
        rates: Sequence[Rate],
        *,
        now_ms: int | None = None,
        member: str = "",
        fence_ok: bool = True,
        waiter: Waiter | None = None,
        yields: bool = False,
    ) -> bool:
        """Take one permit stamped ``now_ms`` if every rate has room; False when one is full.

        ``member`` names the permit in Redis (plus "1"); a random one when empty.
        WindowLost when Redis lost a marked window (nothing taken). With a ``fence_key``,
        ``fence_ok`` False refuses the permit while the fence stands (:meth:`view` says so).
        ``waiter``: refused, it joins the key's queue (its lease renewed); taken, it leaves.
        ``yields``: :class:`Yielded` (nothing taken) while any waiter is queued. In Redis
        both need ``queue_prefix``.
        """
        now = await self.synced_now_ms() if now_ms is None else now_ms
        if self.redis is None:
            taken = self._put_memory(key, rates, now, waiter, yields)
        else:
            item = RateItem(member or f"{uuid.uuid4().hex}:", now)
            taken = await self._put_shared(key, rates, item, fence_ok, waiter, yields)
        await self._maybe_trim(key, now)
        return taken

    def _put_memory(
        self, key: str, rates: Sequence[Rate], now: int, waiter: Waiter | None, yields: bool
    ) -> bool:
        """The in-memory put (one step: no await between the queue's check and the put)."""
        queue = self._live_queue(key, now)
        if yields and queue:
            raise Yielded
        memory = self._memory_bucket(key, rates, create=True)
        assert memory is not None
        taken = bool(memory.put(RateItem(key, now)))
        if waiter is not None and taken:
            queue.pop(waiter.name, None)
        elif waiter is not None:
            queue[waiter.name] = waiter.until_ms
        if queue:
            self._queues[key] = queue
        else:
            self._queues.pop(key, None)
        return taken

    def _live_queue(self, key: str, now: int) -> dict[str, int]:
        """The key's in-memory waiters whose lease has not ended."""
        queue = self._queues.get(key, {})
        return {name: until for name, until in queue.items() if until >= now}

    async def leave(self, key: str, waiter: Waiter) -> None:
        """Take ``waiter`` out of the key's queue (it gave up waiting)."""
        if self.redis is None:
            queue = self._queues.get(key)
            if queue is not None:
                queue.pop(waiter.name, None)
                if not queue:
                    del self._queues[key]
            return
        await self.redis.zrem(self.queue_key(key), waiter.name)

    async def queued(self, key: str, *, now_ms: int | None = None) -> int:
        """Waiters queued for ``key`` now (their lease not ended)."""
        now = self.now_ms() if now_ms is None else now_ms
        if self.redis is None:
            return len(self._live_queue(key, now))
        return int(await self.redis.zcount(self.queue_key(key), now, "+inf"))

    async def _put_shared(
        self,
        key: str,
        rates: Sequence[Rate],
        item: RateItem,
        fence_ok: bool = True,
        waiter: Waiter | None = None,
        yields: bool = False,
    ) -> bool:
        if (waiter is not None or yields) and self._queue_prefix is None:
            raise ValueError("a queue in Redis needs the windows' queue_prefix")
        for last_try in (False, True):
            bucket = await self._redis_bucket(key, rates, fence_ok, waiter, yields)
            try:
                taken = bool(await bucket.put(item))  # type: ignore[misc]  # async with Redis
            except NoScriptError:
                if last_try:
                    raise
                # Redis lost its script cache (restart, SCRIPT FLUSH): load it again, retry once.
                self._script_hash = None
                continue
            self._generations[key] = bucket.generation
            if bucket.view is not None:
                self._views[key] = bucket.view
            if bucket.yielded:
                raise Yielded
            return taken
        raise AssertionError("unreachable")

    async def wait_ms(
        self, key: str, rates: Sequence[Rate], *, now_ms: int | None = None
    ) -> tuple[int, Rate | None]:
        """Milliseconds until every rate has room for one more permit (0: now), and the
        rate that frees last (None when all have room)."""
        now = await self.synced_now_ms() if now_ms is None else now_ms
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
        now = await self.synced_now_ms() if now_ms is None else now_ms
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
                now = await self.synced_now_ms()
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

    async def _redis_bucket(
        self,
        key: str,
        rates: Sequence[Rate],
        fence_ok: bool = True,
        waiter: Waiter | None = None,
        yields: bool = False,
    ) -> _SharedBucket:
        assert self.redis is not None
        if self._script_hash is None:
            self._script_hash = str(await self.redis.script_load(PUT_ITEM))
        marker = self.marker_key(key) if self._marker_prefix is not None else None
        return _SharedBucket(
            list(rates),
            self.redis,
            self.redis_key(key),
            self._script_hash,
            marker,
            self._fence_key,
            fence_ok,
            self.queue_key(key) if self._queue_prefix is not None else None,
            waiter,
            yields,
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
        for key in [key for key in self._queues if not self._live_queue(key, now_ms)]:
            del self._queues[key]
