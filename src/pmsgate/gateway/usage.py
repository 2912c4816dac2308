"""Hourly gateway usage counted in memory: tool calls and upstream requests per facility.

The gateway counts on its hot path here (one dict lookup and an increment, no I/O,
no lock: the event loop runs one increment at a time); the ``flush-gateway-usage``
job (:mod:`pmsgate.jobs.usage`) drains the counts every minute and adds them to
``gateway_usage_hours`` (:class:`pmsgate.storage.gateway_usage.GatewayUsageRepository`),
where every replica's counts add up. The console charts tool calls against upstream
requests per hour from that table, and sums a week of upstream requests as the
facility's budget use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from pmsgate.clock import Clock


@dataclass
class HourCounts:
    """What one facility did in one hour: calls answered and requests sent upstream."""

    tool_calls: int = 0
    upstream_calls: int = 0

    def add(self, other: HourCounts) -> None:
        """Add another count to this one."""
        self.tool_calls += other.tool_calls
        self.upstream_calls += other.upstream_calls


# (hotel_id, start of the UTC hour) -> counts
UsageCounts = dict[tuple[str, datetime], HourCounts]


def hour_start(when: datetime) -> datetime:
    """The start of the UTC hour ``when`` falls in."""
    return when.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


class UsageCounter:
    """Counts per (hotel_id, UTC hour) since the last :meth:`drain`."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._counts: UsageCounts = {}

    def __repr__(self) -> str:
        return f"UsageCounter(pending={len(self._counts)})"

    def tool_call(self, hotel_id: str) -> None:
        """Count one tool or operation call of the facility."""
        self._slot(hotel_id).tool_calls += 1

    def upstream_call(self, hotel_id: str) -> None:
        """Count one request sent to the booking system for the facility (token requests too)."""
        self._slot(hotel_id).upstream_calls += 1

    def pending(self) -> UsageCounts:
        """A copy of the counts not drained yet."""
        return {key: HourCounts(c.tool_calls, c.upstream_calls) for key, c in self._counts.items()}

    def drain(self) -> UsageCounts:
        """The counts so far, and start again from zero."""
        counts, self._counts = self._counts, {}
        return counts

    def restore(self, counts: Mapping[tuple[str, datetime], HourCounts]) -> None:
        """Put drained counts back (a flush failed): they are added to what came since."""
        for key, value in counts.items():
            held = self._counts.get(key)
            if held is None:
                self._counts[key] = HourCounts(value.tool_calls, value.upstream_calls)
            else:
                held.add(value)

    def _slot(self, hotel_id: str) -> HourCounts:
        key = (hotel_id, hour_start(self._clock.now()))
        counts = self._counts.get(key)
        if counts is None:
            counts = self._counts[key] = HourCounts()
        return counts
