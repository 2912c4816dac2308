"""Reconciliation: the incidents made to match the problems observed now.

Each tick of ``notify-incidents`` (jobs/notify.py) reads what is already stored — the
facilities in error, the scheduled jobs that keep failing, the registry checks with
problems, the facilities whose daily budget is spent — and opens an incident for a problem
not yet open, counts a newer failed attempt of an open one, resolves what is no longer
observed and wakes the snoozes whose time has passed (docs/operations.md, Incidents; the
rules are told in :mod:`pmsgate.web.incidents`).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, asdict, dataclass, field
from datetime import datetime
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.audit.actions import Actor, AuditAction, Outcome
from pmsgate.audit.trail import AuditTrail
from pmsgate.clock import Clock
from pmsgate.gateway.context import GatewayServices
from pmsgate.gateway.facilities import subject_of
from pmsgate.storage.gateway_usage import hour_start
from pmsgate.storage.incidents import IncidentRecord, IncidentRepository
from pmsgate.storage.job_runs import JobRunRepository
from pmsgate.storage.models import RegistryCheckStatus
from pmsgate.storage.registry_checks import RegistryCheckRepository
from pmsgate.storage.webhooks import WebhookRepository
from pmsgate.web.admin_views import AdminOverview

log = structlog.get_logger(__name__)

RECONCILER = Actor.system("incidents")
PROBLEMS: tuple[RegistryCheckStatus, ...] = ("problems",)
JOB_FAILURES_TO_OPEN = 2
BUDGET_EXHAUSTED_PCT = 100.0


@dataclass(frozen=True)
class Observation:
    """A problem seen now: what incident it belongs to and its latest failed attempt."""

    kind: str
    subject: str
    attempt_at: datetime
    facility_id: int | None = None
    student_id: str | None = None
    job: str | None = None
    incident_at: datetime | None = None
    reason: str | None = None


@dataclass
class ReconcileSummary:
    """What one reconciliation changed (the job run's detail)."""

    opened: list[str] = field(default_factory=list)
    resolved: list[str] = field(default_factory=list)
    woke: list[str] = field(default_factory=list)
    counted: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


@dataclass(frozen=True, repr=False)
class IncidentReconciler:
    """Opens, counts, resolves and wakes incidents from what is observed now."""

    sessions: async_sessionmaker[AsyncSession]
    _: KW_ONLY
    clock: Clock
    gateway: GatewayServices
    audit: AuditTrail

    async def _observations(self) -> list[Observation]:
        now = self.clock.now()
        async with self.sessions() as session:
            repository = IncidentRepository(session)
            in_error = await repository.facilities_in_error()
            runs = JobRunRepository(session)
            latest = await runs.latest_by_job()
            failing = {}
            for job, run in latest.items():
                if run.status != "failed":
                    continue
                recent = await runs.recent(job, JOB_FAILURES_TO_OPEN)
                failing[job] = (run, recent)
            open_jobs = {
                record.job
                for record in await repository.unresolved()
                if record.kind == "job_failing" and record.job
            }
            checks = await RegistryCheckRepository(session).with_status(PROBLEMS)
        found = [
            Observation(
                kind="pms_error",
                subject=subject_of(facility.hotel_id),
                attempt_at=facility.last_auth_attempt_at or facility.status_changed_at,
                facility_id=facility.facility_id,
                student_id=facility.student_id,
                incident_at=facility.status_changed_at,
                reason=facility.last_error,
            )
            for facility in in_error
        ]
        for job, (run, recent) in failing.items():
            keeps_failing = len(recent) >= JOB_FAILURES_TO_OPEN and all(
                r.status == "failed" for r in recent
            )
            if keeps_failing or job in open_jobs:
                found.append(
                    Observation(
                        kind="job_failing",
                        subject=f"job:{job}",
                        attempt_at=run.started_at,
                        job=job,
                        reason=run.error_code or "the latest run failed",
                    )
                )
        for check in checks:
            reasons = [str(p.get("reason", "")) for p in check.report.get("problems") or []]
            found.append(
                Observation(
                    kind="registry",
                    subject=f"customer:{check.student_id}",
                    attempt_at=check.checked_at,
                    student_id=check.student_id,
                    reason=(reasons[0] if reasons else f"{check.problems} problems")[:300],
                )
            )
        overview = AdminOverview(
            self.sessions, self.clock, snapshot=self.gateway.metrics.facilities
        )
        spent = [
            row
            for row in (await overview.fleet()).rows
            if row.hotel_id is not None
            and row.budget_percent is not None
            and row.budget_percent >= BUDGET_EXHAUSTED_PCT
        ]
        if spent:
            async with self.sessions() as session:
                ids = await IncidentRepository(session).facility_ids(
                    [row.hotel_id for row in spent if row.hotel_id]
                )
            for row in spent:
                hotel_id = row.hotel_id or ""
                found.append(
                    Observation(
                        kind="budget",
                        subject=subject_of(hotel_id),
                        attempt_at=hour_start(now),
                        student_id=row.student_id,
                        facility_id=ids.get(hotel_id),
                        reason=f"{row.budget_used:,} of {row.budget_allowed:,} requests of the "
                        "daily budget used in the last 24 hours",
                    )
                )
        return found

    async def reconcile(self) -> ReconcileSummary:
        """Open, count, resolve and wake: the incidents made to match what is observed now."""
        observed = await self._observations()
        now = self.clock.now()
        summary = ReconcileSummary()
        async with self.sessions.begin() as session:
            repository = IncidentRepository(session)
            current = {(r.kind, r.subject): r for r in await repository.unresolved()}
            for seen in observed:
                found = current.pop((seen.kind, seen.subject), None)
                if (
                    found is not None
                    and seen.incident_at is not None
                    and found.incident_at is not None
                    and found.incident_at != seen.incident_at
                ):
                    # Recovered and broken again between two ticks: that incident ended.
                    await self._resolve(session, found, now, summary, why="in error again since")
                    found = None
                if found is None:
                    await self._open(session, seen, now, summary)
                elif await repository.observe(found.id, seen.attempt_at, seen.reason, now):
                    summary.counted += 1
            for gone in current.values():
                await self._resolve(session, gone, now, summary)
            for incident_id in await repository.snoozes_ended(now):
                await repository.add_event(incident_id, at=now, kind="woke", actor=str(RECONCILER))
                summary.woke.append(str(incident_id))
        if summary.opened or summary.resolved:
            log.info("incidents_reconciled", **summary.as_dict())
        return summary

    async def _open(
        self, session: AsyncSession, seen: Observation, now: datetime, summary: ReconcileSummary
    ) -> None:
        repository = IncidentRepository(session)
        incident_id = await repository.open(
            kind=seen.kind,
            subject=seen.subject,
            facility_id=seen.facility_id,
            student_id=seen.student_id,
            job=seen.job,
            incident_at=seen.incident_at,
            reason=(seen.reason or "")[:300] or None,
            attempt_at=seen.attempt_at,
            now=now,
        )
        if incident_id is None:
            return  # another replica opened it
        await repository.add_event(
            incident_id,
            at=now,
            kind="opened",
            actor=str(RECONCILER),
            details={"reason": (seen.reason or "")[:300]},
        )
        await self.audit.record_in(
            session,
            AuditAction.INCIDENT_OPENED,
            actor=RECONCILER,
            subject=seen.subject,
            outcome=Outcome.FAILURE,
            details={"incident": incident_id, "kind": seen.kind},
            facility_id=seen.facility_id,
            student_id=seen.student_id,
        )
        if seen.kind == "budget":
            # The signed webhook, once per budget incident, committed with its opening.
            await WebhookRepository(session).add_event(
                "facility.budget_exhausted",
                {
                    "hotel_id": seen.subject.removeprefix(subject_of("")),
                    "incident_id": incident_id,
                    "reason": seen.reason,
                },
                occurred_at=now,
                student_id=seen.student_id,
                facility_id=seen.facility_id,
            )
        summary.opened.append(f"{seen.kind} {seen.subject}")

    async def _resolve(
        self,
        session: AsyncSession,
        record: IncidentRecord,
        now: datetime,
        summary: ReconcileSummary,
        *,
        why: str | None = None,
    ) -> None:
        repository = IncidentRepository(session)
        if not await repository.resolve(record.id, now):
            return  # another replica resolved it
        await repository.add_event(
            record.id,
            at=now,
            kind="recovered",
            actor=str(RECONCILER),
            details={"why": why} if why else {},
        )
        await self.audit.record_in(
            session,
            AuditAction.INCIDENT_RESOLVED,
            actor=RECONCILER,
            subject=record.subject,
            details={"incident": record.id, "kind": record.kind, "failures": record.failures},
            facility_id=record.facility_id,
            student_id=record.student_id,
        )
        summary.resolved.append(f"{record.kind} {record.subject}")
