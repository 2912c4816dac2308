"""The per-facility upstream budget: minute, hour and day windows taken atomically.

A policy on :class:`pmsgate.ratelimit.RateWindows` (pyrate-limiter buckets): one ``put``
checks the three windows and records the permit in one step — in memory or in Redis (one
Lua script over one sorted set per key, atomic across replicas). Timestamps come from our
:class:`~pmsgate.clock.Clock`, so tests move time instead of sleeping.

Clock skew between replicas (issue 12). Every replica stamps its permits with its own
clock, and those clocks differ by a few milliseconds (NTP) or more. pyrate-limiter's
Redis script counts only ``now - interval … now``: a permit stamped "later" by a
replica whose clock is ahead lies in the *future* of the others and is not counted,
and a permit stamped by a replica that is behind leaves the window early — with one
replica 5 ms behind the other, 19 calls passed for a limit of 10. So:

* The windows' **own Lua script** (:data:`pmsgate.ratelimit.PUT_ITEM`, pyrate-limiter's
  arguments plus the window's marker key): a window counts every permit stamped at or
  after ``now - interval``, with **no upper bound** — a permit in another replica's future
  still counts. ``remaining`` counts the same way.
* Every window is **widened by an edge margin** (``edge_margin_s``, default 0.5 s): a
  permit counts for ``interval + margin``. A permit taken by a replica whose clock is
  ``d`` behind the deciding one would otherwise leave that replica's window ``d`` early;
  as long as the replicas' clocks differ by less than the margin, every permit of the
  last real ``interval`` is counted, whoever stamped it. The margin also absorbs the
  network: we count when a permit is taken, the booking system counts when the request
  arrives, and two requests 60 s apart by our clock may arrive closer together when the
  first one is slower. 0.5 s is far above NTP-synchronised skew (milliseconds) and the
  usual jitter of one HTTPS request, and costs at most half a second at a full window's
  edge (under 1 % of the minute).

We did not use the Redis server's ``TIME`` as the single time source: the window
would then no longer follow the injected clock, so the Redis tests (and the demo's
fast-forward clock, which the emulators share) could only move time by sleeping, and
the in-memory and Redis backends would run on different clocks.

Redis away (issue 12; :mod:`pmsgate.gateway.shared_state`). Fail closed: while Redis
is unreachable, permits come from an in-memory limiter of this process whose windows are
the facility's scaled by ``outage_share`` (``PMSGATE_LIMITER_OUTAGE_SHARE``, default 0.2:
N replicas spend at most N x share of a window, so 0.2 leaves room for 4 replicas and for
the calls made just before the outage, which no replica can see without Redis). It starts
with this process's own permits of the last minute. A window the share leaves under one
call admits nothing. Refusals are :class:`OutageBudgetExhausted` (503
``shared_state_unavailable``; still a :class:`BudgetExhausted`, so a cached answer is
served stale instead). Writes ask for ``shared_only`` permits and are refused outright.
When Redis answers again, the outage's permits are written into the Redis windows (their
members are deterministic, so writing twice adds nothing) and the shared windows are used
again — no restart.

Windows Redis lost (a restart without persistence, a flush). Next to each window's sorted
set is a marker key (same expiry). The windows admit nothing when the marker is missing
(:class:`~pmsgate.ratelimit.WindowLost`) and the limiter rebuilds the window first,
conservatively: the ``history`` callback's upstream requests per hour of the last day
(``gateway_usage_hours``), each hour's stamped at the hour's end — the current hour's at
now, so it counts in the minute window too — plus this process's own permits of the last
minute; then it sets the marker (a new *generation*). Every other replica learns the
generation from its next permit and adds its own permits of the last minute. Member names
are deterministic, so replicas rebuilding at once count each permit once. What no one can
restore: the counts of the last flush interval that were only in Redis.

The windows report, on refusal, when *all* windows have room again (the ``Retry-After``
we owe), which pyrate-limiter's own ``Limiter`` does not (:mod:`pmsgate.ratelimit`).

Priority policy (reserved headroom): interactive calls may use a whole window;
background calls only while the window holds fewer than
``floor(limit * background_share)`` permits. Both kinds share one bucket (the
same history / the same Redis key), so the last ``1 - background_share`` of every
window is always left for interactive calls and background work can never
starve them; interactive calls may use the background part when it is free.

The key is whatever the caller scopes the budget by (the facility's hotel_id,
or an account; see ``Settings.limiter_scope``); it must not be a secret.
"""

from __future__ import annotations

import enum
import itertools
import math
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

import anyio
import structlog
from pyrate_limiter import Duration, Rate
from redis.asyncio import Redis

from pmsgate.clock import Clock
from pmsgate.errors import PmsgateError
from pmsgate.gateway.shared_state import RedisHealth, SharedStateUnavailable
from pmsgate.ratelimit import EDGE_MS, RateWindows, WindowLost

log = structlog.get_logger(__name__)

WINDOWS: tuple[tuple[str, Duration], ...] = (
    ("minute", Duration.MINUTE),
    ("hour", Duration.HOUR),
    ("day", Duration.DAY),
)
# Old permits are trimmed (and the Redis key's expiry pushed back) at most this often per key.
_LEAK_EVERY_MS = 60_000
# A Redis bucket outlives its longest window by this much, then disappears if unused.
_EXPIRY_MARGIN_S = 120
# How much longer than its window a permit counts (clock skew, network; module docstring).
DEFAULT_EDGE_MARGIN_S = 0.5
# The share of each window one process may use alone while Redis is unreachable.
DEFAULT_OUTAGE_SHARE = 0.2

# Hour rows of usage history, (start of the hour, upstream requests), for a limiter key.
UsageHistory = Callable[[str, datetime], Awaitable[list[tuple[datetime, int]]]]


class WindowLimits(Protocol):
    """Calls allowed per window (``pmsgate.gateway.facilities.Limits`` fits)."""

    @property
    def per_minute(self) -> int: ...

    @property
    def per_hour(self) -> int: ...

    @property
    def per_day(self) -> int: ...


class Priority(enum.Enum):
    """Who is asking: a caller waiting for an answer, or a refresh nobody waits for."""

    INTERACTIVE = "interactive"
    BACKGROUND = "background"


class BudgetExhausted(PmsgateError):
    """The facility's upstream budget has no permit now; ``retry_after_s`` says when."""

    code = "upstream_budget_exhausted"
    status = 429

    def __init__(
        self,
        *,
        retry_after_s: float,
        window: str,
        priority: Priority = Priority.INTERACTIVE,
    ) -> None:
        self.retry_after_s = retry_after_s
        self.window = window
        self.priority = priority
        seconds = max(1, math.ceil(retry_after_s))
        message, hint = self._explain(window, priority, seconds)
        super().__init__(message, hint=hint, headers={"Retry-After": str(seconds)})

    @staticmethod
    def _explain(window: str, priority: Priority, seconds: int) -> tuple[str, str]:
        """The message and the hint."""
        share = " background share of the" if priority is Priority.BACKGROUND else ""
        return (
            f"The{share} booking-system budget of this facility for the current {window} "
            "is used up.",
            f"Retry in {seconds} s, when the {window} window frees a call.",
        )


class OutageBudgetExhausted(BudgetExhausted):
    """Redis is unreachable and this process's outage share of the budget is used up."""

    code = "shared_state_unavailable"
    status = 503

    @staticmethod
    def _explain(window: str, priority: Priority, seconds: int) -> tuple[str, str]:
        """The message and the hint."""
        return (
            "Redis, through which the gateway replicas share the facility's booking-system "
            f"budget, is unreachable, and this replica's outage share of the {window} "
            "budget is used up.",
            f"Retry in {seconds} s. Operators: check the Redis server of PMSGATE_REDIS_URL "
            "(PMSGATE_LIMITER_OUTAGE_SHARE sets the share).",
        )


@dataclass(frozen=True)
class _Limits:
    per_minute: int
    per_hour: int
    per_day: int


def _limits_tuple(limits: WindowLimits) -> tuple[int, int, int]:
    wanted = (int(limits.per_minute), int(limits.per_hour), int(limits.per_day))
    if min(wanted) < 1:
        raise ValueError("every limit must be at least 1")
    return wanted


class FacilityLimiter:
    """Per-key budget over three windows, in memory or shared through Redis."""

    def __init__(
        self,
        *,
        clock: Clock,
        redis: Redis | None = None,
        namespace: str = "pmsgate",
        background_share: float = 0.5,
        edge_margin_s: float = DEFAULT_EDGE_MARGIN_S,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        health: RedisHealth | None = None,
        outage_share: float = DEFAULT_OUTAGE_SHARE,
        history: UsageHistory | None = None,
    ) -> None:
        if not 0.0 <= background_share <= 1.0:
            raise ValueError("background_share must be between 0 and 1")
        if not 0.0 <= edge_margin_s < 60.0:
            raise ValueError("edge_margin_s must be between 0 and 60 seconds")
        if not 0.0 <= outage_share <= 1.0:
            raise ValueError("outage_share must be between 0 and 1")
        # Every window is its interval plus this margin (see the module docstring).
        self._margin_ms = round(edge_margin_s * 1000)
        self._base_clock = clock
        self._redis = redis
        self._windows = RateWindows(
            clock=clock,
            retention_ms=WINDOWS[-1][1].value + self._margin_ms,
            redis=redis,
            key_prefix=f"{namespace}:limiter",
            marker_prefix=f"{namespace}:limiter-window",
            expiry_margin_s=_EXPIRY_MARGIN_S,
            trim_every_ms=_LEAK_EVERY_MS,
        )
        self._background_share = background_share
        self._sleep = sleep
        # Redis only: the outage fallback, and what this process knows of its own permits.
        self._health = health if health is not None else RedisHealth(clock)
        self._outage_share = outage_share
        self._history = history
        self._outage: FacilityLimiter | None = None
        self._seeded: set[str] = set()  # an outage limiter: keys given their recent permits
        self._instance = uuid.uuid4().hex[:12]
        self._sequence = itertools.count()
        # Own permits of the last minute window (stamp, member), written into a rebuilt window.
        self._recent: dict[str, deque[tuple[int, str]]] = {}
        # Permits taken during an outage, written into the Redis window once it is back.
        self._unwritten: dict[str, list[tuple[int, str]]] = {}
        self._generations: dict[str, str] = {}

    def __repr__(self) -> str:
        backend = "redis" if self._redis is not None else "memory"
        return (
            f"FacilityLimiter(backend={backend}, background_share={self._background_share}, "
            f"edge_margin_s={self._margin_ms / 1000})"
        )

    async def acquire(
        self,
        key: str,
        limits: WindowLimits,
        priority: Priority = Priority.INTERACTIVE,
        *,
        wait_s: float = 0.0,
        shared_only: bool = False,
    ) -> None:
        """Take one permit from all three windows, waiting up to ``wait_s``, or BudgetExhausted.

        With Redis unreachable, the permit comes from this process's outage budget
        (:class:`OutageBudgetExhausted` when that is used up) — unless ``shared_only``
        (a write): then SharedStateUnavailable.
        """
        if self._redis is None:
            await self._acquire(key, limits, priority, wait_s)
            return
        try:
            with self._health.use("take a permit"):
                await self._write_unwritten()
                await self._acquire(key, limits, priority, wait_s)
            return
        except SharedStateUnavailable:
            if shared_only:
                raise SharedStateUnavailable(
                    "send a write", retry_after_s=self._health.retry_after_s
                ) from None
        scaled = self._outage_limits(limits)
        if scaled is None:
            # The share leaves some window under one call: nothing until Redis is back.
            empty = next(
                name
                for (name, _), limit in zip(WINDOWS, _limits_tuple(limits), strict=True)
                if math.floor(limit * self._outage_share + 1e-9) < 1
            )
            raise OutageBudgetExhausted(
                retry_after_s=self._health.retry_after_s, window=empty, priority=priority
            )
        outage = await self._outage_limiter(key, scaled)
        try:
            await outage.acquire(key, scaled, priority, wait_s=wait_s)
        except BudgetExhausted as refused:
            raise OutageBudgetExhausted(
                retry_after_s=refused.retry_after_s, window=refused.window, priority=priority
            ) from None
        now_ms = self._windows.now_ms()
        self._unwritten.setdefault(key, []).append((now_ms, self._member(now_ms) + "1"))

    async def remaining(self, key: str, limits: WindowLimits) -> dict[str, int]:
        """Permits left now for an interactive call, per window (the outage budget's if so)."""
        if self._redis is not None:
            try:
                with self._health.use("read the budget"):
                    await self._write_unwritten()
                    return await self._remaining(key, limits)
            except SharedStateUnavailable:
                scaled = self._outage_limits(limits)
                if scaled is None:
                    return {name: 0 for name, _ in WINDOWS}
                return await (await self._outage_limiter(key, scaled)).remaining(key, scaled)
        return await self._remaining(key, limits)

    async def _remaining(self, key: str, limits: WindowLimits) -> dict[str, int]:
        rates = self._rates(_limits_tuple(limits))
        counts = await self._windows.counts(key, rates)
        return {
            self._window_name(rate): max(0, rate.limit - count)
            for rate, count in zip(rates, counts, strict=True)
        }

    async def retry_after(
        self, key: str, limits: WindowLimits, priority: Priority = Priority.INTERACTIVE
    ) -> float:
        """Seconds until a call of this priority could take a permit (0 when one is free now)."""
        rates = self._view(_limits_tuple(limits), priority)
        if not rates:
            return WINDOWS[-1][1].value / 1000
        wait, _ = await self._windows.wait_ms(key, rates)
        return wait / 1000

    async def _acquire(
        self, key: str, limits: WindowLimits, priority: Priority, wait_s: float
    ) -> None:
        waited = 0.0
        while True:
            wanted = _limits_tuple(limits)
            rates = self._view(wanted, priority)
            if not rates:
                # background_share leaves background calls nothing in some window.
                raise BudgetExhausted(
                    retry_after_s=WINDOWS[-1][1].value / 1000,
                    window=self._zero_share_window(wanted),
                    priority=priority,
                )
            now_ms = self._windows.now_ms()
            if await self._put(key, wanted, rates, now_ms):
                return
            wait_ms, slowest = await self._windows.wait_ms(key, rates, now_ms=now_ms)
            # A refused put always means some window is full; never answer "retry now".
            wait = max(wait_ms, EDGE_MS) / 1000
            window = self._window_name(slowest or rates[0])
            # Give up at once when the permit frees after the deadline: waiting is useless.
            if waited + wait > wait_s:
                raise BudgetExhausted(retry_after_s=wait, window=window, priority=priority)
            await self._sleep(wait)
            # Count the time we asked to sleep, not the clock: an injected sleep may not move it.
            waited += wait

    async def _put(
        self, key: str, limits: tuple[int, int, int], rates: list[Rate], now_ms: int
    ) -> bool:
        if self._redis is None:
            return await self._windows.put(key, rates, now_ms=now_ms)
        member = self._member(now_ms)
        for last_try in (False, False, True):
            try:
                taken = await self._windows.put(key, rates, now_ms=now_ms, member=member)
                break
            except WindowLost:
                if last_try:
                    raise
                await self._rebuild(key, limits[-1], now_ms)
        if taken:
            self._remember(key, now_ms, member + "1")
        await self._contribute(key)
        return taken

    # --- Redis away and back (module docstring) ------------------------------------------------

    async def _outage_limiter(self, key: str, scaled: _Limits) -> FacilityLimiter:
        """This outage's in-memory limiter, holding ``key``'s own permits of the last minute."""
        if self._outage is None:
            self._outage = FacilityLimiter(
                clock=self._base_clock,
                background_share=self._background_share,
                edge_margin_s=self._margin_ms / 1000,
                sleep=self._sleep,
            )
        outage = self._outage
        if key not in outage._seeded:
            outage._seeded.add(key)
            rates = outage._rates(_limits_tuple(scaled))
            for stamp, _ in self._recent.get(key, ()):
                await outage._windows.put(key, rates, now_ms=stamp)
        return outage

    def _outage_limits(self, limits: WindowLimits) -> _Limits | None:
        # The epsilon keeps e.g. 10 * 0.3 = 2.999… from losing a permit.
        scaled = [math.floor(n * self._outage_share + 1e-9) for n in _limits_tuple(limits)]
        return _Limits(*scaled) if min(scaled) >= 1 else None

    def _member(self, now_ms: int) -> str:
        # Unique per process and permit; the windows append "1" (the permit's weight index).
        return f"{self._instance}:{now_ms}:{next(self._sequence)}:"

    async def _write_unwritten(self) -> None:
        """Write the permits taken during an outage into the Redis windows: they still count."""
        if not self._unwritten:
            return
        pending, self._unwritten = self._unwritten, {}
        try:
            await self._windows.record(
                {
                    key: {member: stamp for stamp, member in permits}
                    for key, permits in pending.items()
                }
            )
        except BaseException:
            for key, permits in pending.items():
                self._unwritten.setdefault(key, []).extend(permits)
            raise
        # The outage budget starts empty at the next outage.
        self._outage = None
        log.info("limiter_outage_permits_written", permits=sum(map(len, pending.values())))

    def _remember(self, key: str, now_ms: int, member: str) -> None:
        recent = self._recent.setdefault(key, deque())
        recent.append((now_ms, member))
        horizon = now_ms - WINDOWS[0][1].value - self._margin_ms
        while recent and recent[0][0] < horizon:
            recent.popleft()

    async def _rebuild(self, key: str, per_day: int, now_ms: int) -> None:
        """Redis lost the window: rebuild its hour and day counts from what we know.

        The database's hourly upstream requests of the last day, each hour's stamped at its
        end (the current hour's at now) so that it counts as long as it possibly could, plus
        this process's own permits of the last minute. Member names are deterministic, so
        replicas rebuilding at once add each permit once.
        """
        members: dict[str, int] = {}
        day_ms = WINDOWS[-1][1].value + self._margin_ms
        if self._history is not None:
            now = self._base_clock.now()
            for hour, count in await self._history(key, now - timedelta(milliseconds=day_ms)):
                stamp = min(int((hour + timedelta(hours=1)).timestamp() * 1000), now_ms)
                if stamp < now_ms - day_ms:
                    continue
                label = hour.strftime("%Y%m%dT%H")
                members.update({f"db:{label}:{i}": stamp for i in range(min(count, per_day))})
        members.update({member: stamp for stamp, member in self._recent.get(key, ())})
        await self._windows.restore(key, members)
        log.info("limiter_window_rebuilt", key=key, permits=len(members))

    async def _contribute(self, key: str) -> None:
        """A window rebuilt by another replica gets this process's recent permits too."""
        generation = self._windows.generation(key)
        if generation is None or self._generations.get(key) == generation:
            return
        recent = self._recent.get(key)
        if recent:
            await self._windows.record({key: {member: stamp for stamp, member in recent}})
        self._generations[key] = generation

    # --- windows -------------------------------------------------------------------------------

    def _rates(self, limits: tuple[int, int, int], share: float = 1.0) -> list[Rate]:
        rates = []
        for (_, duration), limit in zip(WINDOWS, limits, strict=True):
            # The epsilon keeps e.g. 100 * 0.29 = 28.999… from losing a permit.
            allowed = limit if share >= 1.0 else math.floor(limit * share + 1e-9)
            if allowed < 1:
                return []
            rates.append(Rate(allowed, duration.value + self._margin_ms))
        return rates

    def _view(self, limits: tuple[int, int, int], priority: Priority) -> list[Rate]:
        """The windows a call of this priority sees (empty: its share of some window is 0).

        Both priorities see the same permits; background calls through smaller limits.
        """
        if priority is Priority.BACKGROUND:
            return self._rates(limits, self._background_share)
        return self._rates(limits)

    def _window_name(self, rate: Rate) -> str:
        for name, duration in WINDOWS:
            if rate.interval == duration.value + self._margin_ms:
                return name
        return f"{rate.interval} ms"

    def _zero_share_window(self, limits: tuple[int, int, int]) -> str:
        for (name, _), limit in zip(WINDOWS, limits, strict=True):
            if math.floor(limit * self._background_share + 1e-9) < 1:
                return name
        return WINDOWS[-1][0]
