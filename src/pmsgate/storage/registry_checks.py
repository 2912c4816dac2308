"""The latest apartment-registry check of each customer (``registry_checks``): its only queries.

One row per customer, replaced by each check; the report is the check's JSON (never a
secret: listing ids, room types, names, reasons and fixes). The repository works in the
caller's session and never commits; :class:`pmsgate.customers.registry_check.RegistryChecks`
owns the transactions.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select

from pmsgate.storage.integrity import dialect_insert
from pmsgate.storage.models import RegistryCheck, RegistryCheckStatus
from pmsgate.storage.repository import Repository
from pmsgate.storage.views import view_of


@dataclass(frozen=True)
class RegistryCheckView:
    """A customer's latest registry check as stored."""

    student_id: str
    checked_at: datetime
    status: RegistryCheckStatus
    problems: int
    report: dict[str, Any]


def _view(row: RegistryCheck) -> RegistryCheckView:
    return view_of(RegistryCheckView, row, report=dict(row.report or {}))


class RegistryCheckRepository(Repository):
    """Replaces and reads the latest checks, in the caller's session; never commits."""

    async def put(
        self,
        student_id: str,
        *,
        checked_at: datetime,
        status: RegistryCheckStatus,
        problems: int,
        report: dict[str, Any],
    ) -> None:
        """Store the customer's latest check, replacing the previous one."""
        values = {
            "checked_at": checked_at,
            "status": status,
            "problems": problems,
            # JSON-ready (dates as the strings they print as).
            "report": json.loads(json.dumps(report, default=str)),
        }
        statement = dialect_insert(self._session, RegistryCheck).values(
            student_id=student_id, **values
        )
        await self._session.execute(
            statement.on_conflict_do_update(index_elements=["student_id"], set_=values)
        )

    async def find(self, student_id: str) -> RegistryCheckView | None:
        """The customer's latest check, if one ran."""
        row = await self._session.get(RegistryCheck, student_id)
        return _view(row) if row is not None else None

    async def with_status(
        self, statuses: Collection[RegistryCheckStatus]
    ) -> list[RegistryCheckView]:
        """The latest checks in these states, by student_id."""
        rows = await self._session.scalars(
            select(RegistryCheck)
            .where(RegistryCheck.status.in_(list(statuses)))
            .order_by(RegistryCheck.student_id)
        )
        return [_view(row) for row in rows]

    async def all(self) -> list[RegistryCheckView]:
        """Every customer's latest check, by student_id."""
        rows = await self._session.scalars(select(RegistryCheck).order_by(RegistryCheck.student_id))
        return [_view(row) for row in rows]
