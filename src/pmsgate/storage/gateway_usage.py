"""Hourly gateway usage (``gateway_usage_hours``): the only queries on that table.

Each process counts tool calls and upstream requests (in memory, and through Redis when
configured: :class:`pmsgate.gateway.usage.UsageCounter`) and adds them here as deltas with an
UPSERT (``ON CONFLICT (hotel_id, hour) DO UPDATE SET n = n + excluded.n``), so
replicas flushing the same hour add up instead of overwriting each other. Reads
give a series with every hour present (hours without a row are zeros) and totals
over a period.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.errors import InvalidInput
from pmsgate.storage.integrity import dialect_insert
from pmsgate.storage.models import GatewayUsageHour

HOUR = timedelta(hours=1)
# A console asks for days, never years: a bound keeps a mistyped range from building a huge list.
MAX_SERIES_HOURS = 24 * 366
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


def _aware(when: datetime, field: str) -> datetime:
    if when.tzinfo is None:
        raise InvalidInput(
            f"{field} has no time zone.",
            code=f"invalid_{field}",
            hint="Give a timezone-aware time (UTC).",
        )
    return when.astimezone(UTC)


class GatewayUsageRepository:
    """Adds hourly deltas and reads series and totals of one facility."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def add(self, counts: Mapping[tuple[str, datetime], HourCounts]) -> int:
        """Add the counts to their hours (one transaction); returns the number of hours touched."""
        rows = [
            {
                "hotel_id": hotel_id,
                "hour": hour_start(_aware(hour, "hour")),
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
        async with self._sessions.begin() as session:
            for start in range(0, len(rows), ROWS_PER_STATEMENT):
                statement = dialect_insert(session, GatewayUsageHour).values(
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
                await session.execute(statement)
        return len(rows)

    async def series(self, hotel_id: str, since: datetime, until: datetime) -> list[HourUsage]:
        """Every hour from the one holding ``since`` to the one holding ``until``, oldest first."""
        first = hour_start(_aware(since, "since"))
        last = hour_start(_aware(until, "until"))
        if last < first:
            return []
        if (last - first) / HOUR >= MAX_SERIES_HOURS:
            raise InvalidInput(
                f"A usage series covers at most {MAX_SERIES_HOURS} hours.",
                code="invalid_usage_range",
                hint="Ask for a shorter period.",
            )
        async with self._sessions() as session:
            rows = await session.scalars(
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
        self, hotel_id: str, since: datetime | None = None, until: datetime | None = None
    ) -> UsageTotal:
        """Sums over the hours from the one holding ``since`` to the one holding ``until``."""
        statement = select(
            func.coalesce(func.sum(GatewayUsageHour.tool_calls), 0),
            func.coalesce(func.sum(GatewayUsageHour.upstream_calls), 0),
        ).where(GatewayUsageHour.hotel_id == hotel_id)
        if since is not None:
            statement = statement.where(GatewayUsageHour.hour >= hour_start(_aware(since, "since")))
        if until is not None:
            statement = statement.where(GatewayUsageHour.hour <= hour_start(_aware(until, "until")))
        async with self._sessions() as session:
            tool_calls, upstream_calls = (await session.execute(statement)).one()
        return UsageTotal(tool_calls=int(tool_calls), upstream_calls=int(upstream_calls))
