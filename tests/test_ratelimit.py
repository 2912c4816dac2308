"""RateWindows, the one rate primitive: the same contract in memory and in Redis."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pyrate_limiter import Rate
from redis.exceptions import NoScriptError

from pmsgate.clock import ManualClock
from pmsgate.ratelimit import RateWindows, WindowLost
from pmsgate.sandbox.customers import ClockSleep

pytestmark = pytest.mark.anyio

MINUTE = Rate(3, 60_000)
HOUR = Rate(5, 3_600_000)
MakeWindows = Callable[..., RateWindows]


@pytest.fixture(params=["memory", "redis"])
def make_windows(
    request: pytest.FixtureRequest, clock: ManualClock, redis_namespace: str
) -> Iterator[MakeWindows]:
    """Builds windows on one backend; Redis ones share the test's namespace (like replicas)."""
    redis = request.getfixturevalue("redis_client") if request.param == "redis" else None

    def make(**kwargs: object) -> RateWindows:
        kwargs.setdefault("clock", clock)
        kwargs.setdefault("retention_ms", HOUR.interval)
        return RateWindows(redis=redis, key_prefix=f"{redis_namespace}:w", **kwargs)  # type: ignore[arg-type]

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
