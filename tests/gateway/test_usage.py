"""Hourly gateway usage as the gateway keeps it: in-memory counts (UsageCounter), added by every
replica and read back hour by hour (UsageHistory, gateway/usage.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pmsgate.clock import ManualClock
from pmsgate.errors import PmsgateError
from pmsgate.gateway.usage import UsageCounter, UsageHistory
from pmsgate.storage.db import open_database, session_factory
from pmsgate.storage.gateway_usage import (
    HourCounts,
    HourUsage,
    UsageTotal,
    hour_start,
)

pytestmark = pytest.mark.anyio

NINE = datetime(2026, 11, 22, 9, tzinfo=UTC)
HOUR = timedelta(hours=1)


@pytest.fixture
def history(sessions) -> UsageHistory:  # type: ignore[no-untyped-def]
    return UsageHistory(sessions)


def test_the_counter_counts_per_facility_and_utc_hour_and_drain_starts_again() -> None:
    clock = ManualClock(NINE + timedelta(minutes=59, seconds=59))
    counter = UsageCounter(clock)
    counter.tool_call("100")
    counter.upstream_call("100")
    counter.upstream_call("100")
    counter.tool_call("200")
    clock.advance(1)  # 10:00:00, a new hour
    counter.tool_call("100")
    assert counter.drain() == {
        ("100", NINE): HourCounts(tool_calls=1, upstream_calls=2),
        ("200", NINE): HourCounts(tool_calls=1),
        ("100", NINE + HOUR): HourCounts(tool_calls=1),
    }
    assert counter.drain() == {}


def test_restored_counts_are_added_to_what_came_since() -> None:
    clock = ManualClock(NINE)
    counter = UsageCounter(clock)
    counter.tool_call("100")
    drained = counter.drain()
    counter.tool_call("100")
    counter.upstream_call("100")
    counter.restore(drained)
    assert counter.pending() == {("100", NINE): HourCounts(tool_calls=2, upstream_calls=1)}


def test_hour_start_is_the_utc_hour() -> None:
    cest = datetime(2026, 7, 1, 11, 30, tzinfo=UTC).astimezone()
    assert hour_start(cest) == datetime(2026, 7, 1, 11, tzinfo=UTC)


async def test_two_replicas_adding_to_the_same_hour_sum_up(database_url: str) -> None:
    clock = ManualClock(NINE + timedelta(minutes=10))
    replicas = [UsageCounter(clock), UsageCounter(clock)]
    for _ in range(3):
        replicas[0].tool_call("100")
        replicas[0].upstream_call("100")
    replicas[1].tool_call("100")
    replicas[1].upstream_call("100")
    replicas[1].upstream_call("200")
    # Each replica has its own engine (its own connection pool), like separate processes.
    async with open_database(database_url) as first, open_database(database_url) as second:
        a = UsageHistory(session_factory(first))
        b = UsageHistory(session_factory(second))
        assert await a.add(replicas[0].drain()) == 1
        assert await b.add(replicas[1].drain()) == 2
        # A second flush of the same hour adds too.
        replicas[0].tool_call("100")
        await a.add(replicas[0].drain())
        assert await b.series("100", NINE, NINE) == [
            HourUsage(hour=NINE, tool_calls=5, upstream_calls=4)
        ]
        assert await a.total("200") == UsageTotal(tool_calls=0, upstream_calls=1)


async def test_series_fills_the_hours_without_a_row_with_zeros(
    history: UsageHistory,
) -> None:
    await history.add(
        {
            ("100", NINE): HourCounts(tool_calls=4, upstream_calls=1),
            ("100", NINE + 3 * HOUR): HourCounts(tool_calls=2, upstream_calls=2),
            ("200", NINE + HOUR): HourCounts(tool_calls=9, upstream_calls=9),
        }
    )
    series = await history.series("100", NINE + timedelta(minutes=30), NINE + 3 * HOUR)
    assert series == [
        HourUsage(hour=NINE, tool_calls=4, upstream_calls=1),
        HourUsage(hour=NINE + HOUR, tool_calls=0, upstream_calls=0),
        HourUsage(hour=NINE + 2 * HOUR, tool_calls=0, upstream_calls=0),
        HourUsage(hour=NINE + 3 * HOUR, tool_calls=2, upstream_calls=2),
    ]
    assert all(point.hour.tzinfo is not None for point in series)
    assert await history.series("999", NINE, NINE + HOUR) == [
        HourUsage(hour=NINE, tool_calls=0, upstream_calls=0),
        HourUsage(hour=NINE + HOUR, tool_calls=0, upstream_calls=0),
    ]
    assert await history.series("100", NINE + HOUR, NINE) == []


async def test_totals_sum_the_hours_of_a_period(history: UsageHistory) -> None:
    await history.add(
        {
            ("100", NINE - 24 * HOUR): HourCounts(tool_calls=10, upstream_calls=10),
            ("100", NINE): HourCounts(tool_calls=4, upstream_calls=1),
            ("100", NINE + 2 * HOUR): HourCounts(tool_calls=2, upstream_calls=2),
        }
    )
    assert await history.total("100", NINE, NINE + 2 * HOUR) == UsageTotal(6, 3)
    assert await history.total("100", NINE + timedelta(minutes=5)) == UsageTotal(6, 3)
    assert await history.total("100") == UsageTotal(16, 13)
    assert await history.total("nobody") == UsageTotal(0, 0)


async def test_empty_counts_write_nothing_and_naive_times_are_refused(
    history: UsageHistory,
) -> None:
    assert await history.add({}) == 0
    assert await history.add({("100", NINE): HourCounts()}) == 0
    with pytest.raises(PmsgateError) as raised:
        await history.series("100", datetime(2026, 11, 22, 9), NINE)
    assert raised.value.code == "invalid_since"
    with pytest.raises(PmsgateError) as raised:
        await history.series("100", NINE - 400 * 24 * HOUR, NINE)
    assert raised.value.code == "invalid_usage_range"
