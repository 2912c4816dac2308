"""The per-facility upstream budget: minute, hour and day windows taken atomically.

A policy on :class:`pmsgate.ratelimit.RateWindows` (pyrate-limiter buckets): one ``put``
checks the three windows and records the permit in one step — in memory or in Redis (one
Lua script over one sorted set per key, atomic across replicas). Timestamps come from our
:class:`~pmsgate.clock.Clock`, so tests move time instead of sleeping.

One clock for every replica. Every decision on a Redis-held window is made on
one time source: each replica stamps and judges permits on its own clock **plus its
measured offset to the Redis server's TIME** (:class:`pmsgate.ratelimit.ClockOffset`;
measured at the first use, every ``clock_sync_s``, after Redis failed, and when the own
clock went back). Replicas seconds or minutes apart then count one window: a permit
stamped by one leaves every replica's window at the same moment (with each replica on its
own clock, one 2 s off let 11 to 14 calls a minute through). We chose the offset over
``TIME`` inside the Lua script because the injected :class:`~pmsgate.clock.Clock` keeps
measuring *elapsed* time: tests and the demo (whose emulators share its fast-forward
clock) still move a Redis window by moving their clock, and the in-memory backend runs on
the same clock. The cost: one ``TIME`` round trip (best of three) per ``clock_sync_s`` per
process, on the path of a permit only; a cached answer never pays it. ``reference``
replaces Redis's TIME where every replica already runs on one clock (tests, the demo).

What the offset does not cover, the **edge margin** (``edge_margin_s``, default 0.5 s)
does: a permit counts for ``interval + margin`` — the offset's error (half a round trip)
and the network: we count when a permit is taken, the booking system counts when the
request arrives, and two requests 60 s apart by our clock may arrive closer together when
the first one is slower. The windows' own Lua script (:data:`pmsgate.ratelimit.PUT_ITEM`)
also counts permits stamped in the future, with no upper bound.

Redis away (docs/requirements.md R7.7; :mod:`pmsgate.gateway.shared_state`). Fail closed: while
Redis is unreachable, a replica grants a permit only within its **outage share** of what
the window left, counted on the whole window as it last saw it in Redis — every replica's
permits, not only its own. Every put's answer brings the window back (each window's count
and the minute window's stamps: :class:`~pmsgate.ratelimit.WindowView`, no extra round
trip); when Redis goes, that view is frozen (the hour's and day's older permits stamped
at the latest moment they can have been taken), and a permit is granted at time ``t``
only if, in every window, ``own(t) + 1 <= floor(share x (limit - seen(t)))``: ``own`` the
permits this replica took since the view was frozen, ``seen`` the view's permits still in
the window. Refusals are :class:`OutageBudgetExhausted` (503 ``shared_state_unavailable``;
still a :class:`BudgetExhausted`, so a cached answer is served stale instead). Writes ask
for ``shared_only`` permits and are refused outright.

**Back: write back first, then decide.** The outage's permits are written into the Redis
windows before this replica takes anything new (every use of Redis by the limiter starts
with it, and a recovery noticed by any other user of Redis — a cache read, ``/readyz`` —
writes them back too), with deterministic members, so writing twice adds nothing. The
replica then raises the **recovery fence** (``<namespace>:limiter-recovery``, one minute
window long, extended by every replica that recovers): while it stands, every replica —
also one that never noticed the outage, which learns of the fence from its next put —
takes a permit only if the shared window has room **and** its outage share (as above,
counting its permits since the outage or the fence) allows it. Another replica's outage
permits are invisible until it writes them back; the fence keeps everyone on its share
meanwhile.

**The bound.** Let ``P`` be the permits in a window when Redis went, ``N`` the replicas
and ``share <= 1/N``. During the outage and the fence each replica ``i`` adds at most
``share x (L - seen_i)`` to the window, so the booking system sees at most
``P + N x share x (L - P) <= L`` when every view is current, and at most
``L + share x (u_1 + … + u_N)`` when replica ``i``'s view missed ``u_i`` of the ``P``
permits (taken by others after its last put; a view is as fresh as the replica's last
put, refused ones included). After the fence, the shared window is whole again: every
replica that granted outage permits and still runs has written them back. Not covered: a
replica killed during the outage takes its outage permits with it (at most its share of
each window), and a partition that cuts some replicas off Redis while others still reach
it (those never notice an outage).

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

Guest calls first (docs/requirements.md R7.8). Every permit is asked for as
:class:`Priority` ``INTERACTIVE`` (a tool or operation call a caller waits for) or
``BACKGROUND`` (a refresh ahead of need, a job's check, any job). Two rules:

- **The share.** Interactive calls may use a whole window; background calls take a permit
  only while the window holds fewer than ``floor(limit x background_share)`` permits of
  either kind (default 0.3: 3 of 10 a minute, 90 of 300 an hour, 1,500 of 5,000 a day;
  rounded down, a window whose share rounds to 0 admits no background call). Both kinds
  share one history (the same Redis key), so background work never holds more than its
  share of a window, gets less when guests are busy, and the last ``1 - background_share``
  of every window is always left for interactive calls.
- **Yield to a waiting guest.** An interactive call that waits for a permit is *queued*
  for the facility's key (:class:`~pmsgate.ratelimit.Waiter`: joined by its refused put,
  left by the put that takes its permit or when it gives up; a lease of its remaining wait
  plus ``_QUEUE_GRACE_MS`` covers a replica that dies). While anyone is queued, a
  background put is refused in the same atomic step that checks the windows (the Lua
  script reads the queue's sorted set, so a guest waiting on one replica stops background
  work on every replica) and the background call is **skipped**, not made to wait:
  :class:`YieldedToInteractive` (a :class:`BudgetExhausted`) at once, whatever its
  ``wait_s``, with ``Retry-After`` when the guest's permit frees. A refresh keeps serving
  the answer it has, a job defers the facility to its next tick. Waiting instead would only
  queue background work behind the guest for the permits the guest needs.

The token requests (``auth/get-token``) are interactive: one token serves every caller of
the facility and its request is shared by every caller that needs it at that moment.

The key is whatever the caller scopes the budget by (the facility's hotel_id,
or an account; see ``Settings.limiter_scope``); it must not be a secret.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import math
import uuid
from bisect import bisect_left, insort
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

import anyio
import structlog
from pyrate_limiter import Duration, Rate
from redis.asyncio import Redis

from pmsgate.clock import Clock
from pmsgate.errors import PmsgateError
from pmsgate.gateway.shared_state import REDIS_ERRORS, RedisHealth, SharedStateUnavailable
from pmsgate.ratelimit import (
    EDGE_MS,
    RateWindows,
    RedisTime,
    TimeReference,
    Waiter,
    WindowLost,
    WindowView,
    Yielded,
)

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
# How often the offset of this process's clock to Redis's TIME is measured again.
DEFAULT_CLOCK_SYNC_S = 60.0
# The share of each window background work may use (Settings.limiter_background_share).
DEFAULT_BACKGROUND_SHARE = 0.3
# A queued interactive call's lease outlasts its remaining wait by this much.
_QUEUE_GRACE_MS = 2_000

# Hour rows of usage history, (start of the hour, upstream requests), for a limiter key.
UsageHistory = Callable[[str, datetime], Awaitable[list[tuple[datetime, int]]]]

# A budget per API account (Settings.limiter_scope "account") is kept under this prefix.
_ACCOUNT_PREFIX = "account:"


def limiter_key(hotel_id: str, username: str, *, by_account: bool) -> str:
    """Whose budget a facility's request spends: its hotel_id, or ``account:<username>``
    when budgets are per API account (every facility of that account shares it)."""
    return f"{_ACCOUNT_PREFIX}{username}" if by_account else hotel_id


def account_of(key: str) -> str | None:
    """The API account (username) a :func:`limiter_key` names; None for a hotel_id."""
    return key.removeprefix(_ACCOUNT_PREFIX) if key.startswith(_ACCOUNT_PREFIX) else None


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


class YieldedToInteractive(BudgetExhausted):
    """A background request skipped: an interactive call of the same budget is waiting."""

    @staticmethod
    def _explain(window: str, priority: Priority, seconds: int) -> tuple[str, str]:
        """The message and the hint."""
        return (
            "A call on behalf of a caller is waiting for this facility's booking-system "
            f"budget ({window} window); background work yields to it.",
            f"Retry in {seconds} s, once the waiting call has had its permit.",
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


@dataclass
class _Guard:
    """A key's outage accounting: the window as last seen in Redis, frozen, and this
    replica's permits since (module docstring, "Redis away")."""

    seen: list[tuple[int, int]]  # (stamp, permits): the frozen view, conservatively stamped
    own: list[int] = field(default_factory=list)  # this replica's permits since, in order


def _frozen(view: WindowView | None) -> list[tuple[int, int]]:
    """A view's permits as (stamp, count), each stamped at the latest moment it can have been
    taken: the minute window's exactly; the hour's older ones just before the view's minute
    window began, the day's older ones just before its hour window began."""
    if view is None:
        return []
    seen = [(stamp, 1) for stamp in view.stamps]
    counts = list(view.counts)
    for i in range(1, len(counts)):
        older = counts[i] - counts[i - 1]
        if older > 0:
            seen.append((view.at_ms - view.intervals[i - 1] - 1, older))
    return seen


class FacilityLimiter:
    """Per-key budget over three windows, in memory or shared through Redis."""

    def __init__(
        self,
        *,
        clock: Clock,
        redis: Redis | None = None,
        namespace: str = "pmsgate",
        background_share: float = DEFAULT_BACKGROUND_SHARE,
        edge_margin_s: float = DEFAULT_EDGE_MARGIN_S,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        health: RedisHealth | None = None,
        outage_share: float = DEFAULT_OUTAGE_SHARE,
        history: UsageHistory | None = None,
        reference: TimeReference | None = None,
        clock_sync_s: float = DEFAULT_CLOCK_SYNC_S,
    ) -> None:
        if not 0.0 <= background_share <= 1.0:
            raise ValueError("background_share must be between 0 and 1")
        if not 0.0 <= edge_margin_s < 60.0:
            raise ValueError("edge_margin_s must be between 0 and 60 seconds")
        if not 0.0 <= outage_share <= 1.0:
            raise ValueError("outage_share must be between 0 and 1")
        if clock_sync_s <= 0:
            raise ValueError("clock_sync_s must be positive")
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
            # One clock for all replicas: the Redis server's, through a measured offset.
            reference=reference if reference is not None or redis is None else RedisTime(redis),
            sync_every_ms=round(clock_sync_s * 1000),
            fence_key=f"{namespace}:limiter-recovery",
            queue_prefix=f"{namespace}:limiter-queue",
        )
        self._background_share = background_share
        self._sleep = sleep
        # Redis only: the outage budget, the write-back and the fence (module docstring).
        self._health = health if health is not None else RedisHealth(clock)
        self._health.on_recovery(self._write_back_now)
        self._outage_share = outage_share
        self._history = history
        self._fence_ms = WINDOWS[0][1].value + self._margin_ms
        self._guards: dict[str, _Guard] = {}
        self._outage_noticed = False  # an outage this replica has not fenced yet
        self._write_backs: set[asyncio.Task[None]] = set()
        self._instance = uuid.uuid4().hex[:12]
        self._sequence = itertools.count()
        # Own permits of the last minute window (stamp, member), written into a rebuilt window.
        self._recent: dict[str, deque[tuple[int, str]]] = {}
        # Permits taken during an outage, written into the Redis window once it is back.
        self._unwritten: dict[str, list[tuple[int, str]]] = {}
        self._generations: dict[str, str] = {}
        # Interactive calls of this process waiting for a permit, per key (read while Redis
        # is away: the queue in Redis cannot be).
        self._waiting: Counter[str] = Counter()

    def __repr__(self) -> str:
        backend = "redis" if self._redis is not None else "memory"
        return (
            f"FacilityLimiter(backend={backend}, background_share={self._background_share}, "
            f"edge_margin_s={self._margin_ms / 1000})"
        )

    @property
    def clock_offset_ms(self) -> int:
        """The measured offset of this process's clock to the shared one (0 in memory)."""
        offset = self._windows.offset
        return offset.offset_ms if offset is not None else 0

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
            self._noticed_outage()
            if shared_only:
                raise SharedStateUnavailable(
                    "send a write", retry_after_s=self._health.retry_after_s
                ) from None
        await self._acquire_in_outage(key, limits, priority, wait_s)

    async def remaining(self, key: str, limits: WindowLimits) -> dict[str, int]:
        """Permits left now for an interactive call, per window (the outage budget's if so)."""
        if self._redis is not None:
            try:
                with self._health.use("read the budget"):
                    await self._write_unwritten()
                    return await self._remaining(key, limits)
            except SharedStateUnavailable:
                self._noticed_outage()
                rates = self._rates(_limits_tuple(limits))
                guard = self._guard(key)
                now_ms = self._windows.now_ms()
                return {
                    self._window_name(rate): max(0, cap - own)
                    for rate, (own, cap) in zip(
                        rates, self._guard_use(guard, rates, now_ms), strict=True
                    )
                }
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
        guard = self._guards.get(key)
        if guard is not None:
            wait = max(wait, self._guard_wait(guard, rates, self._windows.now_ms())[0])
        return wait / 1000

    async def aclose(self) -> None:
        """Wait for write-backs started by a recovery (shutdown)."""
        if self._write_backs:
            await asyncio.gather(*self._write_backs, return_exceptions=True)

    async def queued(self, key: str) -> int:
        """Interactive calls waiting for a permit of ``key`` now: every replica's with Redis
        (this process's while Redis is away)."""
        if self._redis is None:
            return await self._windows.queued(key)
        try:
            with self._health.use("read the queue"):
                return await self._windows.queued(key)
        except SharedStateUnavailable:
            return self._waiting[key]

    async def _acquire(
        self, key: str, limits: WindowLimits, priority: Priority, wait_s: float
    ) -> None:
        waited = 0.0
        background = priority is Priority.BACKGROUND
        # An interactive call that may wait queues for its permit (module docstring).
        name = "" if background or wait_s <= 0 else f"{self._instance}:w{next(self._sequence)}"
        queued: Waiter | None = None
        try:
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
                now_ms = await self._windows.synced_now_ms()
                if background and self._waiting[key]:
                    raise await self._yielded(key, wanted, now_ms)
                waiter = None
                if name and wait_s > waited:
                    lease_ms = math.ceil((wait_s - waited) * 1000) + _QUEUE_GRACE_MS
                    waiter = Waiter(name, now_ms + lease_ms)
                try:
                    taken = await self._put(
                        key, wanted, rates, now_ms, waiter=waiter, yields=background
                    )
                except Yielded:
                    raise await self._yielded(key, wanted, now_ms) from None
                queued = None if taken else waiter or queued
                if taken:
                    return
                view = self._windows.view(key) if self._redis is not None else None
                guard = self._guards.get(key)
                if view is not None and view.fenced and guard is None:
                    # A recovery fence this replica did not know of: its outage share from now.
                    self._guards[key] = _Guard(seen=_frozen(view))
                    continue
                wait_ms, slowest = await self._windows.wait_ms(key, rates, now_ms=now_ms)
                if view is not None and view.fenced and guard is not None:
                    wait_ms, slowest = self._guard_wait(guard, rates, now_ms)
                    wait_ms = min(wait_ms, max(view.fence_ms, EDGE_MS))
                # A refused put always means some window is full; never answer "retry now".
                wait = max(wait_ms, EDGE_MS) / 1000
                window = self._window_name(slowest or rates[0])
                # Give up at once when the permit frees after the deadline: waiting is useless.
                if waited + wait > wait_s:
                    raise BudgetExhausted(retry_after_s=wait, window=window, priority=priority)
                with self._waits(key, counted=not background):
                    await self._sleep(wait)
                # Count the time we asked to sleep, not the clock: an injected sleep may not
                # move it.
                waited += wait
        finally:
            if queued is not None:
                await self._leave(key, queued)

    @contextmanager
    def _waits(self, key: str, *, counted: bool) -> Iterator[None]:
        """While an interactive call of this process waits for ``key``'s permit."""
        if counted:
            self._waiting[key] += 1
        try:
            yield
        finally:
            if counted:
                self._waiting[key] -= 1
                if not self._waiting[key]:
                    del self._waiting[key]

    async def _leave(self, key: str, waiter: Waiter) -> None:
        """An interactive call that gave up leaves the queue (its lease would end anyway)."""
        try:
            await self._windows.leave(key, waiter)
        except REDIS_ERRORS as error:
            log.info("limiter_queue_leave_failed", key=key, error_type=type(error).__name__)

    async def _yielded(
        self, key: str, wanted: tuple[int, int, int], now_ms: int
    ) -> YieldedToInteractive:
        """The refusal of a background call that yields: retry when the guest's permit frees
        (a second if that cannot be read now)."""
        rates = self._rates(wanted)
        try:
            wait_ms, slowest = await self._windows.wait_ms(key, rates, now_ms=now_ms)
        except REDIS_ERRORS:
            wait_ms, slowest = 1000, None
        return self._yield_error(wait_ms, slowest or rates[0])

    def _yield_error(self, wait_ms: int, window: Rate) -> YieldedToInteractive:
        return YieldedToInteractive(
            retry_after_s=max(wait_ms, EDGE_MS) / 1000,
            window=self._window_name(window),
            priority=Priority.BACKGROUND,
        )

    async def _put(
        self,
        key: str,
        limits: tuple[int, int, int],
        rates: list[Rate],
        now_ms: int,
        *,
        waiter: Waiter | None = None,
        yields: bool = False,
    ) -> bool:
        if self._redis is None:
            return await self._windows.put(key, rates, now_ms=now_ms, waiter=waiter, yields=yields)
        member = self._member(now_ms)
        guard = self._guards.get(key)
        # Outside a guard, a standing fence refuses (and the refusal brings the view to freeze).
        fence_ok = guard is not None and self._guard_wait(guard, rates, now_ms)[0] == 0
        for last_try in (False, False, True):
            try:
                taken = await self._windows.put(
                    key,
                    rates,
                    now_ms=now_ms,
                    member=member,
                    fence_ok=fence_ok,
                    waiter=waiter,
                    yields=yields,
                )
                break
            except WindowLost:
                if last_try:
                    raise
                await self._rebuild(key, limits[-1], now_ms)
        if taken:
            self._remember(key, now_ms, member + "1")
            if guard is not None:
                insort(guard.own, now_ms)
        view = self._windows.view(key)
        fence_down = guard is not None and view is not None and view.fence_ms == 0
        if fence_down and not self._unwritten and not self._outage_noticed:
            # The fence is down and this replica's outage permits are in Redis: whole again.
            del self._guards[key]
        await self._contribute(key)
        return taken

    # --- Redis away and back (module docstring) ------------------------------------------------

    async def _acquire_in_outage(
        self, key: str, limits: WindowLimits, priority: Priority, wait_s: float
    ) -> None:
        """A permit from this replica's outage share of the window it last saw (background
        calls yield to this process's waiting interactive calls)."""
        guard = self._guard(key)
        waited = 0.0
        background = priority is Priority.BACKGROUND
        while True:
            wanted = _limits_tuple(limits)
            rates = self._view(wanted, priority)
            now_ms = self._windows.now_ms()
            if not rates:
                raise OutageBudgetExhausted(
                    retry_after_s=self._health.retry_after_s,
                    window=self._zero_share_window(wanted),
                    priority=priority,
                )
            if background and self._waiting[key]:
                full = self._rates(wanted)
                wait_ms, slowest = self._guard_wait(guard, full, now_ms)
                retry_ms = wait_ms if wait_ms >= 0 else round(self._health.retry_after_s * 1000)
                raise self._yield_error(retry_ms, slowest or full[0])
            wait_ms, slowest = self._guard_wait(guard, rates, now_ms)
            if wait_ms == 0:
                insort(guard.own, now_ms)
                member = self._member(now_ms) + "1"
                self._unwritten.setdefault(key, []).append((now_ms, member))
                self._remember(key, now_ms, member)
                return
            window = self._window_name(slowest or rates[0])
            if wait_ms < 0 or waited + wait_ms / 1000 > wait_s:
                retry = self._health.retry_after_s if wait_ms < 0 else wait_ms / 1000
                raise OutageBudgetExhausted(retry_after_s=retry, window=window, priority=priority)
            with self._waits(key, counted=not background):
                await self._sleep(wait_ms / 1000)
            waited += wait_ms / 1000

    def _noticed_outage(self) -> None:
        """Redis failed: measure the clock offset again once it is back; fence on recovery."""
        self._outage_noticed = True
        if self._windows.offset is not None:
            self._windows.offset.invalidate()

    def _guard(self, key: str) -> _Guard:
        """The key's guard, frozen now from the last view when it has none."""
        guard = self._guards.get(key)
        if guard is None:
            guard = self._guards[key] = _Guard(seen=_frozen(self._windows.view(key)))
        return guard

    def _guard_use(self, guard: _Guard, rates: list[Rate], now_ms: int) -> list[tuple[int, int]]:
        """Per rate: (own permits in the window, the outage share's cap) at ``now_ms``."""
        uses = []
        for rate in rates:
            start = now_ms - rate.interval
            seen = sum(count for stamp, count in guard.seen if stamp >= start)
            own = len(guard.own) - bisect_left(guard.own, start)
            # The epsilon keeps e.g. 10 * 0.3 = 2.999… from losing a permit.
            cap = math.floor(max(0, rate.limit - seen) * self._outage_share + 1e-9)
            uses.append((own, cap))
        return uses

    def _guard_wait(self, guard: _Guard, rates: list[Rate], now_ms: int) -> tuple[int, Rate | None]:
        """Milliseconds until the outage share admits a permit (0: now; -1: not before
        Redis is back), and the window that holds it up."""
        full = [
            rate
            for rate, (own, cap) in zip(rates, self._guard_use(guard, rates, now_ms), strict=True)
            if own + 1 > cap
        ]
        if not full:
            return 0, None
        # The next moments anything changes: a seen or own permit leaving some window.
        moments = sorted(
            {
                stamp + rate.interval + EDGE_MS
                for rate in rates
                for stamp in [*(s for s, _ in guard.seen), *guard.own]
                if stamp + rate.interval + EDGE_MS > now_ms
            }
        )
        for moment in moments:
            uses = self._guard_use(guard, rates, moment)
            if all(own + 1 <= cap for own, cap in uses):
                return moment - now_ms, full[-1]
        return -1, full[0]

    def _member(self, now_ms: int) -> str:
        # Unique per process and permit; the windows append "1" (the permit's weight index).
        return f"{self._instance}:{now_ms}:{next(self._sequence)}:"

    async def _write_unwritten(self) -> None:
        """Write back first: the outage's permits into the Redis windows (they still count),
        then raise the recovery fence, before this replica decides anything new."""
        if self._unwritten:
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
            log.info("limiter_outage_permits_written", permits=sum(map(len, pending.values())))
        if self._outage_noticed:
            await self._windows.raise_fence(self._fence_ms)
            self._outage_noticed = False

    def _write_back_now(self) -> None:
        """Redis answered again to some user of it: write back at once (in a task)."""
        if not self._unwritten and not self._outage_noticed:
            return

        async def write_back() -> None:
            try:
                with self._health.use("write the outage permits back"):
                    await self._write_unwritten()
            except SharedStateUnavailable:
                pass  # the next use of Redis tries again

        task = asyncio.get_running_loop().create_task(write_back(), name="limiter-write-back")
        self._write_backs.add(task)
        task.add_done_callback(self._write_backs.discard)

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
