"""The admin console's overview of every customer, read in a few aggregate queries.

The overview lists hundreds of customers; reading each one's context, checklist, last sync
and budget one by one would cost a dozen statements per customer. This repository answers
the same questions for **every** customer at once, one statement each: the customers with
their workspace, booking-system row and facility (:meth:`AdminOverviewRepository.customers`),
the latest real onboarding run (:meth:`last_runs`), the latest real result of every step
(:meth:`latest_steps`), the latest knowledge sync (:meth:`last_syncs`) and the upstream
requests of every facility since a moment (:meth:`upstream_calls_since`). The number of
statements is the same for 3 customers or 3,000 (``tests/web/test_admin_console.py``).

It takes the caller's session and never commits (docs/architecture.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

from sqlalchemy import and_, func, select

from pmsgate.storage.models import (
    Customer,
    CustomerIntegration,
    Facility,
    GatewayUsageHour,
    KnowledgeSyncJob,
    OnboardingRun,
    OnboardingStepResult,
    WorkspaceConfiguration,
)
from pmsgate.storage.repository import Repository
from pmsgate.storage.views import view_of

KROSS_PROVIDER = "kross"


@dataclass(frozen=True)
class CustomerSummaryRow:
    """One customer with its workspace, booking-system row and facility (any may be absent)."""

    student_id: str
    name: str
    email: str
    created_at: datetime
    workspace_slug: str | None
    pms_status: str | None
    pms_error: str | None
    pms_status_changed_at: datetime | None
    hotel_id: str | None
    facility_name: str | None
    facility_status: str | None
    limit_per_day: int | None


@dataclass(frozen=True)
class RunSummary:
    """A customer's latest real (not dry) onboarding run."""

    student_id: str
    number: int
    status: str
    route: str | None
    started_at: datetime


@dataclass(frozen=True)
class StepSummary:
    """The latest real result of one step of one customer."""

    student_id: str
    step_id: str
    status: str
    due: date | None
    waiting_for: str | None
    recorded_at: datetime


@dataclass(frozen=True)
class SyncSummary:
    """A customer's latest knowledge sync."""

    student_id: str
    kind: str
    status: str
    created_at: datetime
    finished_at: datetime | None
    error_code: str | None


class AdminOverviewRepository(Repository):
    """Aggregate reads over every customer (one statement per method)."""

    async def customers(self) -> list[CustomerSummaryRow]:
        """Every customer with its workspace slug, booking-system row and facility."""
        statement = (
            select(
                Customer.student_id,
                Customer.name,
                Customer.email,
                Customer.created_at,
                WorkspaceConfiguration.workspace_slug,
                CustomerIntegration.status.label("pms_status"),
                CustomerIntegration.last_error.label("pms_error"),
                CustomerIntegration.status_changed_at.label("pms_status_changed_at"),
                Facility.hotel_id,
                Facility.name.label("facility_name"),
                Facility.status.label("facility_status"),
                Facility.limit_per_day,
            )
            .outerjoin(
                WorkspaceConfiguration,
                WorkspaceConfiguration.student_id == Customer.student_id,
            )
            .outerjoin(
                CustomerIntegration,
                and_(
                    CustomerIntegration.student_id == Customer.student_id,
                    CustomerIntegration.provider == KROSS_PROVIDER,
                ),
            )
            .outerjoin(Facility, Facility.id == CustomerIntegration.facility_id)
            .order_by(Customer.student_id)
        )
        rows = await self._session.execute(statement)
        return [view_of(CustomerSummaryRow, row) for row in rows]

    async def last_runs(self) -> dict[str, RunSummary]:
        """Every customer's latest real onboarding run, by student_id."""
        newest = (
            select(
                OnboardingRun.student_id.label("student_id"),
                func.max(OnboardingRun.number).label("number"),
            )
            .where(OnboardingRun.dry_run.is_(False))
            .group_by(OnboardingRun.student_id)
            .subquery()
        )
        rows = await self._session.execute(
            select(
                OnboardingRun.student_id,
                OnboardingRun.number,
                OnboardingRun.status,
                OnboardingRun.route,
                OnboardingRun.started_at,
            ).join(
                newest,
                and_(
                    OnboardingRun.student_id == newest.c.student_id,
                    OnboardingRun.number == newest.c.number,
                ),
            )
        )
        return {row.student_id: view_of(RunSummary, row) for row in rows}

    async def latest_steps(self) -> list[StepSummary]:
        """The latest real (not dry-run) result of every step of every customer."""
        newest = (
            select(func.max(OnboardingStepResult.id).label("id"))
            .where(OnboardingStepResult.dry_run.is_(False))
            .group_by(OnboardingStepResult.student_id, OnboardingStepResult.step_id)
            .subquery()
        )
        rows = await self._session.execute(
            select(
                OnboardingStepResult.student_id,
                OnboardingStepResult.step_id,
                OnboardingStepResult.status,
                OnboardingStepResult.due,
                OnboardingStepResult.waiting_for,
                OnboardingStepResult.recorded_at,
            ).join(newest, OnboardingStepResult.id == newest.c.id)
        )
        return [view_of(StepSummary, row) for row in rows]

    async def last_syncs(self) -> dict[str, SyncSummary]:
        """Every customer's latest knowledge sync (dry run or commit), by student_id."""
        newest = (
            select(
                KnowledgeSyncJob.student_id.label("student_id"),
                func.max(KnowledgeSyncJob.created_at).label("created_at"),
            )
            .group_by(KnowledgeSyncJob.student_id)
            .subquery()
        )
        rows = await self._session.execute(
            select(
                KnowledgeSyncJob.student_id,
                KnowledgeSyncJob.kind,
                KnowledgeSyncJob.status,
                KnowledgeSyncJob.created_at,
                KnowledgeSyncJob.finished_at,
                KnowledgeSyncJob.error_code,
            )
            .join(
                newest,
                and_(
                    KnowledgeSyncJob.student_id == newest.c.student_id,
                    KnowledgeSyncJob.created_at == newest.c.created_at,
                ),
            )
            .order_by(KnowledgeSyncJob.id)
        )
        latest: dict[str, SyncSummary] = {}
        for row in rows:  # two jobs created at the same instant: either is the latest
            latest.setdefault(row.student_id, view_of(SyncSummary, row))
        return latest

    async def upstream_calls_since(self, since: datetime) -> dict[str, int]:
        """Upstream requests of every facility in the hours from ``since``'s hour, by hotel_id."""
        rows = await self._session.execute(
            select(GatewayUsageHour.hotel_id, func.sum(GatewayUsageHour.upstream_calls))
            .where(GatewayUsageHour.hour >= since)
            .group_by(GatewayUsageHour.hotel_id)
        )
        return {row[0]: int(row[1] or 0) for row in rows}
