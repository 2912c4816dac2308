"""Guest calls first: background work gets its share of each window and yields to waiting
interactive calls, in memory and across replicas sharing Redis (docs/requirements.md R7.8)."""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable, Iterator

import pytest
from redis.asyncio import Redis

from pmsgate.clock import ManualClock
from pmsgate.gateway.facilities import Limits
from pmsgate.gateway.limiter import (
    DEFAULT_BACKGROUND_SHARE,
    BudgetExhausted,
    FacilityLimiter,
    Priority,
    YieldedToInteractive,
)
from pmsgate.ratelimit import ClockTime

pytestmark = pytest.mark.anyio

MakeLimiter = Callable[..., FacilityLimiter]
BACKGROUND = Priority.BACKGROUND


@pytest.fixture(params=["memory", "redis"])
def make_limiter(
    request: pytest.FixtureRequest, clock: ManualClock, redis_namespace: str
) -> Iterator[MakeLimiter]:
    """Limiters on one backend; Redis ones share the test's namespace (like replicas)."""
    redis = request.getfixturevalue("redis_client") if request.param == "redis" else None

    def make(**kwargs: object) -> FacilityLimiter:
        kwargs.setdefault("clock", clock)
        kwargs.setdefault("reference", ClockTime(clock))
        return FacilityLimiter(redis=redis, namespace=redis_namespace, **kwargs)  # type: ignore[arg-type]

    yield make


def replica(clock: ManualClock, redis: object, namespace: str, **kwargs: object) -> FacilityLimiter:
    """One replica's limiter on the test Redis (all on the test's clock)."""
    return FacilityLimiter(
        clock=clock,
        redis=redis,  # type: ignore[arg-type]
        namespace=namespace,
        reference=ClockTime(clock),
        **kwargs,  # type: ignore[arg-type]
    )


async def refused(
    limiter: FacilityLimiter, limits: Limits, priority: Priority = Priority.INTERACTIVE
) -> BudgetExhausted:
    with pytest.raises(BudgetExhausted) as caught:
        await limiter.acquire("h1", limits, priority)
    return caught.value


async def take(limiter: FacilityLimiter, limits: Limits, n: int, priority: Priority) -> None:
    for _ in range(n):
        await limiter.acquire("h1", limits, priority)


def yielding_sleep(
    clock: ManualClock, background: Callable[[], Awaitable[None]]
) -> Callable[[float], Awaitable[None]]:
    """A sleep that moves the clock, then runs ``background`` while the caller still waits."""

    async def sleep(seconds: float) -> None:
        clock.advance(seconds)
        await background()

    return sleep


# --- the share ----------------------------------------------------------------------------


async def test_background_work_gets_its_share_of_each_window_rounded_down(
    make_limiter: MakeLimiter, clock: ManualClock
) -> None:
    assert DEFAULT_BACKGROUND_SHARE == 0.3
    limiter = make_limiter()
    limits = Limits()  # 10/min, 300/h, 5,000/day: 3, 90 and 1,500 for background work
    taken = 0
    for hour in range(17):
        for minute in range(30):
            await take(limiter, limits, 3, BACKGROUND)
            taken += 3
            error = await refused(limiter, limits, BACKGROUND)
            assert error.priority is BACKGROUND
            if taken == 1500:
                assert (hour, minute, error.window) == (16, 19, "day")
                break
            assert error.window == ("hour" if minute == 29 else "minute")
            clock.advance(61)
        if taken == 1500:
            break
        clock.advance(3601 - 30 * 61)
    assert taken == 1500
    # Interactive calls still have the rest of every window.
    await take(limiter, limits, 7, Priority.INTERACTIVE)
    assert (await refused(limiter, limits)).window == "minute"
    # The sliding hour holds 90 background permits (30 of the block before) and these 7.
    assert await limiter.remaining("h1", limits) == {"minute": 0, "hour": 203, "day": 3493}


async def test_the_share_is_rounded_down_and_may_leave_background_work_nothing(
    make_limiter: MakeLimiter,
) -> None:
    limiter = make_limiter(background_share=0.3)
    # 7 x 0.3 = 2.1: two background permits a minute.
    seven = Limits(per_minute=7, per_hour=100, per_day=1000)
    await take(limiter, seven, 2, BACKGROUND)
    assert (await refused(limiter, seven, BACKGROUND)).window == "minute"
    # 3 x 0.3 = 0.9: none at all; interactive calls keep all three.
    three = Limits(per_minute=3, per_hour=100, per_day=1000)
    assert (await refused(limiter, three, BACKGROUND)).window == "minute"
    assert await limiter.remaining("h1", three) == {"minute": 1, "hour": 98, "day": 998}


async def test_interactive_calls_may_use_the_whole_budget(
    make_limiter: MakeLimiter, clock: ManualClock
) -> None:
    limiter = make_limiter()
    limits = Limits()
    await take(limiter, limits, 10, Priority.INTERACTIVE)
    assert (await refused(limiter, limits)).window == "minute"
    # Background work took its share first: guests still get the other seven.
    clock.advance(61)
    await take(limiter, limits, 3, BACKGROUND)
    await take(limiter, limits, 7, Priority.INTERACTIVE)
    await refused(limiter, limits)


# --- yielding to a waiting interactive call -------------------------------------------------


async def test_a_waiting_interactive_call_makes_background_work_yield(
    make_limiter: MakeLimiter, clock: ManualClock
) -> None:
    limits = Limits()
    skipped: list[BudgetExhausted] = []

    async def background_meanwhile() -> None:
        # The window has room again, but a guest waits for it: background work is skipped
        # at once, however long it would have waited.
        assert await guest.queued("h1") == 1
        with pytest.raises(YieldedToInteractive) as caught:
            await guest.acquire("h1", limits, BACKGROUND, wait_s=30.0)
        skipped.append(caught.value)

    # A share of 1: only the waiting guest stops background work here.
    guest = make_limiter(background_share=1.0, sleep=yielding_sleep(clock, background_meanwhile))
    await take(guest, limits, 10, Priority.INTERACTIVE)
    clock.advance(59)

    await guest.acquire("h1", limits, wait_s=2.0)

    [error] = skipped
    assert (error.status, error.code, error.priority) == (
        429,
        "upstream_budget_exhausted",
        BACKGROUND,
    )
    assert "background work yields" in error.message
    # The guest has its permit and left the queue: background work goes on.
    assert await guest.queued("h1") == 0
    await guest.acquire("h1", limits, BACKGROUND)
    assert await guest.remaining("h1", limits) == {"minute": 8, "hour": 288, "day": 4988}


async def test_an_interactive_call_that_gives_up_leaves_the_queue(
    make_limiter: MakeLimiter, clock: ManualClock
) -> None:
    limiter = make_limiter(background_share=1.0)
    limits = Limits(per_minute=1, per_hour=100, per_day=1000)
    await limiter.acquire("h1", limits)
    # The permit frees in 60 s, past its 2 s deadline: refused at once, not left queued.
    with pytest.raises(BudgetExhausted):
        await limiter.acquire("h1", limits, wait_s=2.0)
    assert await limiter.queued("h1") == 0
    clock.advance(61)
    await limiter.acquire("h1", limits, BACKGROUND)


# --- across replicas sharing Redis ----------------------------------------------------------


@pytest.mark.redis
async def test_a_guest_waiting_on_one_replica_makes_background_work_on_another_yield(
    clock: ManualClock, redis_client: object, redis_namespace: str
) -> None:
    limits = Limits()
    jobs = replica(clock, redis_client, redis_namespace, background_share=1.0)
    skipped: list[BudgetExhausted] = []

    async def background_meanwhile() -> None:
        assert await jobs.queued("h1") == 1
        with pytest.raises(YieldedToInteractive) as caught:
            await jobs.acquire("h1", limits, BACKGROUND, wait_s=30.0)
        skipped.append(caught.value)

    guest = replica(
        clock, redis_client, redis_namespace, sleep=yielding_sleep(clock, background_meanwhile)
    )
    await take(guest, limits, 10, Priority.INTERACTIVE)
    clock.advance(59)

    await guest.acquire("h1", limits, wait_s=2.0)

    assert len(skipped) == 1
    assert await jobs.queued("h1") == 0
    await jobs.acquire("h1", limits, BACKGROUND)
    for limiter in (guest, jobs):
        assert await limiter.remaining("h1", limits) == {"minute": 8, "hour": 288, "day": 4988}


@pytest.mark.redis
async def test_two_replicas_background_work_shares_one_share(
    clock: ManualClock, redis_client: object, redis_namespace: str
) -> None:
    limits = Limits()
    replicas = [replica(clock, redis_client, redis_namespace) for _ in range(2)]
    granted = 0
    for _ in range(3):
        for limiter in replicas:
            try:
                await limiter.acquire("h1", limits, BACKGROUND)
            except BudgetExhausted:
                continue
            granted += 1
    assert granted == 3  # 3 of 10 a minute, whichever replica asks
    # Interactive calls on either replica use the other seven.
    await take(replicas[0], limits, 4, Priority.INTERACTIVE)
    await take(replicas[1], limits, 3, Priority.INTERACTIVE)
    await refused(replicas[0], limits)


async def test_while_redis_is_away_background_work_yields_to_this_replicas_waiting_guests(
    clock: ManualClock,
) -> None:
    limits = Limits()
    skipped: list[BudgetExhausted] = []

    async def background_meanwhile() -> None:
        with pytest.raises(YieldedToInteractive) as caught:
            await limiter.acquire("h1", limits, BACKGROUND, wait_s=30.0)
        skipped.append(caught.value)

    with socket.socket() as probe:  # a port nothing listens on: Redis is unreachable
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    limiter = FacilityLimiter(
        clock=clock,
        redis=Redis(port=port, socket_connect_timeout=0.2),
        reference=ClockTime(clock),
        outage_share=0.5,
        background_share=1.0,
        sleep=yielding_sleep(clock, background_meanwhile),
    )
    await take(limiter, limits, 5, Priority.INTERACTIVE)  # the outage share: 5 of 10
    clock.advance(59)

    await limiter.acquire("h1", limits, wait_s=2.0)

    [error] = skipped
    assert error.priority is BACKGROUND
    await limiter.acquire("h1", limits, BACKGROUND)
