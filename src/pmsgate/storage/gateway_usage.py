"""Hourly gateway usage (``gateway_usage_hours``): the only queries on that table.

Each process counts tool calls and upstream requests (in memory, and through Redis when
configured: :class:`pmsgate.gateway.usage.UsageCounter`) and adds them here as deltas with an
UPSERT (``ON CONFLICT (hotel_id, hour) DO UPDATE SET n = n + excluded.n``), so
replicas flushing the same hour add up instead of overwriting each other. Reads
give a series with every hour present (hours without a row are zeros) and totals
over a period. The repository works in the caller's session and never commits;
:class:`pmsgate.gateway.usage.UsageHistory` checks the times and owns the transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select

from pmsgate.storage.integrity import dialect_insert
from pmsgate.storage.models import GatewayUsageHour
from pmsgate.storage.repository import Repository

HOUR = timedelta(hours=1)
# Rows per INSERT: four bound values each stays far below SQLite's limit on variables.
ROWS_PER_STATEMENT = 500


@dataclass
class HourCounts:
    """What one facility did in one hour: calls answered and requests sent upstream."""

    tool_calls: int = 0
    upstream_calls: int = 0

    def add(self, other: HourCounts) -> None:
        """Add another count to this one."""
        self.tool_calls += other.tool_calls
        self.upstream_calls += other.upstream_calls


def hour_start(when: datetime) -> datetime:
    """The start of the UTC hour ``when`` falls in."""
    return when.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


@dataclass(frozen=True)
class HourUsage:
    """One facility's tool calls and upstream requests in the hour starting at ``hour``."""

    hour: datetime
    tool_calls: int
    upstream_calls: int


@dataclass(frozen=True)
class UsageTotal:
    """Tool calls and upstream requests summed over a period."""

    tool_calls: int
    upstream_calls: int


class GatewayUsageRepository(Repository):
    """Adds hourly deltas and reads series and totals of one facility (times are aware)."""

    async def add(self, counts: Mapping[tuple[str, datetime], HourCounts]) -> int:
        """Add the counts to their hours; returns the number of hours touched."""
        rows = [
            {
                "hotel_id": hotel_id,
                "hour": hour_start(hour),
                "tool_calls": value.tool_calls,
                "upstream_calls": value.upstream_calls,
            }
            for (hotel_id, hour), value in counts.items()
            if value.tool_calls or value.upstream_calls
        ]
        if not rows:
            return 0
        # One order for every writer: concurrent replicas lock the rows in the same sequence
        # and cannot deadlock each other on PostgreSQL.
        rows.sort(key=lambda row: (row["hotel_id"], row["hour"]))
        for start in range(0, len(rows), ROWS_PER_STATEMENT):
            statement = dialect_insert(self._session, GatewayUsageHour).values(
                rows[start : start + ROWS_PER_STATEMENT]
            )
            statement = statement.on_conflict_do_update(
                index_elements=[GatewayUsageHour.hotel_id, GatewayUsageHour.hour],
                set_={
                    "tool_calls": GatewayUsageHour.tool_calls + statement.excluded.tool_calls,
                    "upstream_calls": GatewayUsageHour.upstream_calls
                    + statement.excluded.upstream_calls,
                },
            )
            await self._session.execute(statement)
        return len(rows)

    async def series(self, hotel_id: str, first: datetime, last: datetime) -> list[HourUsage]:
        """Every hour from ``first`` to ``last`` (starts of hours), oldest first."""
        rows = await self._session.scalars(
            select(GatewayUsageHour).where(
                GatewayUsageHour.hotel_id == hotel_id,
                GatewayUsageHour.hour >= first,
                GatewayUsageHour.hour <= last,
            )
        )
        stored = {hour_start(row.hour): row for row in rows}
        series = []
        hour = first
        while hour <= last:
            row = stored.get(hour)
            series.append(
                HourUsage(
                    hour=hour,
                    tool_calls=row.tool_calls if row is not None else 0,
                    upstream_calls=row.upstream_calls if row is not None else 0,
                )
            )
            hour += HOUR
        return series

    async def total(
        self, hotel_id: str, first: datetime | None = None, last: datetime | None = None
    ) -> UsageTotal:
        """Sums over the hours from ``first`` to ``last`` (starts of hours, both optional)."""
        statement = select(
            func.coalesce(func.sum(GatewayUsageHour.tool_calls), 0),
            func.coalesce(func.sum(GatewayUsageHour.upstream_calls), 0),
        ).where(GatewayUsageHour.hotel_id == hotel_id)
        if first is not None:
            statement = statement.where(GatewayUsageHour.hour >= first)
        if last is not None:
            statement = statement.where(GatewayUsageHour.hour <= last)
        tool_calls, upstream_calls = (await self._session.execute(statement)).one()
        return UsageTotal(tool_calls=int(tool_calls), upstream_calls=int(upstream_calls))
