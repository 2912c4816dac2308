"""Usage snapshots (spec §2.4, §4.3 step 16, §6): the only queries on ``usage_snapshots``.

A snapshot holds a workspace's cumulative consumption as the platform reports it at
``taken_at``; consumption over a period is the difference of two snapshots. The
``baseline`` is taken once, when onboarding finishes; ``periodic`` ones come from the
job that runs every 6 hours. Recording is idempotent: a second baseline, or a
second snapshot of the same kind at the same instant (a retried or doubled job
tick), returns the one already stored instead of adding another.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any, cast, get_args

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.errors import InvalidInput
from pmsgate.storage.customers import student_id_value
from pmsgate.storage.integrity import (
    FOREIGN_KEY,
    customer_not_found,
    one_of,
    optional_text,
    translate_integrity_error,
    violated_constraint,
)
from pmsgate.storage.models import UsageSnapshot, UsageSnapshotKind

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
    usd_spent: Decimal
    messages: int
    tool_calls: int
    upstream_calls: int
    details: dict[str, Any] | None


def _view(row: UsageSnapshot) -> UsageSnapshotView:
    return UsageSnapshotView(
        id=row.id,
        student_id=row.student_id,
        workspace_id=row.workspace_id,
        kind=cast(UsageSnapshotKind, row.kind),
        taken_at=row.taken_at,
        usd_spent=Decimal(row.usd_spent).quantize(USD_PLACES),
        messages=row.messages,
        tool_calls=row.tool_calls,
        upstream_calls=row.upstream_calls,
        details=row.details,
    )


def _usd(value: Decimal | int | str) -> Decimal:
    try:
        amount = Decimal(str(value).strip())
    except InvalidOperation:
        amount = Decimal("NaN")
    if isinstance(value, bool) or not amount.is_finite() or not 0 <= amount <= MAX_USD:
        raise InvalidInput(
            "usd_spent must be an amount of dollars, at least 0.",
            code="invalid_usd_spent",
            hint="Give the workspace's cumulative spend in USD.",
        )
    # A measurement, not a price: rounding below a hundredth of a cent loses nothing.
    return amount.quantize(USD_PLACES, rounding=ROUND_HALF_EVEN)


def _count(value: int, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise InvalidInput(
            f"{field} must be a whole number, at least 0.",
            code=f"invalid_{field}",
            hint=f"Give the workspace's cumulative number of {field.replace('_', ' ')}.",
        )
    return value


def _aware(when: datetime, field: str) -> datetime:
    if when.tzinfo is None:
        raise InvalidInput(
            f"{field} has no time zone.",
            code=f"invalid_{field}",
            hint="Give a timezone-aware time (UTC).",
        )
    return when


class UsageSnapshotRepository:
    """Records snapshots and reads the baseline, the latest one and a series."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def record(
        self,
        student_id: str,
        *,
        taken_at: datetime,
        usd_spent: Decimal | int | str,
        messages: int,
        tool_calls: int,
        upstream_calls: int,
        kind: str = "periodic",
        workspace_id: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> tuple[UsageSnapshotView, bool]:
        """Store a snapshot; True when stored, False when an equivalent one already was."""
        student_id = student_id_value(student_id)
        kind = one_of(kind.strip().lower(), get_args(UsageSnapshotKind), "kind")
        row = UsageSnapshot(
            student_id=student_id,
            workspace_id=optional_text(workspace_id, "workspace_id", MAX_WORKSPACE_ID),
            kind=kind,
            taken_at=_aware(taken_at, "taken_at"),
            usd_spent=_usd(usd_spent),
            messages=_count(messages, "messages"),
            tool_calls=_count(tool_calls, "tool_calls"),
            upstream_calls=_count(upstream_calls, "upstream_calls"),
            details=details,
        )
        try:
            async with self._sessions.begin() as session:
                session.add(row)
        except IntegrityError as error:
            # The insert ran in its own transaction, so reading the winner here is safe on
            # PostgreSQL too (a failed statement aborts the whole transaction there).
            table = UsageSnapshot.__table__
            if violated_constraint(error, table) == FOREIGN_KEY:  # type: ignore[arg-type]
                raise customer_not_found(student_id) from None
            existing = (
                await self.baseline(student_id)
                if kind == "baseline"
                else await self._at(student_id, kind, taken_at)
            )
            if existing is None:
                raise translate_integrity_error(error, table, {}) from None  # type: ignore[arg-type]
            return existing, False
        return _view(row), True

    async def baseline(self, student_id: str) -> UsageSnapshotView | None:
        """The customer's baseline snapshot, if recorded."""
        return await self._latest(student_id, "baseline")

    async def latest(self, student_id: str, kind: str | None = None) -> UsageSnapshotView | None:
        """The customer's most recent snapshot (of one kind, when given)."""
        return await self._latest(student_id, kind)

    async def series(
        self,
        student_id: str,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[UsageSnapshotView]:
        """The customer's snapshots of both kinds, oldest first, within [since, until]."""
        statement = select(UsageSnapshot).where(UsageSnapshot.student_id == student_id.strip())
        if since is not None:
            statement = statement.where(UsageSnapshot.taken_at >= _aware(since, "since"))
        if until is not None:
            statement = statement.where(UsageSnapshot.taken_at <= _aware(until, "until"))
        async with self._sessions() as session:
            rows = await session.scalars(
                statement.order_by(UsageSnapshot.taken_at, UsageSnapshot.id)
            )
            return [_view(row) for row in rows]

    async def _latest(self, student_id: str, kind: str | None) -> UsageSnapshotView | None:
        statement = select(UsageSnapshot).where(UsageSnapshot.student_id == student_id.strip())
        if kind is not None:
            statement = statement.where(UsageSnapshot.kind == kind.strip().lower())
        async with self._sessions() as session:
            row = await session.scalar(
                statement.order_by(UsageSnapshot.taken_at.desc(), UsageSnapshot.id.desc()).limit(1)
            )
        return _view(row) if row is not None else None

    async def _at(self, student_id: str, kind: str, taken_at: datetime) -> UsageSnapshotView | None:
        async with self._sessions() as session:
            row = await session.scalar(
                select(UsageSnapshot).where(
                    UsageSnapshot.student_id == student_id,
                    UsageSnapshot.kind == kind,
                    UsageSnapshot.taken_at == taken_at,
                )
            )
        return _view(row) if row is not None else None
