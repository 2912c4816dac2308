"""Usage snapshots (docs/requirements.md R14.5, R19): the only queries on ``usage_snapshots``.

A snapshot holds a workspace's cumulative consumption as the platform reports it at
``taken_at``; consumption over a period is the difference of two snapshots. The
``baseline`` is taken once, when onboarding finishes; ``periodic`` ones come from the
job that runs every 6 hours. Recording is idempotent: a second baseline, or a
second snapshot of the same kind at the same instant (a retried or doubled job
tick), returns the one already stored instead of adding another. The repository works
in the caller's session and never commits; :class:`pmsgate.customers.usage.UsageSnapshots`
checks the values, raises the caller-facing errors and owns the transactions.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import select

from pmsgate.storage.models import UsageSnapshot, UsageSnapshotKind
from pmsgate.storage.repository import Repository
from pmsgate.storage.views import view_of

MAX_WORKSPACE_ID = 100
# Numeric(14, 4): ten digits of dollars and sub-cent precision for per-token pricing.
USD_PLACES = Decimal("0.0001")
MAX_USD = Decimal("9999999999.9999")
MAX_COUNT = 2**31 - 1


@dataclass(frozen=True)
class UsageSnapshotView:
    """A stored snapshot of cumulative consumption."""

    id: int
    student_id: str
    workspace_id: str | None
    kind: UsageSnapshotKind
    taken_at: datetime
    usd_spent: Decimal | None  # None: unknown (the reason is in details), never 0
    messages: int | None
    tool_calls: int | None
    upstream_calls: int
    details: dict[str, Any] | None

    @property
    def known(self) -> bool:
        """Whether the platform's figures were read (False: recorded as unknown)."""
        return self.usd_spent is not None and self.messages is not None


def _view(row: UsageSnapshot) -> UsageSnapshotView:
    return view_of(
        UsageSnapshotView,
        row,
        usd_spent=(
            Decimal(row.usd_spent).quantize(USD_PLACES) if row.usd_spent is not None else None
        ),
    )


class UsageSnapshotRepository(Repository):
    """Inserts snapshots and reads the latest one, one at an instant and a series, in the
    caller's session; never commits (a duplicate insert raises ``IntegrityError``)."""

    async def insert(self, row: UsageSnapshot) -> UsageSnapshotView:
        """Store a snapshot (flushed)."""
        await self._add(row)
        return _view(row)

    async def latest(self, student_id: str, kind: str | None) -> UsageSnapshotView | None:
        """The customer's most recent snapshot (of one kind, when given)."""
        statement = select(UsageSnapshot).where(UsageSnapshot.student_id == student_id)
        if kind is not None:
            statement = statement.where(UsageSnapshot.kind == kind)
        row = await self._session.scalar(
            statement.order_by(UsageSnapshot.taken_at.desc(), UsageSnapshot.id.desc()).limit(1)
        )
        return _view(row) if row is not None else None

    async def at(self, student_id: str, kind: str, taken_at: datetime) -> UsageSnapshotView | None:
        """The customer's snapshot of this kind taken at this instant, if any."""
        row = await self._session.scalar(
            select(UsageSnapshot).where(
                UsageSnapshot.student_id == student_id,
                UsageSnapshot.kind == kind,
                UsageSnapshot.taken_at == taken_at,
            )
        )
        return _view(row) if row is not None else None

    async def series(
        self, student_id: str, since: datetime | None, until: datetime | None
    ) -> list[UsageSnapshotView]:
        """The customer's snapshots of both kinds, oldest first, within [since, until]."""
        statement = select(UsageSnapshot).where(UsageSnapshot.student_id == student_id)
        if since is not None:
            statement = statement.where(UsageSnapshot.taken_at >= since)
        if until is not None:
            statement = statement.where(UsageSnapshot.taken_at <= until)
        rows = await self._session.scalars(
            statement.order_by(UsageSnapshot.taken_at, UsageSnapshot.id)
        )
        return [_view(row) for row in rows]
