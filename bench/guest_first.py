"""Guest calls first: background work beside guests' calls on one facility's budget.

One facility (10/min, 300/h, 5,000/day) over ``--minutes`` of simulated time, on the real
:class:`~pmsgate.gateway.limiter.FacilityLimiter` — in memory, or two limiters sharing
Redis (guests' calls on one replica, background work on the other), on one
:class:`~pmsgate.clock.ManualClock`. Time is discrete-event: every call is a task, a
task's waits go through a virtual sleep, and the clock jumps to the next wake-up or
arrival only once every task is asleep or done, so concurrent waits overlap as they would
in real time and the run is deterministic (same seed, same figures).

The workload (seeded):

- **guests' calls** (interactive, ``wait_s`` 2 s like the gateway's
  ``PMSGATE_LIMITER_WAIT_S``): Poisson arrivals, ``--guest-rate`` a minute (3), plus a burst
  of 5 calls within 10 s in one minute of five (about 4 a minute in all);
- **background work**: a reservation-window refresh ahead of need every 45 s (two pages,
  one after the other, the second only if the first had its permit), the connection check
  every 15 min, and a job of 4 requests every 2 min (each ``wait_s`` 2 s).

It runs three times: ``classed`` (background work asks as BACKGROUND: the default share
0.3 and the yield), ``yield-only`` (BACKGROUND with a share of 1: the yield alone) and
``unclassed`` (every request asks as INTERACTIVE: background work spends the same budget
as guests, as before the classes). Reported per run: guests' calls granted at once,
after a wait, refused; background requests granted, skipped (yielded to a waiting guest),
refused (share spent); the most background permits in any sliding minute and hour; and
**background permits taken while a guest was waiting** — a guest is counted as waiting
from its first sleep to its permit (or refusal), a background permit at its grant; any
such permit is one a waiting guest may have needed (a background permit at the very
simulated second a guest got its own counts only for a refused guest: in Redis the two
replicas' answers arrive in either order, and the guest was served at that second anyway);
and the guests who waited or were
refused while the sliding minute they arrived in held background permits (taken *before*
they arrived: the share's price, which no rule short of a share of 0 removes). Wall time
is not the point (Redis round trips on a shared machine).

Run: ``uv run python -m bench.guest_first [--backend memory|redis] [--minutes 180]
[--json out.json]``; Redis from ``PMSGATE_REDIS_URL`` (default redis://127.0.0.1:6379/0),
keys under ``pmsgate-bench-guest-first-*`` (deleted afterwards). Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import itertools
import json
import os
import random
import time
import uuid
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from redis.asyncio import Redis

from pmsgate.clock import ManualClock
from pmsgate.gateway.facilities import Limits
from pmsgate.gateway.limiter import BudgetExhausted, FacilityLimiter, Priority, YieldedToInteractive
from pmsgate.ratelimit import ClockTime

KEY = "bench-hotel"
LIMITS = Limits()
WAIT_S = 2.0
Mode = Literal["classed", "yield-only", "unclassed"]


class VirtualTime:
    """Discrete-event time on a ManualClock: sleeps wake when every task is asleep."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.start = clock.now()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._arrivals: list[tuple[float, int, Callable[[], Coroutine[Any, Any, None]]]] = []
        self._seq = itertools.count()
        self._live = 0
        self._asleep = 0
        self._settled = asyncio.Event()  # every live task is asleep

    def _check(self) -> None:
        if self._live <= self._asleep:
            self._settled.set()

    def now_s(self) -> float:
        return (self.clock.now() - self.start).total_seconds()

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now_s() + seconds, next(self._seq), future))
        self._asleep += 1
        self._check()
        # Counted awake again by the driver as it wakes the task, not when the task runs: the
        # driver must not move the clock on before every woken task had its turn.
        await future

    def at(self, when_s: float, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        heapq.heappush(self._arrivals, (when_s, next(self._seq), work))

    def _spawn(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._live += 1
        task = asyncio.get_running_loop().create_task(work())

        def done(finished: asyncio.Task[None]) -> None:
            self._live -= 1
            self._check()
            if not finished.cancelled() and finished.exception() is not None:
                raise finished.exception()  # type: ignore[misc]

        task.add_done_callback(done)

    async def run(self) -> None:
        while self._arrivals or self._sleepers or self._live:
            # Let every running task reach a sleep or its end (Redis answers take real time).
            if self._live > self._asleep:
                self._settled.clear()
                await self._settled.wait()
            moments = [q[0][0] for q in (self._arrivals, self._sleepers) if q]
            if not moments:
                continue
            moment = min(moments)
            if moment > self.now_s():
                self.clock.set(self.start + timedelta(seconds=moment))
            while self._sleepers and self._sleepers[0][0] <= moment:
                heapq.heappop(self._sleepers)[2].set_result(None)
                self._asleep -= 1
            while self._arrivals and self._arrivals[0][0] <= moment:
                self._spawn(heapq.heappop(self._arrivals)[2])


@dataclass
class Figures:
    mode: str
    backend: str
    minutes: int
    guests: Counter[str] = field(default_factory=Counter)
    guest_wait_s: float = 0.0
    background: Counter[str] = field(default_factory=Counter)
    background_by_kind: dict[str, Counter[str]] = field(default_factory=dict)
    max_background_per_minute: int = 0
    max_background_per_hour: int = 0
    background_taken_while_a_guest_waited: int = 0
    guests_short_with_background_in_their_minute: int = 0
    minutes_with_a_guest_refused: int = 0
    wall_s: float = 0.0


def workload(minutes: int, guest_rate: float, seed: int) -> list[tuple[float, str, int]]:
    """(when, kind, requests): guests' calls and background work, seeded."""
    rng = random.Random(seed)
    events: list[tuple[float, str, int]] = []
    t = 0.0
    while True:
        t += rng.expovariate(guest_rate / 60)
        if t >= minutes * 60:
            break
        events.append((t, "guest", 1))
    for minute in range(minutes):
        if rng.random() < 0.2:
            start = minute * 60 + rng.uniform(0, 50)
            events.extend((start + rng.uniform(0, 10), "guest", 1) for _ in range(5))
    for i in range(int(minutes * 60 / 45)):
        events.append((i * 45 + rng.uniform(0, 5), "window_refresh", 2))
    for i in range(0, minutes, 15):
        events.append((i * 60 + 30, "connection_check", 1))
    for i in range(0, minutes, 2):
        events.append((i * 60 + 20 + rng.uniform(0, 10), "job", 4))
    return sorted(events)


async def simulate(
    mode: Mode, backend: str, minutes: int, guest_rate: float, seed: int, redis_url: str
) -> Figures:
    clock = ManualClock()
    vt = VirtualTime(clock)
    namespace = f"pmsgate-bench-guest-first-{uuid.uuid4().hex[:8]}"
    redis = Redis.from_url(redis_url) if backend == "redis" else None
    seq = itertools.count()
    # Each guest's first sleep (event order): from then on it is waiting, and queued.
    first_sleep: dict[asyncio.Task[Any] | None, int] = {}
    guest_tasks: set[asyncio.Task[Any] | None] = set()

    async def sleep(seconds: float) -> None:
        task = asyncio.current_task()
        if task in guest_tasks and task not in first_sleep:
            first_sleep[task] = next(seq)
        await vt.sleep(seconds)

    def limiter() -> FacilityLimiter:
        return FacilityLimiter(
            clock=clock,
            redis=redis,
            namespace=namespace,
            sleep=sleep,
            reference=ClockTime(clock),
            background_share=1.0 if mode == "yield-only" else 0.3,
        )

    guests_limiter = limiter()
    # Two replicas sharing Redis: background work on the other one.
    background_limiter = limiter() if redis is not None else guests_limiter
    figures = Figures(mode=mode, backend=backend, minutes=minutes)
    # A guest who slept: its first sleep and its end in event order, the simulated second it
    # ended (its permit or its refusal), and whether it was refused.
    waits: list[tuple[int, int, float, bool]] = []
    background_grants: list[tuple[int, float]] = []  # (event order, simulated second)
    refused_minutes: set[int] = set()
    short: list[float] = []  # arrival of each guest who waited or was refused

    async def guest() -> None:
        arrived = vt.now_s()
        task = asyncio.current_task()
        guest_tasks.add(task)
        try:
            await guests_limiter.acquire(KEY, LIMITS, Priority.INTERACTIVE, wait_s=WAIT_S)
            outcome = "waited" if vt.now_s() > arrived else "at_once"
            figures.guest_wait_s += vt.now_s() - arrived
        except BudgetExhausted:
            outcome = "refused"
            refused_minutes.add(int(arrived // 60))
        figures.guests[outcome] += 1
        if outcome != "at_once":
            short.append(arrived)
        guest_tasks.discard(task)
        if task in first_sleep:
            waits.append((first_sleep.pop(task), next(seq), vt.now_s(), outcome == "refused"))

    def background(kind: str, requests: int) -> Callable[[], Coroutine[Any, Any, None]]:
        priority = Priority.INTERACTIVE if mode == "unclassed" else Priority.BACKGROUND

        async def run() -> None:
            tally = figures.background_by_kind.setdefault(kind, Counter())
            for _ in range(requests):
                try:
                    await background_limiter.acquire(KEY, LIMITS, priority, wait_s=WAIT_S)
                except YieldedToInteractive:
                    outcome = "yielded"
                except BudgetExhausted:
                    outcome = "refused"
                else:
                    outcome = "granted"
                    background_grants.append((next(seq), vt.now_s()))
                figures.background[outcome] += 1
                tally[outcome] += 1
                if outcome != "granted":
                    break  # a refresh or job stops at its first refusal

        return run

    for when, kind, requests in workload(minutes, guest_rate, seed):
        vt.at(when, guest if kind == "guest" else background(kind, requests))
    started = time.perf_counter()
    await vt.run()
    figures.wall_s = round(time.perf_counter() - started, 1)

    figures.background_taken_while_a_guest_waited = sum(
        1
        for order, second in background_grants
        for start, end, end_s, refused in waits
        # After the guest's first sleep, and before the moment it got its permit; a refused
        # guest, before its refusal in the event order (see the module docstring).
        if start < order and (second < end_s or (refused and order < end))
    )
    stamps = sorted(second for _, second in background_grants)
    for window, attr in ((60.5, "max_background_per_minute"), (3600.5, "max_background_per_hour")):
        most = max(
            (i - bisect_left(stamps, s - window) + 1 for i, s in enumerate(stamps)), default=0
        )
        setattr(figures, attr, most)
    figures.minutes_with_a_guest_refused = len(refused_minutes)
    figures.guests_short_with_background_in_their_minute = sum(
        1 for t in short if bisect_left(stamps, t + 1e-9) > bisect_left(stamps, t - 60.5)
    )
    if redis is not None:
        keys = [k async for k in redis.scan_iter(match=f"{namespace}*")]
        if keys:
            await redis.delete(*keys)
        await redis.aclose()
    return figures


def show(f: Figures) -> None:
    g, b = f.guests, f.background
    total = sum(g.values())
    print(
        f"{f.backend:6} {f.mode:9} guests {total}: at once {g['at_once']}, after a wait "
        f"{g['waited']}, refused {g['refused']} ({f.minutes_with_a_guest_refused} minutes); "
        f"background granted {b['granted']}, yielded {b['yielded']}, refused {b['refused']}; "
        f"max background/min {f.max_background_per_minute}, /h {f.max_background_per_hour}; "
        f"background permits while a guest waited: {f.background_taken_while_a_guest_waited}, "
        f"guests short with background in their minute: "
        f"{f.guests_short_with_background_in_their_minute} "
        f"({f.wall_s} s)"
    )


async def main(args: argparse.Namespace) -> list[dict[str, Any]]:
    url = os.environ.get("PMSGATE_REDIS_URL", "redis://127.0.0.1:6379/0")
    results: list[dict[str, Any]] = []
    backends = ["memory", "redis"] if args.backend == "both" else [args.backend]
    for backend in backends:
        for mode in ("classed", "yield-only", "unclassed"):
            figures = await simulate(mode, backend, args.minutes, args.guest_rate, args.seed, url)
            show(figures)
            results.append(
                {
                    **vars(figures),
                    "guests": dict(figures.guests),
                    "background": dict(figures.background),
                    "background_by_kind": {
                        kind: dict(tally) for kind, tally in figures.background_by_kind.items()
                    },
                }
            )
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["memory", "redis", "both"], default="both")
    parser.add_argument("--minutes", type=int, default=180)
    parser.add_argument("--guest-rate", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--json")
    arguments = parser.parse_args()
    runs = asyncio.run(main(arguments))
    if arguments.json:
        figures = {"seed": arguments.seed, "guest_rate": arguments.guest_rate, "runs": runs}
        Path(arguments.json).write_text(json.dumps(figures, indent=1) + "\n")
