"""Usage snapshots as a service: the baseline once, periodic ticks idempotent, values checked.

Every test runs on SQLite and, when PMSGATE_TEST_DATABASE_URL is set, on PostgreSQL.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.customers.usage import UsageSnapshots
from pmsgate.errors import PmsgateError

from .records_support import code_of

pytestmark = pytest.mark.anyio


async def test_the_baseline_is_recorded_once_and_a_second_one_returns_the_first(
    sessions: async_sessionmaker[AsyncSession], customer: str
):
    usage = UsageSnapshots(sessions)
    start = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)

    first, created = await usage.record(
        "stu-1001",
        kind="baseline",
        taken_at=start,
        usd_spent="1.25",
        messages=3,
        tool_calls=2,
        upstream_calls=1,
        workspace_id="ws_1",
    )
    second, created_again = await usage.record(
        "stu-1001",
        kind="baseline",
        taken_at=start + timedelta(days=1),
        usd_spent="9",
        messages=9,
        tool_calls=9,
        upstream_calls=9,
    )

    assert created and not created_again
    assert second == first
    assert await usage.baseline("stu-1001") == first
    assert first.usd_spent == Decimal("1.2500")


async def test_latest_is_the_newest_snapshot_and_the_baseline_stays_the_first(
    sessions: async_sessionmaker[AsyncSession], customer: str
):
    usage = UsageSnapshots(sessions)
    start = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
    await usage.record(
        "stu-1001",
        kind="baseline",
        taken_at=start,
        usd_spent=0,
        messages=0,
        tool_calls=0,
        upstream_calls=0,
    )
    for tick in range(1, 4):
        await usage.record(
            "stu-1001",
            taken_at=start + timedelta(hours=6 * tick),
            usd_spent=Decimal("0.123456") * tick,
            messages=10 * tick,
            tool_calls=4 * tick,
            upstream_calls=2 * tick,
            details={"tick": tick},
        )

    latest = await usage.latest("stu-1001")
    baseline = await usage.baseline("stu-1001")
    window = await usage.series(
        "stu-1001", since=start + timedelta(hours=6), until=start + timedelta(hours=12)
    )

    assert latest is not None and baseline is not None
    assert latest.kind == "periodic"
    assert latest.taken_at == start + timedelta(hours=18)
    assert (latest.messages, latest.tool_calls, latest.upstream_calls) == (30, 12, 6)
    assert latest.usd_spent == Decimal("0.3704")
    assert latest.details == {"tick": 3}
    assert baseline.taken_at == start
    assert await usage.latest("stu-1001", kind="baseline") == baseline
    assert [snapshot.messages for snapshot in window] == [10, 20]
    assert len(await usage.series("stu-1001")) == 4
    assert await usage.latest("stu-nobody") is None


async def test_a_repeated_tick_does_not_duplicate_a_periodic_snapshot(
    sessions: async_sessionmaker[AsyncSession], customer: str
):
    usage = UsageSnapshots(sessions)
    when = datetime(2026, 11, 22, 15, 0, tzinfo=UTC)
    values = {"usd_spent": "2", "messages": 5, "tool_calls": 1, "upstream_calls": 1}

    first, created = await usage.record("stu-1001", taken_at=when, **values)
    again, created_again = await usage.record("stu-1001", taken_at=when, **values)

    assert created and not created_again
    assert again == first
    assert len(await usage.series("stu-1001")) == 1


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"usd_spent": "-0.01"}, "invalid_usd_spent"),
        ({"messages": -1}, "invalid_messages"),
        ({"kind": "hourly"}, "invalid_kind"),
        ({"taken_at": datetime(2026, 11, 22, 9, 0)}, "invalid_taken_at"),
        ({"student_id": "stu-missing"}, "customer_not_found"),
    ],
)
@pytest.mark.usefixtures("customer")
async def test_a_usage_snapshot_is_checked_before_it_is_stored(
    sessions: async_sessionmaker[AsyncSession], changes: dict[str, object], code: str
):
    values: dict[str, object] = {
        "student_id": "stu-1001",
        "taken_at": datetime(2026, 11, 22, 9, 0, tzinfo=UTC),
        "usd_spent": "1",
        "messages": 1,
        "tool_calls": 1,
        "upstream_calls": 1,
    }
    values.update(changes)

    with pytest.raises(PmsgateError) as excinfo:
        await UsageSnapshots(sessions).record(**values)

    assert code_of(excinfo) == code


async def test_unknown_figures_are_stored_as_unknown_with_the_reason_never_as_zeros(
    sessions: async_sessionmaker[AsyncSession], customer: str
):
    usage = UsageSnapshots(sessions)
    when = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
    for figures in ({"usd_spent": "1", "messages": None, "tool_calls": 2}, {}):
        values = {"usd_spent": None, "messages": None, "tool_calls": None, **figures}
        with pytest.raises(PmsgateError) as refused:
            await usage.record(
                "stu-1001", kind="baseline", taken_at=when, upstream_calls=0, **values
            )
        assert code_of(refused) in {"invalid_usage_figures", "usage_unknown_reason_required"}

    stored, created = await usage.record(
        "stu-1001",
        kind="baseline",
        taken_at=when,
        usd_spent=None,
        messages=None,
        tool_calls=None,
        upstream_calls=4,
        details={"unknown_reason": "the platform offers no usage API"},
    )

    assert created and not stored.known
    assert (stored.usd_spent, stored.messages, stored.tool_calls) == (None, None, None)
    assert stored.upstream_calls == 4
    assert await usage.baseline("stu-1001") == stored
