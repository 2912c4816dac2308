"""The per-facility limiter: three windows, Retry-After, priorities, shared through Redis."""

from __future__ import annotations

import datetime as dt
from bisect import bisect_right
from collections.abc import Awaitable, Callable, Iterator

import anyio
import pytest
from redis.asyncio import Redis

from pmsgate.clock import ManualClock, SystemClock
from pmsgate.gateway.facilities import Limits
from pmsgate.gateway.limiter import BudgetExhausted, FacilityLimiter, Priority
from pmsgate.ratelimit import ClockTime
from tests.support.clocks import SkewedClock

pytestmark = pytest.mark.anyio

MakeLimiter = Callable[..., FacilityLimiter]


@pytest.fixture
def make_limiter(
    redis_or_memory: Redis | None, clock: ManualClock, redis_namespace: str
) -> Iterator[MakeLimiter]:
    """Builds limiters on one backend; Redis ones share the test's namespace (like replicas)."""

    def make(**kwargs: object) -> FacilityLimiter:
        kwargs.setdefault("clock", clock)
        # The replicas' shared clock is the test's (Redis's TIME would not follow it).
        kwargs.setdefault("reference", ClockTime(clock))
        return FacilityLimiter(redis=redis_or_memory, namespace=redis_namespace, **kwargs)  # type: ignore[arg-type]

    yield make


def clock_sleep(clock: ManualClock, slept: list[float]) -> Callable[[float], Awaitable[None]]:
    """A sleep that moves the manual clock instead of waiting (and records each wait)."""

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.advance(seconds)

    return sleep


@pytest.fixture
def limiter(make_limiter: MakeLimiter) -> FacilityLimiter:
    """A limiter with the default settings on the test's backend."""
    return make_limiter()


async def take(limiter: FacilityLimiter, key: str, limits: Limits, n: int) -> None:
    for _ in range(n):
        await limiter.acquire(key, limits)


async def refused(
    limiter: FacilityLimiter,
    key: str,
    limits: Limits,
    priority: Priority = Priority.INTERACTIVE,
) -> BudgetExhausted:
    with pytest.raises(BudgetExhausted) as caught:
        await limiter.acquire(key, limits, priority)
    return caught.value


async def test_each_window_admits_exactly_its_limit(
    limiter: FacilityLimiter, clock: ManualClock
) -> None:
    limits = Limits(per_minute=3, per_hour=5, per_day=7)

    await take(limiter, "h1", limits, 3)
    assert (await refused(limiter, "h1", limits)).window == "minute"

    clock.advance(61)
    await take(limiter, "h1", limits, 2)
    assert (await refused(limiter, "h1", limits)).window == "hour"

    clock.advance(3600)
    await take(limiter, "h1", limits, 2)
    assert (await refused(limiter, "h1", limits)).window == "day"

    clock.advance(86400)
    await take(limiter, "h1", limits, 3)


async def test_spec_limits_are_10_per_minute_300_per_hour_5000_per_day(
    limiter: FacilityLimiter, clock: ManualClock
) -> None:
    limits = Limits()
    taken = 0
    for hour in range(17):
        for minute in range(30 if hour < 16 else 20):
            await take(limiter, "h1", limits, 10)
            taken += 10
            error = await refused(limiter, "h1", limits)
            if taken == 5000:
                assert error.window == "day"
            elif minute == 29:
                assert error.window == "hour"
            else:
                assert error.window == "minute"
            # A permit counts for 60 s and the edge margin (0.5 s); it has left at 61 s.
            clock.advance(61)
        clock.advance(3601 - 30 * 61)
    assert taken == 5000


async def test_refusal_says_when_a_permit_frees_as_retry_after(
    limiter: FacilityLimiter, clock: ManualClock
) -> None:
    limits = Limits(per_minute=2, per_hour=100, per_day=1000)
    await limiter.acquire("h1", limits)
    clock.advance(20)
    await limiter.acquire("h1", limits)

    error = await refused(limiter, "h1", limits)
    # The first permit leaves the minute window 40 s, the edge margin (0.5 s) and a
    # millisecond from now.
    assert error.retry_after_s == pytest.approx(40.501)
    assert error.code == "upstream_budget_exhausted"
    assert error.status == 429
    assert error.headers == {"Retry-After": "41"}
    assert error.to_body()["error"]["code"] == "upstream_budget_exhausted"

    clock.advance(40.5)
    assert (await refused(limiter, "h1", limits)).headers == {"Retry-After": "1"}
    clock.advance(0.001)
    await limiter.acquire("h1", limits)


async def test_retry_after_is_when_every_window_has_room(
    limiter: FacilityLimiter, clock: ManualClock
) -> None:
    limits = Limits(per_minute=2, per_hour=2, per_day=10)
    await take(limiter, "h1", limits, 2)
    # Both the minute and the hour are full: only the hour's answer is true.
    error = await refused(limiter, "h1", limits)
    assert error.window == "hour"
    assert error.retry_after_s == pytest.approx(3600.501)


ONE_A_MINUTE = Limits(per_minute=1, per_hour=100, per_day=1000)


@pytest.fixture
async def minute_spent(
    make_limiter: MakeLimiter, clock: ManualClock
) -> tuple[FacilityLimiter, list[float]]:
    """A limiter whose waits move the clock, with the one permit of this minute taken; the
    limiter and every wait it asked for."""
    slept: list[float] = []
    limiter = make_limiter(sleep=clock_sleep(clock, slept))
    await limiter.acquire("h1", ONE_A_MINUTE)
    return limiter, slept


async def test_a_caller_waits_up_to_its_deadline_for_a_permit(
    minute_spent: tuple[FacilityLimiter, list[float]], clock: ManualClock
) -> None:
    limiter, slept = minute_spent
    clock.advance(59)
    await limiter.acquire("h1", ONE_A_MINUTE, wait_s=2.0)
    assert slept == [pytest.approx(1.501)]


async def test_a_caller_does_not_wait_for_a_permit_beyond_its_deadline(
    minute_spent: tuple[FacilityLimiter, list[float]],
) -> None:
    limiter, slept = minute_spent
    with pytest.raises(BudgetExhausted) as caught:
        await limiter.acquire("h1", ONE_A_MINUTE, wait_s=2.0)
    assert caught.value.retry_after_s == pytest.approx(60.501)
    assert slept == []


async def test_background_calls_cannot_starve_interactive_calls(make_limiter: MakeLimiter) -> None:
    limiter = make_limiter(background_share=0.5)
    limits = Limits(per_minute=10, per_hour=300, per_day=5000)

    for _ in range(5):
        await limiter.acquire("h1", limits, Priority.BACKGROUND)
    error = await refused(limiter, "h1", limits, Priority.BACKGROUND)
    assert error.window == "minute"
    assert error.priority is Priority.BACKGROUND

    await take(limiter, "h1", limits, 5)
    await refused(limiter, "h1", limits)
    assert await limiter.remaining("h1", limits) == {"minute": 0, "hour": 290, "day": 4990}


async def test_interactive_calls_may_use_the_background_share(
    make_limiter: MakeLimiter,
) -> None:
    limiter = make_limiter(background_share=0.5)
    limits = Limits(per_minute=10, per_hour=300, per_day=5000)
    await take(limiter, "h1", limits, 10)
    await refused(limiter, "h1", limits, Priority.BACKGROUND)
    await refused(limiter, "h1", limits)


async def test_changed_limits_take_effect_on_the_next_call(limiter: FacilityLimiter) -> None:
    await take(limiter, "h1", Limits(per_minute=5, per_hour=50, per_day=500), 5)
    await refused(limiter, "h1", Limits(per_minute=5, per_hour=50, per_day=500))

    raised = Limits(per_minute=8, per_hour=50, per_day=500)
    await take(limiter, "h1", raised, 3)
    await refused(limiter, "h1", raised)

    # Permits already taken still count under the new, lower limits.
    lowered = Limits(per_minute=2, per_hour=50, per_day=500)
    assert await limiter.remaining("h1", lowered) == {"minute": 0, "hour": 42, "day": 492}
    await refused(limiter, "h1", lowered)


async def test_facilities_have_separate_budgets(limiter: FacilityLimiter) -> None:
    limits = Limits(per_minute=2, per_hour=50, per_day=500)
    await take(limiter, "h1", limits, 2)
    await refused(limiter, "h1", limits)
    await take(limiter, "h2", limits, 2)


async def test_remaining_counts_each_window(limiter: FacilityLimiter, clock: ManualClock) -> None:
    limits = Limits()
    assert await limiter.remaining("h1", limits) == {"minute": 10, "hour": 300, "day": 5000}
    await take(limiter, "h1", limits, 4)
    clock.advance(61)
    await take(limiter, "h1", limits, 1)
    assert await limiter.remaining("h1", limits) == {"minute": 9, "hour": 295, "day": 4995}


async def test_concurrent_callers_never_get_more_than_the_limit(
    limiter: FacilityLimiter,
) -> None:
    limits = Limits(per_minute=10, per_hour=300, per_day=5000)
    granted: list[str] = []

    async def call() -> None:
        try:
            await limiter.acquire("h1", limits)
        except BudgetExhausted:
            return
        granted.append("ok")

    async with anyio.create_task_group() as tg:
        for _ in range(100):
            tg.start_soon(call)
    assert len(granted) == 10


async def test_two_replicas_sharing_redis_never_grant_more_than_the_limit_together(
    redis_client: object, redis_namespace: str, clock: ManualClock
) -> None:
    replicas = [
        FacilityLimiter(
            clock=clock,
            redis=redis_client,  # type: ignore[arg-type]
            namespace=redis_namespace,
            reference=ClockTime(clock),
        )
        for _ in range(2)
    ]
    limits = Limits(per_minute=10, per_hour=15, per_day=5000)
    granted: list[int] = []

    async def call(replica: int) -> None:
        try:
            await replicas[replica].acquire("h1", limits)
        except BudgetExhausted:
            return
        granted.append(replica)

    async def burst() -> None:
        async with anyio.create_task_group() as tg:
            for i in range(60):
                tg.start_soon(call, i % 2)

    await burst()
    assert len(granted) == 10
    assert set(granted) == {0, 1}

    clock.advance(61)
    granted.clear()
    await burst()
    assert len(granted) == 5  # the hour allows 15 in all
    for replica in replicas:
        assert await replica.remaining("h1", limits) == {"minute": 5, "hour": 0, "day": 4985}


# --- the window edge and clock skew between replicas (issue 12 item 1) ---


async def test_a_permit_counts_for_its_window_and_the_edge_margin(
    make_limiter: MakeLimiter, clock: ManualClock
) -> None:
    limiter = make_limiter(edge_margin_s=0.25)
    limits = Limits(per_minute=2, per_hour=100, per_day=1000)
    await take(limiter, "h1", limits, 2)

    clock.advance(60.25)
    error = await refused(limiter, "h1", limits)
    assert error.retry_after_s == pytest.approx(0.001)
    assert await limiter.remaining("h1", limits) == {"minute": 0, "hour": 98, "day": 998}
    clock.advance(0.001)
    assert await limiter.remaining("h1", limits) == {"minute": 2, "hour": 98, "day": 998}
    await take(limiter, "h1", limits, 2)


async def test_the_default_edge_margin_is_half_a_second(
    limiter: FacilityLimiter, clock: ManualClock
) -> None:
    limits = Limits(per_minute=1, per_hour=100, per_day=1000)
    await limiter.acquire("h1", limits)
    clock.advance(60.2)
    assert (await refused(limiter, "h1", limits)).retry_after_s == pytest.approx(0.301)
    clock.advance(0.301)
    await limiter.acquire("h1", limits)


def test_the_edge_margin_must_be_below_a_minute(clock: ManualClock) -> None:
    with pytest.raises(ValueError, match="edge_margin_s"):
        FacilityLimiter(clock=clock, edge_margin_s=60)
    with pytest.raises(ValueError, match="edge_margin_s"):
        FacilityLimiter(clock=clock, edge_margin_s=-0.1)


def most_in_any_window(admitted: list[dt.datetime], window_s: float) -> int:
    """The most permits whose real times fit in one closed window of ``window_s``."""
    times = sorted(admitted)
    span = dt.timedelta(seconds=window_s)
    return max((bisect_right(times, t + span) - i for i, t in enumerate(times)), default=0)


async def hammer(
    replicas: list[FacilityLimiter],
    clock: ManualClock,
    limits: Limits,
    duration_s: float,
    near_s: float = 0.2,
) -> list[dt.datetime]:
    """Every replica calls until refused, again and again, for ``duration_s`` of real time.

    The real (manual) clock jumps to ``near_s`` before the earliest moment some replica
    expects a free permit, then moves in 1 ms steps, so every window edge is hammered
    millisecond by millisecond without sleeping. Returns the real time of each permit.
    """
    admitted: list[dt.datetime] = []
    end = clock.now() + dt.timedelta(seconds=duration_s)
    while clock.now() < end:
        for replica in replicas:
            for _ in range(limits.per_minute + 1):
                try:
                    await replica.acquire("h1", limits)
                except BudgetExhausted:
                    break
                admitted.append(clock.now())
        waits = [await replica.retry_after("h1", limits) for replica in replicas]
        clock.advance(max(0.001, min(waits) - near_s))
    return admitted


def skewed_replicas(
    redis: Redis, namespace: str, clock: ManualClock, offsets_s: tuple[float, ...]
) -> list[FacilityLimiter]:
    """Replicas on one Redis, each on its own clock ``offset`` off the shared one.

    The shared clock is the test's manual clock (the reference each replica measures its
    offset to; in production, Redis's TIME, which a test cannot move).
    """
    return [
        FacilityLimiter(
            clock=SkewedClock(clock, offset),
            redis=redis,
            namespace=namespace,
            reference=ClockTime(clock),
        )
        for offset in offsets_s
    ]


SKEWS = pytest.mark.parametrize(
    "offsets_s",
    [
        (-0.05, 0.05),
        (0.0, 0.005),
        (0.0, 2.0),
        (0.0, -2.0),
        (0.0, 30.0),
        (0.0, -30.0),
    ],
    ids=["-50ms/+50ms", "0/+5ms", "0/+2s", "0/-2s", "0/+30s", "0/-30s"],
)


Hammer = Callable[..., Awaitable[tuple[list[FacilityLimiter], list[dt.datetime]]]]


@pytest.fixture
def skewed(
    redis_client: Redis, redis_namespace: str, clock: ManualClock, offsets_s: tuple[float, ...]
) -> Hammer:
    """Hammers (see :func:`hammer`) replicas whose clocks are ``offsets_s`` off the shared
    one; the replicas and the real time of each permit they were given."""

    async def run(
        limits: Limits, **options: float
    ) -> tuple[list[FacilityLimiter], list[dt.datetime]]:
        replicas = skewed_replicas(redis_client, redis_namespace, clock, offsets_s)
        return replicas, await hammer(replicas, clock, limits, **options)

    return run


@pytest.mark.redis
@SKEWS
async def test_replicas_with_skewed_clocks_never_exceed_the_minute_limit_together(
    skewed: Hammer, offsets_s: tuple[float, ...]
) -> None:
    limits = Limits(per_minute=10, per_hour=300, per_day=5000)
    replicas, admitted = await skewed(limits, duration_s=200)

    assert most_in_any_window(admitted, 60) == 10
    # The budget is still used: 10 permits a minute (a little over a minute apart).
    assert len(admitted) == 40
    assert {replica.clock_offset_ms for replica in replicas} == {
        round(-offset * 1000) for offset in offsets_s
    }


@pytest.mark.redis
@SKEWS
async def test_replicas_with_skewed_clocks_never_exceed_the_hour_limit_together(
    skewed: Hammer, offsets_s: tuple[float, ...]
) -> None:
    limits = Limits(per_minute=5, per_hour=8, per_day=1000)
    _, admitted = await skewed(limits, duration_s=3 * 3600)

    assert most_in_any_window(admitted, 3600) == 8
    assert most_in_any_window(admitted, 60) == 5
    assert len(admitted) == 24


@pytest.mark.redis
@pytest.mark.parametrize("offsets_s", [(0.0, 2.0), (0.0, -30.0)], ids=["0/+2s", "0/-30s"])
async def test_replicas_with_skewed_clocks_hold_the_spec_limits_in_every_window(
    skewed: Hammer, offsets_s: tuple[float, ...]
) -> None:
    """10/min, 300/h and 5,000/day per facility, hammered for 26 hours on two clocks."""
    limits = Limits(per_minute=10, per_hour=300, per_day=5000)
    # 2 ms before each edge, not 200: a day of edges hammered millisecond by millisecond
    # would take minutes; the minute and hour tests above hammer them closely.
    _, admitted = await skewed(limits, duration_s=26 * 3600, near_s=0.002)

    assert most_in_any_window(admitted, 60) == 10
    assert most_in_any_window(admitted, 3600) == 300
    assert most_in_any_window(admitted, 86400) == 5000


@pytest.mark.redis
@pytest.mark.parametrize("offset_s", [30.0, -30.0, 2.0])
async def test_each_replica_measures_its_offset_to_redis_time(
    redis_client: Redis, redis_namespace: str, offset_s: float
) -> None:
    """On real clocks: a replica 30 s off learns it from Redis's TIME, and its permits
    count for a replica on time as if it were on time too."""
    off, on_time = (
        FacilityLimiter(
            clock=SkewedClock(SystemClock(), offset),
            redis=redis_client,
            namespace=redis_namespace,
        )
        for offset in (offset_s, 0.0)
    )
    limits = Limits(per_minute=3, per_hour=100, per_day=1000)
    await take(off, "h1", limits, 2)
    await take(on_time, "h1", limits, 1)
    assert (await refused(on_time, "h1", limits)).window == "minute"
    assert (await refused(off, "h1", limits)).window == "minute"
    # The same host: both offsets are within a few milliseconds of what was set.
    local_to_redis = on_time.clock_offset_ms
    assert abs(local_to_redis) < 1000  # Redis runs on this machine's clock
    assert off.clock_offset_ms - local_to_redis == pytest.approx(-offset_s * 1000, abs=50)
    # Each replica's refusal names the same moment: the first permit leaving the minute.
    waits = [await replica.retry_after("h1", limits) for replica in (off, on_time)]
    assert waits[0] == pytest.approx(waits[1], abs=0.1)
    assert 59 < waits[0] <= 60.501


@pytest.mark.redis
async def test_a_permit_stamped_in_the_future_by_a_replica_ahead_still_counts(
    redis_client: Redis, redis_namespace: str, clock: ManualClock
) -> None:
    # Each replica on its own clock (no reference to correct them): a clock 30 s ahead stamps
    # its permits in the others' future; they must still count for the rest.
    ahead, behind = (
        FacilityLimiter(
            clock=SkewedClock(clock, offset),
            redis=redis_client,
            namespace=redis_namespace,
            reference=ClockTime(SkewedClock(clock, offset)),
        )
        for offset in (30.0, 0.0)
    )
    limits = Limits(per_minute=3, per_hour=100, per_day=1000)
    await take(ahead, "h1", limits, 3)
    assert (await refused(behind, "h1", limits)).window == "minute"
    assert await behind.remaining("h1", limits) == {"minute": 0, "hour": 97, "day": 997}
