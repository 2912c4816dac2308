"""Page states and sync jobs as the knowledge sync and its job runner use them.

Each call is one transaction over :class:`pmsgate.storage.knowledge.KnowledgeSyncRepository`;
this service checks the values it is given and raises the caller-facing errors
(``sync_already_running``, ``sync_job_not_found``, ``sync_job_finished``). A job changes
state in one conditional UPDATE (queued or running → running, succeeded or failed), so two
runners — or a runner and another replica's recovery — never both claim or finish it, on
SQLite and PostgreSQL alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast, get_args

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from pmsgate.customers.checks import (
    customer_not_found,
    one_of,
    student_id_value,
    translate_integrity_error,
)
from pmsgate.errors import Conflict, NotFound, PmsgateError
from pmsgate.storage.integrity import FOREIGN_KEY, violated_constraint
from pmsgate.storage.knowledge import (
    MAX_ERROR,
    KnowledgeSyncRepository,
    PageStateView,
    SyncJobView,
)
from pmsgate.storage.models import (
    KnowledgePageState,
    KnowledgeSyncJob,
    SyncJobKind,
    SyncJobStatus,
)
from pmsgate.storage.records import Records
from pmsgate.storage.webhooks import WebhookRepository


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


def _refused(error: IntegrityError, student_id: str, table: Any) -> PmsgateError:
    return translate_integrity_error(
        error, table, {FOREIGN_KEY: lambda: customer_not_found(student_id)}
    )


class KnowledgeSyncRecords(Records):
    """Reads and records page states; creates, claims, advances and finishes sync jobs."""

    # --- page states ---------------------------------------------------------------------------

    async def page_states(self, student_id: str) -> dict[str, PageStateView]:
        """Every stored page state of the customer, by notes page id."""
        async with self._sessions() as session:
            return await KnowledgeSyncRepository(session).page_states(student_id.strip())

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
                return await KnowledgeSyncRepository(session).save_page_read(
                    student_id, notes_page_id, values
                )
        except IntegrityError as error:
            raise _refused(error, student_id, KnowledgePageState.__table__) from None

    async def mark_page_synced(
        self, student_id: str, notes_page_id: str, listing_id: str, node_hashes: Mapping[str, str]
    ) -> bool:
        """Record that the page's nodes are on the platform; False if its read changed since."""
        async with self._sessions.begin() as session:
            return await KnowledgeSyncRepository(session).mark_page_synced(
                student_id.strip(), notes_page_id, listing_id, node_hashes, self._clock.now()
            )

    async def forget_page_sync(self, student_id: str, notes_page_id: str) -> None:
        """Void the stored sync of a page (its nodes may be partly written)."""
        async with self._sessions.begin() as session:
            await KnowledgeSyncRepository(session).forget_page_sync(
                student_id.strip(), notes_page_id, self._clock.now()
            )

    # --- jobs ----------------------------------------------------------------------------------

    async def create_job(
        self, job_id: str, student_id: str, kind: str, *, runner_id: str
    ) -> SyncJobView:
        """A queued job; ``sync_already_running`` when the customer has an active one."""
        student_id = student_id_value(student_id)
        checked = cast(SyncJobKind, one_of(kind, get_args(SyncJobKind), "kind"))
        try:
            async with self._sessions.begin() as session:
                return await KnowledgeSyncRepository(session).add_job(
                    job_id, student_id, checked, runner_id, self._clock.now()
                )
        except IntegrityError as error:
            table = KnowledgeSyncJob.__table__
            if violated_constraint(error, table) == "uq_knowledge_sync_jobs_one_active":  # type: ignore[arg-type]
                active = await self.active_job(student_id)
                raise sync_already_running(student_id, active.id if active else None) from None
            raise _refused(error, student_id, table) from None

    async def get_job(self, job_id: str) -> SyncJobView:
        """One job; ``sync_job_not_found`` otherwise."""
        async with self._sessions() as session:
            job = await KnowledgeSyncRepository(session).get_job(job_id)
        if job is None:
            raise job_not_found(job_id)
        return job

    async def active_job(self, student_id: str) -> SyncJobView | None:
        """The customer's queued or running job, if any."""
        async with self._sessions() as session:
            return await KnowledgeSyncRepository(session).active_job(student_id.strip())

    async def jobs_of(self, student_id: str, *, limit: int = 20) -> list[SyncJobView]:
        """The customer's most recent jobs, newest first."""
        async with self._sessions() as session:
            return await KnowledgeSyncRepository(session).jobs_of(student_id.strip(), limit)

    async def start_job(self, job_id: str) -> SyncJobView:
        """Mark a queued job running."""
        now = self._clock.now()
        return await self._set(
            job_id, {"status": "running", "started_at": now, "heartbeat_at": now}, only_active=True
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
            await KnowledgeSyncRepository(session).update_running_job(job_id, values)

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
        values: dict[str, Any] = {}
        if progress is not None:
            values = {"progress_done": max(0, progress[0]), "progress_total": max(0, progress[1])}
        values.update(
            status=status,
            counters=dict(counters) if counters is not None else None,
            report=dict(report) if report is not None else None,
            error_code=error_code,
            error=error[:MAX_ERROR] if error else None,
            finished_at=self._clock.now(),
        )
        async with self._sessions.begin() as session:
            job = await KnowledgeSyncRepository(session).update_job(job_id, values)
            if job is not None:
                await _sync_event(session, job)
        if job is None:
            raise await self._finished_already(job_id)
        return job

    async def interrupt_stale_jobs(
        self, heartbeat_before: datetime, *, runner_id: str | None = None
    ) -> list[str]:
        """Fail the active jobs whose runner stopped beating (or, given, that runner's jobs)."""
        async with self._sessions.begin() as session:
            repository = KnowledgeSyncRepository(session)
            failed = await repository.fail_stale_jobs(
                heartbeat_before, runner_id, self._clock.now()
            )
            for job_id in failed:
                job = await repository.get_job(job_id)
                if job is not None:
                    await _sync_event(session, job)
            return failed

    async def _set(
        self, job_id: str, values: Mapping[str, Any], *, only_active: bool = False
    ) -> SyncJobView:
        async with self._sessions.begin() as session:
            job = await KnowledgeSyncRepository(session).update_job(
                job_id, values, only_active=only_active
            )
        if job is None:
            raise await self._finished_already(job_id)
        return job

    async def _finished_already(self, job_id: str) -> Conflict:
        found = await self.get_job(job_id)  # sync_job_not_found when absent
        return Conflict(
            f"Knowledge-sync job {job_id} is already {found.status}.",
            code="sync_job_finished",
            hint="Start a new sync.",
        )


async def _sync_event(session: AsyncSession, job: SyncJobView) -> None:
    """The signed webhook of a finished sync (docs/webhooks.md), in the finishing transaction."""
    succeeded = job.status == "succeeded"
    data: dict[str, Any] = {"job_id": job.id, "kind": job.kind, "status": job.status}
    if succeeded:
        data["counters"] = dict(job.counters or {})
    else:
        data["error_code"] = job.error_code
    await WebhookRepository(session).add_event(
        "knowledge.sync_finished" if succeeded else "knowledge.sync_failed",
        data,
        occurred_at=job.finished_at or job.created_at,
        student_id=job.student_id,
    )
