"""RateWindows, the one rate primitive: the same contract in memory and in Redis."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pyrate_limiter import Rate
from redis.exceptions import NoScriptError

from pmsgate.clock import ManualClock
from pmsgate.ratelimit import ClockTime, RateWindows, Waiter, WindowLost, Yielded
from pmsgate.sandbox.customers import ClockSleep

pytestmark = pytest.mark.anyio

MINUTE = Rate(3, 60_000)
HOUR = Rate(5, 3_600_000)
MakeWindows = Callable[..., RateWindows]


@pytest.fixture
def make_windows(
    redis_or_memory: Any, clock: ManualClock, redis_namespace: str
) -> Iterator[MakeWindows]:
    """Builds windows on one backend; Redis ones share the test's namespace (like replicas)."""

    def make(**kwargs: object) -> RateWindows:
        kwargs.setdefault("clock", clock)
        kwargs.setdefault("retention_ms", HOUR.interval)
        return RateWindows(redis=redis_or_memory, key_prefix=f"{redis_namespace}:w", **kwargs)  # type: ignore[arg-type]

    yield make


def in_redis(clock: ManualClock, redis: object, namespace: str, **kwargs: Any) -> RateWindows:
    """Windows in the test Redis, under the test's namespace."""
    return RateWindows(
        clock=clock,
        retention_ms=HOUR.interval,
        redis=redis,  # type: ignore[arg-type]
        key_prefix=f"{namespace}:w",
        **kwargs,
    )


async def test_a_permit_is_taken_only_when_every_rate_has_room(
    make_windows: MakeWindows, clock: ManualClock
) -> None:
    windows = make_windows()
    assert [await windows.put("k", [MINUTE, HOUR]) for _ in range(4)] == [True] * 3 + [False]
    assert await windows.counts("k", [MINUTE, HOUR]) == [3, 3]
    wait, slowest = await windows.wait_ms("k", [MINUTE, HOUR])
    assert (wait, slowest) == (60_001, MINUTE)
    clock.advance(60.001)
    assert await windows.wait_ms("k", [MINUTE, HOUR]) == (0, None)
    assert await windows.put("k", [MINUTE, HOUR])
    assert await windows.put("k", [MINUTE, HOUR])
    clock.advance(60.001)
    # The minute has room again; the hour holds five permits.
    assert await windows.counts("k", [MINUTE, HOUR]) == [0, 5]
    assert not await windows.put("k", [MINUTE, HOUR])
    assert (await windows.wait_ms("k", [MINUTE, HOUR]))[1] is HOUR
    # Other keys have their own history.
    assert await windows.put("other", [MINUTE, HOUR])


async def test_two_rate_lists_see_one_history(make_windows: MakeWindows) -> None:
    windows = make_windows()
    half = [Rate(1, MINUTE.interval)]
    assert await windows.put("k", [MINUTE])
    # The permit taken through the full view fills the smaller one.
    assert not await windows.put("k", half)
    assert await windows.put("k", [MINUTE])


async def test_a_permit_stamped_in_the_future_counts(
    make_windows: MakeWindows, clock: ManualClock
) -> None:
    windows = make_windows()
    now = windows.now_ms()
    for _ in range(3):
        assert await windows.put("k", [MINUTE], now_ms=now + 5)
    assert await windows.counts("k", [MINUTE]) == [3]
    assert not await windows.put("k", [MINUTE])


async def test_acquire_sleeps_out_a_hold_then_a_full_window(
    make_windows: MakeWindows, clock: ManualClock
) -> None:
    windows = make_windows()
    sleep = ClockSleep(clock)
    windows.hold("k", 30)
    assert await windows.acquire("k", [MINUTE], sleep) == pytest.approx(30)
    assert await windows.acquire("k", [MINUTE], sleep) == 0
    assert await windows.acquire("k", [MINUTE], sleep) == 0
    # The window is full until the first permit (taken 30 s ago by the clock) leaves it.
    assert await windows.acquire("k", [MINUTE], sleep) == pytest.approx(60.001)


async def test_a_permit_stops_counting_once_it_leaves_every_window(
    make_windows: MakeWindows, clock: ManualClock
) -> None:
    windows = make_windows(retention_ms=MINUTE.interval, trim_every_ms=0)
    for _ in range(3):
        await windows.put("k", [MINUTE])
    clock.advance(61)
    assert await windows.put("other", [MINUTE])
    assert await windows.counts("k", [MINUTE]) == [0]
    assert await windows.wait_ms("k", [MINUTE]) == (0, None)
    assert await windows.put("k", [MINUTE])


@pytest.mark.redis
async def test_a_lost_marked_window_is_refused_until_restored(
    clock: ManualClock, redis_client: object, redis_namespace: str
) -> None:
    windows = in_redis(clock, redis_client, redis_namespace, marker_prefix=f"{redis_namespace}:m")
    with pytest.raises(WindowLost):
        await windows.put("k", [MINUTE])
    assert await windows.counts("k", [MINUTE]) == [0]
    now = windows.now_ms()
    await windows.restore("k", {"a1": now, "b1": now})
    assert await windows.put("k", [MINUTE], member="c")
    generation = windows.generation("k")
    assert generation is not None
    assert not await windows.put("k", [MINUTE])
    # Writing a permit again by its member adds nothing.
    await windows.record({"k": {"a1": now, "c1": now}})
    assert await windows.counts("k", [MINUTE]) == [3]
    # A second restore keeps the generation (the marker is set only when missing).
    await windows.restore("k", {})
    assert not await windows.put("k", [MINUTE])
    assert windows.generation("k") == generation


@pytest.mark.redis
async def test_a_lost_script_is_loaded_again(
    clock: ManualClock, redis_client: object, redis_namespace: str
) -> None:
    windows = in_redis(clock, redis_client, redis_namespace)
    assert await windows.put("k", [MINUTE])
    # What a Redis restart does to the script cache, without flushing the shared test server's.
    windows._script_hash = "0" * 40
    with pytest.raises(NoScriptError):
        await redis_client.evalsha(windows._script_hash, 0)  # type: ignore[attr-defined]
    assert await windows.put("k", [MINUTE])
    assert await windows.counts("k", [MINUTE]) == [2]


@pytest.mark.redis
async def test_shared_windows_run_on_the_reference_clock_through_a_measured_offset(
    clock: ManualClock, redis_client: object, redis_namespace: str
) -> None:
    own = ManualClock(clock.now() + dt.timedelta(seconds=30))  # this replica's clock, 30 s off
    windows = RateWindows(
        clock=own,
        retention_ms=HOUR.interval,
        redis=redis_client,  # type: ignore[arg-type]
        key_prefix=f"{redis_namespace}:w",
        reference=ClockTime(clock),
        sync_every_ms=60_000,
    )
    reference_ms = int(clock.now().timestamp() * 1000)
    assert windows.now_ms() == reference_ms + 30_000  # not measured yet
    assert await windows.synced_now_ms() == reference_ms
    assert windows.offset is not None and windows.offset.offset_ms == -30_000
    # Elapsed time is the own clock's: the offset is kept between measurements...
    own.advance(10)
    assert await windows.synced_now_ms() == reference_ms + 10_000
    # ... and measured again once due (here the reference did not move: 70 s of drift).
    own.advance(60)
    assert await windows.synced_now_ms() == reference_ms
    # A clock that went back is measured again at once.
    own.set(own.now() - dt.timedelta(seconds=5))
    clock.advance(1)
    assert await windows.synced_now_ms() == reference_ms + 1_000
    # Invalidated (Redis failed): measured again at the next use.
    clock.advance(1)
    windows.offset.invalidate()
    assert await windows.synced_now_ms() == reference_ms + 2_000
    assert await windows.put("k", [MINUTE])
    assert windows.view("k").stamps == (reference_ms + 2_000,)  # type: ignore[union-attr]


@pytest.mark.redis
async def test_a_put_brings_the_window_back_and_a_fence_refuses_what_the_caller_refuses(
    clock: ManualClock, redis_client: object, redis_namespace: str
) -> None:
    windows = in_redis(clock, redis_client, redis_namespace, fence_key=f"{redis_namespace}:f")
    assert await windows.put("k", [MINUTE, HOUR])
    clock.advance(61)
    assert await windows.put("k", [MINUTE, HOUR])
    view = windows.view("k")
    assert view is not None
    now = windows.now_ms()
    assert (view.at_ms, view.counts, view.stamps, view.fence_ms) == (now, (1, 2), (now,), 0)
    await windows.raise_fence(1_000)
    # While the fence stands, a permit the caller's own rule refuses is not taken.
    assert not await windows.put("k", [MINUTE, HOUR], fence_ok=False)
    fenced = windows.view("k")
    assert fenced is not None and fenced.fenced and fenced.fence_ms == 1_000
    assert fenced.counts == (1, 2)
    assert await windows.put("k", [MINUTE, HOUR], fence_ok=True)
    await windows.raise_fence(500)  # a shorter fence does not shorten the standing one
    clock.advance(0.999)
    assert not await windows.put("k", [MINUTE, HOUR], fence_ok=False)
    clock.advance(0.001)  # the fence's end, on the windows' clock
    assert await windows.put("k", [MINUTE, HOUR], fence_ok=False)
    assert windows.view("k").counts == (3, 4)  # type: ignore[union-attr]


async def test_a_queued_waiter_makes_yielding_puts_refuse_until_it_leaves_or_its_lease_ends(
    make_windows: MakeWindows, clock: ManualClock, redis_namespace: str
) -> None:
    windows = make_windows(queue_prefix=f"{redis_namespace}:q")
    one = [Rate(1, MINUTE.interval)]
    assert await windows.put("k", one)
    now = windows.now_ms()
    guest = Waiter("guest", now + 120_000)
    # Refused, the waiter joins the queue (in the same step); yielding puts are refused.
    assert not await windows.put("k", one, waiter=guest)
    assert await windows.queued("k") == 1
    clock.advance(61)
    with pytest.raises(Yielded):
        await windows.put("k", [MINUTE], yields=True)
    assert await windows.counts("k", [MINUTE]) == [0]
    # Other keys have their own queue.
    assert await windows.put("other", [MINUTE], yields=True)
    # Taken, the waiter leaves: background work goes on.
    assert await windows.put("k", one, waiter=Waiter("guest", windows.now_ms() + 5_000))
    assert await windows.queued("k") == 0
    assert await windows.put("k", [MINUTE], yields=True)

    # A waiter that gave up leaves; one that never came back holds nothing past its lease.
    clock.advance(61)
    assert await windows.put("k", one)
    assert not await windows.put("k", one, waiter=guest_at(windows, 1))
    await windows.leave("k", guest)
    assert await windows.queued("k") == 0
    assert not await windows.put("k", one, waiter=guest_at(windows, 2))
    with pytest.raises(Yielded):
        await windows.put("k", [MINUTE], yields=True)
    clock.advance(2.001)
    assert await windows.queued("k") == 0
    assert await windows.put("k", [MINUTE], yields=True)


def guest_at(windows: RateWindows, lease_s: int) -> Waiter:
    """The guest waiter, leased for ``lease_s`` from now."""
    return Waiter("guest", windows.now_ms() + lease_s * 1000)
