"""Knowledge-sync records (issue 5): the only queries on page states and sync jobs.

- **Page states** remember, per apartment page, what the last read saw: the page's
  ``last_edited_time``, when the read began, the template check's outcome and the
  content hash of every node the page yields — never the content itself (a WiFi
  password is a secret). ``synced_listing_id`` is set only once every one of those
  nodes is on the platform; a new read with other hashes clears it. They are an
  optimisation: the platform's nodes, matched by source key, stay the ground truth.
- **Sync jobs** are the dry runs and commits the CLI and the web app start, with
  status, progress, counters and the runner's heartbeat. A partial UNIQUE index
  allows one active (queued or running) job per customer across replicas, because
  two commits racing would each create the nodes the other has not seen yet.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast, get_args

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import Clock, SystemClock
from pmsgate.errors import Conflict, NotFound, PmsgateError
from pmsgate.storage.customers import student_id_value
from pmsgate.storage.integrity import (
    FOREIGN_KEY,
    customer_not_found,
    dialect_insert,
    one_of,
    translate_integrity_error,
    violated_constraint,
)
from pmsgate.storage.models import (
    ACTIVE_SYNC_JOB_STATUSES,
    KnowledgePageState,
    KnowledgeSyncJob,
    SyncJobKind,
    SyncJobStatus,
)

MAX_ERROR = 2000


@dataclass(frozen=True)
class PageStateView:
    """What the last read of one apartment page saw."""

    student_id: str
    notes_page_id: str
    page_edited_at: datetime | None
    read_at: datetime
    format_version: int
    template_complete: bool
    missing_sections: tuple[str, ...]
    wifi_found: bool
    wifi_source_key: str | None
    node_hashes: dict[str, str]
    synced_listing_id: str | None
    synced_at: datetime | None
    updated_at: datetime


def _page_view(row: KnowledgePageState) -> PageStateView:
    return PageStateView(
        student_id=row.student_id,
        notes_page_id=row.notes_page_id,
        page_edited_at=row.page_edited_at,
        read_at=row.read_at,
        format_version=row.format_version,
        template_complete=row.template_complete,
        missing_sections=tuple(row.missing_sections or ()),
        wifi_found=row.wifi_found,
        wifi_source_key=row.wifi_source_key,
        node_hashes=dict(row.node_hashes or {}),
        synced_listing_id=row.synced_listing_id,
        synced_at=row.synced_at,
        updated_at=row.updated_at,
    )


@dataclass(frozen=True)
class SyncJobView:
    """A stored sync job."""

    id: str
    student_id: str
    kind: SyncJobKind
    status: SyncJobStatus
    progress_done: int
    progress_total: int
    counters: dict[str, Any] | None
    report: dict[str, Any] | None
    error_code: str | None
    error: str | None
    runner_id: str
    created_at: datetime
    started_at: datetime | None
    heartbeat_at: datetime | None
    finished_at: datetime | None

    @property
    def active(self) -> bool:
        """Whether the job is queued or running."""
        return self.status in ACTIVE_SYNC_JOB_STATUSES


def _job_view(row: KnowledgeSyncJob) -> SyncJobView:
    return SyncJobView(
        id=row.id,
        student_id=row.student_id,
        kind=cast(SyncJobKind, row.kind),
        status=cast(SyncJobStatus, row.status),
        progress_done=row.progress_done,
        progress_total=row.progress_total,
        counters=dict(row.counters) if row.counters is not None else None,
        report=dict(row.report) if row.report is not None else None,
        error_code=row.error_code,
        error=row.error,
        runner_id=row.runner_id,
        created_at=row.created_at,
        started_at=row.started_at,
        heartbeat_at=row.heartbeat_at,
        finished_at=row.finished_at,
    )


def job_not_found(job_id: str) -> NotFound:
    """The error for a sync job id that does not exist."""
    return NotFound(
        f"No knowledge-sync job {job_id}.",
        code="sync_job_not_found",
        hint="Use the job id returned when the sync was started.",
    )


def sync_already_running(student_id: str, job_id: str | None) -> Conflict:
    """The error for a second sync of a customer while one is queued or running."""
    return Conflict(
        f"A knowledge sync of {student_id} is already running"
        + (f" (job {job_id})." if job_id else "."),
        code="sync_already_running",
        hint="Poll that job's status; start another once it has finished.",
    )


class KnowledgeSyncRepository:
    """Page states and sync jobs."""

    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], clock: Clock | None = None
    ) -> None:
        self._sessions = sessions
        self._clock = clock or SystemClock()

    # --- page states ---------------------------------------------------------------------------

    async def page_states(self, student_id: str) -> dict[str, PageStateView]:
        """Every stored page state of the customer, by notes page id."""
        async with self._sessions() as session:
            rows = await session.scalars(
                select(KnowledgePageState).where(
                    KnowledgePageState.student_id == student_id.strip()
                )
            )
            return {row.notes_page_id: _page_view(row) for row in rows}

    async def save_page_read(
        self,
        student_id: str,
        notes_page_id: str,
        *,
        page_edited_at: datetime | None,
        read_at: datetime,
        format_version: int,
        template_complete: bool,
        missing_sections: Sequence[str],
        wifi_found: bool,
        wifi_source_key: str | None,
        node_hashes: Mapping[str, str],
    ) -> PageStateView:
        """Record a read of the page; other node hashes than before void the stored sync."""
        student_id = student_id_value(student_id)
        values: dict[str, Any] = {
            "page_edited_at": page_edited_at,
            "read_at": read_at,
            "format_version": format_version,
            "template_complete": template_complete,
            "missing_sections": list(missing_sections),
            "wifi_found": wifi_found,
            "wifi_source_key": wifi_source_key,
            "node_hashes": dict(node_hashes),
            "updated_at": self._clock.now(),
        }
        try:
            async with self._sessions.begin() as session:
                row = await session.scalar(
                    select(KnowledgePageState)
                    .where(
                        KnowledgePageState.student_id == student_id,
                        KnowledgePageState.notes_page_id == notes_page_id,
                    )
                    .with_for_update()
                )
                if row is None:
                    statement = dialect_insert(session, KnowledgePageState).values(
                        student_id=student_id, notes_page_id=notes_page_id, **values
                    )
                    # A concurrent first read of the same page: the later one wins.
                    row = (
                        await session.scalars(
                            statement.on_conflict_do_update(
                                index_elements=[
                                    KnowledgePageState.student_id,
                                    KnowledgePageState.notes_page_id,
                                ],
                                set_=values,
                            ).returning(KnowledgePageState)
                        )
                    ).one()
                else:
                    if dict(row.node_hashes or {}) != values["node_hashes"]:
                        # The platform holds the old nodes until the next commit writes these.
                        row.synced_listing_id = None
                        row.synced_at = None
                    for column, value in values.items():
                        setattr(row, column, value)
        except IntegrityError as error:
            raise self._translate(error, student_id, KnowledgePageState.__table__) from None
        return _page_view(row)

    async def mark_page_synced(
        self, student_id: str, notes_page_id: str, listing_id: str, node_hashes: Mapping[str, str]
    ) -> bool:
        """Record that the page's nodes are on the platform; False if its read changed since."""
        now = self._clock.now()
        async with self._sessions.begin() as session:
            updated = await session.scalar(
                update(KnowledgePageState)
                .where(
                    KnowledgePageState.student_id == student_id.strip(),
                    KnowledgePageState.notes_page_id == notes_page_id,
                )
                .values(synced_listing_id=listing_id, synced_at=now, updated_at=now)
                .returning(KnowledgePageState)
            )
            if updated is None:
                return False
            if dict(updated.node_hashes or {}) != dict(node_hashes):
                # Another read stored other hashes meanwhile: what we wrote is not what it saw.
                updated.synced_listing_id = None
                updated.synced_at = None
                return False
        return True

    async def forget_page_sync(self, student_id: str, notes_page_id: str) -> None:
        """Void the stored sync of a page (its nodes may be partly written)."""
        async with self._sessions.begin() as session:
            await session.execute(
                update(KnowledgePageState)
                .where(
                    KnowledgePageState.student_id == student_id.strip(),
                    KnowledgePageState.notes_page_id == notes_page_id,
                )
                .values(synced_listing_id=None, synced_at=None, updated_at=self._clock.now())
            )

    # --- jobs ----------------------------------------------------------------------------------

    async def create_job(
        self, job_id: str, student_id: str, kind: str, *, runner_id: str
    ) -> SyncJobView:
        """A queued job; ``sync_already_running`` when the customer has an active one."""
        student_id = student_id_value(student_id)
        kind = one_of(kind, get_args(SyncJobKind), "kind")
        row = KnowledgeSyncJob(
            id=job_id,
            student_id=student_id,
            kind=kind,
            status="queued",
            progress_done=0,
            progress_total=0,
            runner_id=runner_id,
            created_at=self._clock.now(),
        )
        try:
            async with self._sessions.begin() as session:
                session.add(row)
        except IntegrityError as error:
            if self._violated(error) == "uq_knowledge_sync_jobs_one_active":
                active = await self.active_job(student_id)
                raise sync_already_running(student_id, active.id if active else None) from None
            raise self._translate(error, student_id) from None
        return _job_view(row)

    async def get_job(self, job_id: str) -> SyncJobView:
        """One job; ``sync_job_not_found`` otherwise."""
        async with self._sessions() as session:
            row = await session.get(KnowledgeSyncJob, job_id)
        if row is None:
            raise job_not_found(job_id)
        return _job_view(row)

    async def active_job(self, student_id: str) -> SyncJobView | None:
        """The customer's queued or running job, if any."""
        async with self._sessions() as session:
            row = await session.scalar(
                select(KnowledgeSyncJob).where(
                    KnowledgeSyncJob.student_id == student_id.strip(),
                    KnowledgeSyncJob.status.in_(ACTIVE_SYNC_JOB_STATUSES),
                )
            )
        return _job_view(row) if row is not None else None

    async def jobs_of(self, student_id: str, *, limit: int = 20) -> list[SyncJobView]:
        """The customer's most recent jobs, newest first."""
        async with self._sessions() as session:
            rows = await session.scalars(
                select(KnowledgeSyncJob)
                .where(KnowledgeSyncJob.student_id == student_id.strip())
                .order_by(KnowledgeSyncJob.created_at.desc(), KnowledgeSyncJob.id.desc())
                .limit(limit)
            )
            return [_job_view(row) for row in rows]

    async def start_job(self, job_id: str) -> SyncJobView:
        """Mark a queued job running."""
        now = self._clock.now()
        return await self._set(
            job_id, status="running", started_at=now, heartbeat_at=now, only_active=True
        )

    async def update_progress(
        self, job_id: str, done: int, total: int, counters: Mapping[str, Any] | None = None
    ) -> None:
        """Record progress (and the heartbeat) of a running job."""
        values: dict[str, Any] = {
            "progress_done": max(0, done),
            "progress_total": max(0, total),
            "heartbeat_at": self._clock.now(),
        }
        if counters is not None:
            values["counters"] = dict(counters)
        async with self._sessions.begin() as session:
            await session.execute(
                update(KnowledgeSyncJob)
                .where(KnowledgeSyncJob.id == job_id, KnowledgeSyncJob.status == "running")
                .values(**values)
            )

    async def finish_job(
        self,
        job_id: str,
        status: SyncJobStatus,
        *,
        counters: Mapping[str, Any] | None = None,
        report: Mapping[str, Any] | None = None,
        error_code: str | None = None,
        error: str | None = None,
        progress: tuple[int, int] | None = None,
    ) -> SyncJobView:
        """Mark a job succeeded or failed, with its counters, report, error or final progress."""
        status = cast(SyncJobStatus, one_of(status, ("succeeded", "failed"), "status"))
        extra: dict[str, Any] = {}
        if progress is not None:
            extra = {"progress_done": max(0, progress[0]), "progress_total": max(0, progress[1])}
        return await self._set(
            job_id,
            **extra,
            status=status,
            counters=dict(counters) if counters is not None else None,
            report=dict(report) if report is not None else None,
            error_code=error_code,
            error=error[:MAX_ERROR] if error else None,
            finished_at=self._clock.now(),
        )

    async def interrupt_stale_jobs(
        self, heartbeat_before: datetime, *, runner_id: str | None = None
    ) -> list[str]:
        """Fail the active jobs whose runner stopped beating (or, given, that runner's jobs)."""
        condition = KnowledgeSyncJob.heartbeat_at.is_(None) | (
            KnowledgeSyncJob.heartbeat_at < heartbeat_before
        )
        if runner_id is not None:
            condition = condition | (KnowledgeSyncJob.runner_id == runner_id)
        now = self._clock.now()
        async with self._sessions.begin() as session:
            rows = await session.scalars(
                update(KnowledgeSyncJob)
                .where(
                    KnowledgeSyncJob.status.in_(ACTIVE_SYNC_JOB_STATUSES),
                    condition,
                )
                .values(
                    status="failed",
                    error_code="sync_interrupted",
                    error="The process running the sync stopped before it finished; "
                    "run the sync again (it resumes without duplicates).",
                    finished_at=now,
                )
                .returning(KnowledgeSyncJob.id)
            )
            return list(rows)

    async def _set(self, job_id: str, *, only_active: bool = False, **values: Any) -> SyncJobView:
        async with self._sessions.begin() as session:
            statement = update(KnowledgeSyncJob).where(KnowledgeSyncJob.id == job_id)
            if only_active:
                statement = statement.where(KnowledgeSyncJob.status.in_(ACTIVE_SYNC_JOB_STATUSES))
            row = await session.scalar(statement.values(**values).returning(KnowledgeSyncJob))
        if row is None:
            found = await self.get_job(job_id)  # sync_job_not_found when absent
            raise Conflict(
                f"Knowledge-sync job {job_id} is already {found.status}.",
                code="sync_job_finished",
                hint="Start a new sync.",
            )
        return _job_view(row)

    @staticmethod
    def _violated(error: IntegrityError) -> str | None:
        return violated_constraint(error, KnowledgeSyncJob.__table__)  # type: ignore[arg-type]

    @staticmethod
    def _translate(
        error: IntegrityError, student_id: str, table: Any = KnowledgeSyncJob.__table__
    ) -> PmsgateError:
        return translate_integrity_error(
            error, table, {FOREIGN_KEY: lambda: customer_not_found(student_id)}
        )
