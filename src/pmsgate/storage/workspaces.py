"""Workspace configurations (spec §2.4, §4.3 steps 3 and 5): the only queries on their table.

One configuration per customer, upserted by ``student_id``. Its ``workspace_id`` is
unknown when the configuration is first written (step 3) and read back from the
platform once the workspace exists (step 5), so an upsert without one keeps it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import cast, get_args

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import Clock, SystemClock
from pmsgate.errors import Conflict, InvalidInput, NotFound, PmsgateError
from pmsgate.storage.customers import student_id_value
from pmsgate.storage.integrity import (
    FOREIGN_KEY,
    customer_not_found,
    dialect_insert,
    one_of,
    optional_text,
    required_text,
    translate_integrity_error,
)
from pmsgate.storage.models import BillingMode, WorkspaceConfiguration

MAX_WORKSPACE_ID = 100
MAX_WORKSPACE_NAME = 200
MAX_WORKSPACE_SLUG = 100
# Numeric(12, 2): ten digits of dollars and cents.
MAX_PLAN_LIMIT_USD = Decimal("9999999999.99")

_SLUG = re.compile(r"^[a-z0-9](?:[a-z0-9_-]*[a-z0-9])?$")


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
    return WorkspaceConfigurationView(
        student_id=row.student_id,
        workspace_id=row.workspace_id,
        workspace_name=row.workspace_name,
        workspace_slug=row.workspace_slug,
        plan_limit_usd=Decimal(row.plan_limit_usd).quantize(Decimal("0.01")),
        alert_threshold_pct=row.alert_threshold_pct,
        billing_mode=cast(BillingMode, row.billing_mode),
        notes=row.notes,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _slug(value: str) -> str:
    slug = required_text(value, "workspace_slug", MAX_WORKSPACE_SLUG)
    if not _SLUG.match(slug):
        raise InvalidInput(
            "workspace_slug must be lower-case letters, digits, '-' or '_'.",
            code="invalid_workspace_slug",
            hint="Use a slug such as `acme-rentals`.",
        )
    return slug


def _plan_limit(value: Decimal | int | str) -> Decimal:
    try:
        # Through str: a float's binary expansion must never become the stored amount.
        amount = Decimal(str(value).strip())
    except InvalidOperation:
        amount = Decimal("NaN")
    if (
        isinstance(value, bool)
        or not amount.is_finite()
        or amount < 0
        or amount > MAX_PLAN_LIMIT_USD
        or amount != amount.quantize(Decimal("0.01"))
    ):
        raise InvalidInput(
            "plan_limit_usd must be an amount of dollars and cents, at least 0.",
            code="invalid_plan_limit_usd",
            hint="Give the plan's monthly limit in USD, e.g. 150 or 149.90.",
        )
    return amount


def _alert_threshold(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100:
        raise InvalidInput(
            "alert_threshold_pct must be a whole percentage from 1 to 100.",
            code="invalid_alert_threshold_pct",
            hint="Give the share of the plan limit at which to alert, e.g. 80.",
        )
    return value


def configuration_not_found(student_id: str) -> NotFound:
    """The error for a customer without a workspace configuration."""
    return NotFound(
        f"Customer {student_id} has no workspace configuration.",
        code="workspace_configuration_not_found",
        hint="Upsert the workspace configuration first (onboarding step 3).",
    )


class WorkspaceConfigurationRepository:
    """Upserts and reads workspace configurations; records the platform's workspace id."""

    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], clock: Clock | None = None
    ) -> None:
        self._sessions = sessions
        self._clock = clock or SystemClock()

    async def upsert(
        self,
        student_id: str,
        *,
        workspace_name: str,
        workspace_slug: str,
        plan_limit_usd: Decimal | int | str,
        alert_threshold_pct: int,
        billing_mode: str = "partner_markup",
        notes: str = "",
        workspace_id: str | None = None,
    ) -> WorkspaceConfigurationView:
        """Insert or replace the configuration; a None workspace_id keeps the stored one."""
        student_id = student_id_value(student_id)
        values = {
            "workspace_name": required_text(workspace_name, "workspace_name", MAX_WORKSPACE_NAME),
            "workspace_slug": _slug(workspace_slug),
            "plan_limit_usd": _plan_limit(plan_limit_usd),
            "alert_threshold_pct": _alert_threshold(alert_threshold_pct),
            "billing_mode": one_of(billing_mode.strip(), get_args(BillingMode), "billing_mode"),
            "notes": notes.strip(),
        }
        workspace_id = optional_text(workspace_id, "workspace_id", MAX_WORKSPACE_ID)
        now = self._clock.now()
        try:
            async with self._sessions.begin() as session:
                statement = dialect_insert(session, WorkspaceConfiguration).values(
                    student_id=student_id,
                    workspace_id=workspace_id,
                    created_at=now,
                    updated_at=now,
                    **values,
                )
                row = (
                    await session.scalars(
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
        except IntegrityError as error:
            raise self._translate(error, student_id) from None
        return _view(row)

    async def set_workspace_id(
        self, student_id: str, workspace_id: str
    ) -> WorkspaceConfigurationView:
        """Record the id the platform gave the customer's workspace (onboarding step 5)."""
        workspace_id = required_text(workspace_id, "workspace_id", MAX_WORKSPACE_ID)
        try:
            async with self._sessions.begin() as session:
                row = await session.scalar(
                    update(WorkspaceConfiguration)
                    .where(WorkspaceConfiguration.student_id == student_id.strip())
                    .values(workspace_id=workspace_id, updated_at=self._clock.now())
                    .returning(WorkspaceConfiguration)
                )
                if row is None:
                    raise configuration_not_found(student_id)
        except IntegrityError as error:
            raise self._translate(error, student_id) from None
        return _view(row)

    async def find(self, student_id: str) -> WorkspaceConfigurationView | None:
        """The customer's configuration, if any."""
        async with self._sessions() as session:
            row = await session.scalar(
                select(WorkspaceConfiguration).where(
                    WorkspaceConfiguration.student_id == student_id.strip()
                )
            )
        return _view(row) if row is not None else None

    async def get(self, student_id: str) -> WorkspaceConfigurationView:
        """The customer's configuration; ``workspace_configuration_not_found`` otherwise."""
        found = await self.find(student_id)
        if found is None:
            raise configuration_not_found(student_id)
        return found

    async def by_workspace_id(self, workspace_id: str) -> WorkspaceConfigurationView | None:
        """The configuration of the platform workspace with this id, if any."""
        async with self._sessions() as session:
            row = await session.scalar(
                select(WorkspaceConfiguration).where(
                    WorkspaceConfiguration.workspace_id == workspace_id.strip()
                )
            )
        return _view(row) if row is not None else None

    async def by_slug(self, workspace_slug: str) -> WorkspaceConfigurationView | None:
        """The configuration with this workspace slug (unique), if any."""
        async with self._sessions() as session:
            row = await session.scalar(
                select(WorkspaceConfiguration).where(
                    WorkspaceConfiguration.workspace_slug == workspace_slug.strip()
                )
            )
        return _view(row) if row is not None else None

    async def all(self) -> list[WorkspaceConfigurationView]:
        """Every configuration, by student_id."""
        async with self._sessions() as session:
            rows = await session.scalars(
                select(WorkspaceConfiguration).order_by(WorkspaceConfiguration.student_id)
            )
            return [_view(row) for row in rows]

    @staticmethod
    def _translate(error: IntegrityError, student_id: str) -> PmsgateError:
        return translate_integrity_error(
            error,
            WorkspaceConfiguration.__table__,  # type: ignore[arg-type]
            {
                FOREIGN_KEY: lambda: customer_not_found(student_id),
                "uq_workspace_configurations_workspace_slug": lambda: Conflict(
                    "Another customer's workspace already has this slug.",
                    code="workspace_slug_taken",
                    hint="Choose a slug of the customer's own.",
                ),
                "uq_workspace_configurations_workspace_id": lambda: Conflict(
                    "Another customer's configuration already has this workspace_id.",
                    code="workspace_id_taken",
                    hint="Check the workspace id read back from the platform; "
                    "each customer has a workspace of its own.",
                ),
            },
        )
