"""Usage snapshots as a service (docs/requirements.md R14.5, R19).

Checks the values of a snapshot, raises the caller-facing errors and runs each call in
one transaction over :class:`pmsgate.storage.usage.UsageSnapshotRepository`. Recording
is idempotent: a second baseline, or a second snapshot of the same kind at the same
instant, returns the one already stored instead of adding another.
"""

from __future__ import annotations

from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any, get_args

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.customers.checks import (
    customer_not_found,
    one_of,
    optional_text,
    student_id_value,
    translate_integrity_error,
)
from pmsgate.errors import InvalidInput, require_aware
from pmsgate.storage.integrity import FOREIGN_KEY, violated_constraint
from pmsgate.storage.models import UsageSnapshot, UsageSnapshotKind
from pmsgate.storage.usage import (
    MAX_COUNT,
    MAX_USD,
    MAX_WORKSPACE_ID,
    USD_PLACES,
    UsageSnapshotRepository,
    UsageSnapshotView,
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


class UsageSnapshots:
    """Records snapshots and reads the baseline, the latest one and a series."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def record(
        self,
        student_id: str,
        *,
        taken_at: datetime,
        usd_spent: Decimal | int | str | None,
        messages: int | None,
        tool_calls: int | None,
        upstream_calls: int,
        kind: str = "periodic",
        workspace_id: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> tuple[UsageSnapshotView, bool]:
        """Store a snapshot; True when stored, False when an equivalent one already was.

        The platform's figures (``usd_spent``, ``messages``, ``tool_calls``) are all given
        or all None — unknown, with the reason in ``details["unknown_reason"]``; never
        replace an unknown figure by 0.
        """
        student_id = student_id_value(student_id)
        kind = one_of(kind.strip().lower(), get_args(UsageSnapshotKind), "kind")
        figures = (usd_spent, messages, tool_calls)
        unknown = all(value is None for value in figures)
        if not unknown and any(value is None for value in figures):
            raise InvalidInput(
                "usd_spent, messages and tool_calls are given together or not at all.",
                code="invalid_usage_figures",
                hint="Record what the platform reported, or all three as unknown with the reason.",
            )
        if unknown and not (details or {}).get("unknown_reason"):
            raise InvalidInput(
                "An unknown usage snapshot needs the reason it is unknown.",
                code="usage_unknown_reason_required",
                hint='Give details={"unknown_reason": "…"}.',
            )
        row = UsageSnapshot(
            student_id=student_id,
            workspace_id=optional_text(workspace_id, "workspace_id", MAX_WORKSPACE_ID),
            kind=kind,
            taken_at=require_aware(taken_at, "taken_at"),
            usd_spent=_usd(usd_spent) if usd_spent is not None else None,
            messages=_count(messages, "messages") if messages is not None else None,
            tool_calls=_count(tool_calls, "tool_calls") if tool_calls is not None else None,
            upstream_calls=_count(upstream_calls, "upstream_calls"),
            details=details,
        )
        try:
            async with self._sessions.begin() as session:
                return await UsageSnapshotRepository(session).insert(row), True
        except IntegrityError as error:
            # The insert ran in its own transaction, so reading the winner here is safe on
            # PostgreSQL too (a failed statement aborts the whole transaction there).
            table = UsageSnapshot.__table__
            if violated_constraint(error, table) == FOREIGN_KEY:  # type: ignore[arg-type]
                raise customer_not_found(student_id) from None
            async with self._sessions() as session:
                snapshots = UsageSnapshotRepository(session)
                existing = (
                    await snapshots.latest(student_id, "baseline")
                    if kind == "baseline"
                    else await snapshots.at(student_id, kind, taken_at)
                )
            if existing is None:
                raise translate_integrity_error(error, table, {}) from None  # type: ignore[arg-type]
            return existing, False

    async def baseline(self, student_id: str) -> UsageSnapshotView | None:
        """The customer's baseline snapshot, if recorded."""
        return await self.latest(student_id, "baseline")

    async def latest(self, student_id: str, kind: str | None = None) -> UsageSnapshotView | None:
        """The customer's most recent snapshot (of one kind, when given)."""
        async with self._sessions() as session:
            return await UsageSnapshotRepository(session).latest(
                student_id.strip(), kind.strip().lower() if kind is not None else None
            )

    async def series(
        self,
        student_id: str,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[UsageSnapshotView]:
        """The customer's snapshots of both kinds, oldest first, within [since, until]."""
        first = require_aware(since, "since") if since is not None else None
        last = require_aware(until, "until") if until is not None else None
        async with self._sessions() as session:
            return await UsageSnapshotRepository(session).series(student_id.strip(), first, last)
