"""Knowledge-sync records (docs/knowledge-sync.md): the only queries on page states and sync jobs.

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

What is stored is checked first, and each transaction opened and committed, by
:class:`pmsgate.knowledge.records.KnowledgeSyncRecords`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, select, update

from pmsgate.storage.integrity import dialect_insert
from pmsgate.storage.models import (
    ACTIVE_SYNC_JOB_STATUSES,
    KnowledgePageState,
    KnowledgeSyncJob,
    SyncJobKind,
    SyncJobStatus,
)
from pmsgate.storage.repository import Repository
from pmsgate.storage.views import view_of

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
    return view_of(
        PageStateView,
        row,
        missing_sections=tuple(row.missing_sections or ()),
        node_hashes=dict(row.node_hashes or {}),
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
    return view_of(
        SyncJobView,
        row,
        counters=dict(row.counters) if row.counters is not None else None,
        report=dict(row.report) if row.report is not None else None,
    )


class KnowledgeSyncRepository(Repository):
    """Page states and sync jobs (values already checked), in the caller's session; never
    commits (a broken constraint raises ``IntegrityError``)."""

    # --- page states ---------------------------------------------------------------------------

    async def page_states(self, student_id: str) -> dict[str, PageStateView]:
        """Every stored page state of the customer, by notes page id."""
        rows = await self._session.scalars(
            select(KnowledgePageState).where(KnowledgePageState.student_id == student_id)
        )
        return {row.notes_page_id: _page_view(row) for row in rows}

    async def save_page_read(
        self, student_id: str, notes_page_id: str, values: Mapping[str, Any]
    ) -> PageStateView:
        """Record a read of the page (``values`` are the columns it sets, ``updated_at``
        included); other node hashes than before void the stored sync."""
        row = await self._session.scalar(
            select(KnowledgePageState)
            .where(
                KnowledgePageState.student_id == student_id,
                KnowledgePageState.notes_page_id == notes_page_id,
            )
            .with_for_update()
        )
        if row is None:
            statement = dialect_insert(self._session, KnowledgePageState).values(
                student_id=student_id, notes_page_id=notes_page_id, **values
            )
            # A concurrent first read of the same page: the later one wins.
            row = (
                await self._session.scalars(
                    statement.on_conflict_do_update(
                        index_elements=[
                            KnowledgePageState.student_id,
                            KnowledgePageState.notes_page_id,
                        ],
                        set_=dict(values),
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
            await self._session.flush()
        return _page_view(row)

    async def mark_page_synced(
        self,
        student_id: str,
        notes_page_id: str,
        listing_id: str,
        node_hashes: Mapping[str, str],
        now: datetime,
    ) -> bool:
        """Record that the page's nodes are on the platform; False if its read changed since."""
        updated = await self._session.scalar(
            update(KnowledgePageState)
            .where(
                KnowledgePageState.student_id == student_id,
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
            await self._session.flush()
            return False
        return True

    async def forget_page_sync(self, student_id: str, notes_page_id: str, now: datetime) -> None:
        """Void the stored sync of a page (its nodes may be partly written)."""
        await self._session.execute(
            update(KnowledgePageState)
            .where(
                KnowledgePageState.student_id == student_id,
                KnowledgePageState.notes_page_id == notes_page_id,
            )
            .values(synced_listing_id=None, synced_at=None, updated_at=now)
        )

    # --- jobs ----------------------------------------------------------------------------------

    async def add_job(
        self, job_id: str, student_id: str, kind: SyncJobKind, runner_id: str, now: datetime
    ) -> SyncJobView:
        """A queued job (flushed: a second active job of the customer raises here)."""
        row = KnowledgeSyncJob(
            id=job_id,
            student_id=student_id,
            kind=kind,
            status="queued",
            progress_done=0,
            progress_total=0,
            runner_id=runner_id,
            created_at=now,
        )
        await self._add(row)
        return _job_view(row)

    async def get_job(self, job_id: str) -> SyncJobView | None:
        """One job, if it exists."""
        row = await self._session.get(KnowledgeSyncJob, job_id)
        return _job_view(row) if row is not None else None

    async def active_job(self, student_id: str) -> SyncJobView | None:
        """The customer's queued or running job, if any."""
        row = await self._session.scalar(
            select(KnowledgeSyncJob).where(
                KnowledgeSyncJob.student_id == student_id,
                KnowledgeSyncJob.status.in_(ACTIVE_SYNC_JOB_STATUSES),
            )
        )
        return _job_view(row) if row is not None else None

    async def jobs_of(self, student_id: str, limit: int) -> list[SyncJobView]:
        """The customer's most recent jobs, newest first."""
        rows = await self._session.scalars(
            select(KnowledgeSyncJob)
            .where(KnowledgeSyncJob.student_id == student_id)
            .order_by(KnowledgeSyncJob.created_at.desc(), KnowledgeSyncJob.id.desc())
            .limit(limit)
        )
        return [_job_view(row) for row in rows]

    async def update_job(
        self, job_id: str, values: Mapping[str, Any], *, only_active: bool = False
    ) -> SyncJobView | None:
        """Set columns of a job in one statement (of an active one only, when asked: so a
        job is claimed or finished once); None when no row matched."""
        statement = update(KnowledgeSyncJob).where(KnowledgeSyncJob.id == job_id)
        if only_active:
            statement = statement.where(KnowledgeSyncJob.status.in_(ACTIVE_SYNC_JOB_STATUSES))
        row = await self._session.scalar(statement.values(**values).returning(KnowledgeSyncJob))
        return _job_view(row) if row is not None else None

    async def update_running_job(self, job_id: str, values: Mapping[str, Any]) -> None:
        """Set columns of a job that is running (nothing otherwise)."""
        await self._session.execute(
            update(KnowledgeSyncJob)
            .where(KnowledgeSyncJob.id == job_id, KnowledgeSyncJob.status == "running")
            .values(**values)
        )

    async def fail_stale_jobs(
        self, heartbeat_before: datetime, runner_id: str | None, now: datetime
    ) -> list[str]:
        """Fail the active jobs whose runner stopped beating (or, given, that runner's jobs).

        A job not yet started has no heartbeat; it counts as stale only once it was
        created before ``heartbeat_before`` (a job queued a moment ago is not abandoned).
        """
        never_beat = KnowledgeSyncJob.heartbeat_at.is_(None) & (
            KnowledgeSyncJob.created_at < heartbeat_before
        )
        condition: ColumnElement[bool] = never_beat | (
            KnowledgeSyncJob.heartbeat_at < heartbeat_before
        )
        if runner_id is not None:
            condition = condition | (KnowledgeSyncJob.runner_id == runner_id)
        rows = await self._session.scalars(
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
