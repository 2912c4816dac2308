"""Workspace configurations (docs/requirements.md R14.2): the only queries on their table.

One configuration per customer, upserted by ``student_id``. Its ``workspace_id`` is
unknown when the configuration is first written (step 3) and read back from the
platform once the workspace exists (step 5), so an upsert without one keeps it. The
repository works in the caller's session and never commits;
:class:`pmsgate.customers.workspaces.Workspaces` checks the values, raises the
caller-facing errors and owns the transactions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Literal

from sqlalchemy import func, select, update

from pmsgate.storage.integrity import dialect_insert
from pmsgate.storage.models import BillingMode, WorkspaceConfiguration
from pmsgate.storage.repository import Repository
from pmsgate.storage.views import view_of

MAX_WORKSPACE_ID = 100
MAX_WORKSPACE_NAME = 200
MAX_WORKSPACE_SLUG = 100
# Numeric(12, 2): ten digits of dollars and cents.
MAX_PLAN_LIMIT_USD = Decimal("9999999999.99")


@dataclass(frozen=True)
class WorkspaceConfigurationView:
    """A customer's stored workspace configuration."""

    student_id: str
    workspace_id: str | None
    workspace_name: str
    workspace_slug: str
    plan_limit_usd: Decimal
    alert_threshold_pct: int
    billing_mode: BillingMode
    notes: str
    created_at: datetime
    updated_at: datetime


def _view(row: WorkspaceConfiguration) -> WorkspaceConfigurationView:
    return view_of(
        WorkspaceConfigurationView,
        row,
        plan_limit_usd=Decimal(row.plan_limit_usd).quantize(Decimal("0.01")),
    )


class WorkspaceConfigurationRepository(Repository):
    """Upserts and reads workspace configurations (values already checked), in the caller's
    session; never commits (a broken constraint raises ``IntegrityError``)."""

    async def upsert(
        self,
        student_id: str,
        values: Mapping[str, object],
        workspace_id: str | None,
        now: datetime,
    ) -> WorkspaceConfigurationView:
        """Insert or replace the configuration; a None workspace_id keeps the stored one."""
        statement = dialect_insert(self._session, WorkspaceConfiguration).values(
            student_id=student_id,
            workspace_id=workspace_id,
            created_at=now,
            updated_at=now,
            **values,
        )
        row = (
            await self._session.scalars(
                statement.on_conflict_do_update(
                    index_elements=[WorkspaceConfiguration.student_id],
                    set_={
                        **values,
                        "workspace_id": func.coalesce(
                            statement.excluded.workspace_id,
                            WorkspaceConfiguration.workspace_id,
                        ),
                        "updated_at": now,
                    },
                ).returning(WorkspaceConfiguration)
            )
        ).one()
        return _view(row)

    async def set_workspace_id(
        self, student_id: str, workspace_id: str, now: datetime
    ) -> WorkspaceConfigurationView | None:
        """Record the platform's workspace id; None when the customer has no configuration."""
        row = await self._session.scalar(
            update(WorkspaceConfiguration)
            .where(WorkspaceConfiguration.student_id == student_id)
            .values(workspace_id=workspace_id, updated_at=now)
            .returning(WorkspaceConfiguration)
        )
        return _view(row) if row is not None else None

    async def find_by(
        self, column: Literal["student_id", "workspace_id", "workspace_slug"], value: str
    ) -> WorkspaceConfigurationView | None:
        """The configuration whose ``column`` (each unique) is ``value``, if any."""
        row = await self._session.scalar(
            select(WorkspaceConfiguration).where(getattr(WorkspaceConfiguration, column) == value)
        )
        return _view(row) if row is not None else None

    async def all(self) -> list[WorkspaceConfigurationView]:
        """Every configuration, by student_id."""
        rows = await self._session.scalars(
            select(WorkspaceConfiguration).order_by(WorkspaceConfiguration.student_id)
        )
        return [_view(row) for row in rows]
