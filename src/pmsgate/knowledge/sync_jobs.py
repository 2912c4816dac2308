"""Knowledge-sync jobs: a sync in the background, its status polled (docs/requirements.md R17.2).

The web app's ``POST /api/{assistant}/sync-knowledge {commit}`` must never hold a
request open longer than a proxy allows (a 504 after 300 s), yet a
synchronous caller still wants the counters when the sync is quick. So:

- :meth:`SyncJobs.start` records a job (``queued``) and runs the sync as an asyncio
  task of this process; :meth:`SyncJobs.status` reads it back (status, progress
  done/total in apartments, the counters so far, the error);
- :meth:`SyncJobs.run_sync_within` starts one and waits for it at most
  ``max_duration_s`` (800 s): it answers the counters if the job finished
  by then, else the job id to poll — the job keeps running either way;
- :meth:`SyncJobs.run` runs one in the foreground (the CLI), recorded the same way.

One active job per customer (a partial UNIQUE index, so across replicas too): a
second start answers ``sync_already_running`` with the running job's id.

**The allowlist** (docs/requirements.md R17.6). Every job — the JSON API's, the
console's, ``pmsgate knowledge sync``'s — is created by :meth:`SyncJobs._create`, which
first asks :meth:`pmsgate.customers.allowlist.Allowlist.require_customer`: a customer
whose registered e-mail is not on the knowledge allowlist gets 403 ``not_on_allowlist``
and no job is recorded. The list is read on every start, so removing an entry takes
effect at once.

**Interruptions.** A running job beats (``heartbeat_at``) every
``heartbeat_interval_s`` while it runs. A process that stops (restart, crash, kill)
leaves its jobs ``running`` with a heartbeat that ages: :meth:`SyncJobs.recover`
(called on entering, and before refusing a start) marks every active job whose
heartbeat is older than ``stale_after_s`` as ``failed`` with
``sync_interrupted``. Running the sync again is safe: it resumes without
duplicates (the platform's nodes are matched by source key). Jobs this process
cancels on shutdown are marked ``failed`` with ``sync_cancelled`` at once.

**Metrics.** With the process's metrics, each job this process runs counts as started
(``pmsgate_knowledge_sync_jobs_started{mode}``) and, once finished, by mode and outcome
(``succeeded``, ``failed``, ``cancelled``) with its duration. Jobs another replica
interrupted are not counted here.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any

import anyio
import structlog
from anyio.abc import TaskGroup

from pmsgate.clock import Clock
from pmsgate.errors import Conflict, PmsgateError
from pmsgate.gateway.metrics import GatewayMetrics
from pmsgate.knowledge.records import KnowledgeSyncRecords
from pmsgate.knowledge.sync import KnowledgeSync
from pmsgate.knowledge.sync_reports import (
    CommitReport,
    DryRunReport,
    ProgressCallback,
    SyncProgress,
)
from pmsgate.storage.knowledge import SyncJobView

log = structlog.get_logger(__name__)

# docs/requirements.md R17.2: the sync route's maximum duration, as configured.
MAX_DURATION_S = 800.0


@dataclass(frozen=True)
class SyncOutcome:
    """What a bounded synchronous call got: the finished job's counters, or a job to poll."""

    job: SyncJobView

    @property
    def job_id(self) -> str:
        """The job's id (to poll while it runs)."""
        return self.job.id

    @property
    def finished(self) -> bool:
        """Whether the job finished within the call."""
        return not self.job.active

    @property
    def counters(self) -> dict[str, Any] | None:
        """The counters (docs/requirements.md R17.1) once the job succeeded."""
        return self.job.counters if self.job.status == "succeeded" else None


def job_summary(job: SyncJobView) -> dict[str, Any]:
    """A JSON-ready view of a job, as a status endpoint answers it."""
    return {
        "jobId": job.id,
        "studentId": job.student_id,
        "kind": job.kind,
        "commit": job.kind == "commit",
        "status": job.status,
        "progress": {"done": job.progress_done, "total": job.progress_total},
        "counters": job.counters,
        "error": None if job.error_code is None else {"code": job.error_code, "message": job.error},
        "createdAt": job.created_at.isoformat(),
        "startedAt": job.started_at.isoformat() if job.started_at else None,
        "finishedAt": job.finished_at.isoformat() if job.finished_at else None,
    }


class SyncJobs:
    """Starts, runs and tracks knowledge-sync jobs of this process (an async context manager)."""

    def __init__(
        self,
        sync: KnowledgeSync,
        repo: KnowledgeSyncRecords,
        *,
        clock: Clock | None = None,
        runner_id: str | None = None,
        heartbeat_interval_s: float = 15.0,
        stale_after_s: float = 120.0,
        progress_interval_s: float = 2.0,
        metrics: GatewayMetrics | None = None,
    ) -> None:
        if stale_after_s <= heartbeat_interval_s:
            raise ValueError("stale_after_s must exceed heartbeat_interval_s")
        self.sync = sync
        self.repo = repo
        self.clock = clock or sync.clock
        self.runner_id = runner_id or f"runner-{uuid.uuid4().hex[:16]}"
        self.heartbeat_interval_s = heartbeat_interval_s
        self.stale_after_s = stale_after_s
        self.progress_interval_s = progress_interval_s
        self.metrics = metrics
        self._group: TaskGroup | None = None
        self._done: dict[str, anyio.Event] = {}
        self._scopes: dict[str, anyio.CancelScope] = {}

    async def __aenter__(self) -> SyncJobs:
        await self.recover()
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        # Background jobs end with the process: cancel them (each records sync_cancelled).
        group, self._group = self._group, None
        assert group is not None
        group.cancel_scope.cancel()
        return await group.__aexit__(exc_type, exc, traceback)

    # --- starting and reading ----------------------------------------------------------------

    async def start(self, student_id: str, *, commit: bool) -> str:
        """Record a job and run it in the background; its id to poll."""
        if self._group is None:
            raise RuntimeError("enter `async with SyncJobs(...)` before starting jobs")
        job = await self._create(student_id, commit)
        self._done[job.id] = anyio.Event()
        self._group.start_soon(self._execute, job, None)
        return job.id

    async def run(
        self, student_id: str, *, commit: bool, progress: ProgressCallback | None = None
    ) -> tuple[SyncJobView, DryRunReport | CommitReport | None]:
        """Run a job in the foreground (the CLI); the finished job and the sync's report."""
        job = await self._create(student_id, commit)
        self._done[job.id] = anyio.Event()
        return await self._execute(job, progress)

    async def status(self, job_id: str) -> SyncJobView:
        """The job as stored (``sync_job_not_found`` when unknown)."""
        return await self.repo.get_job(job_id)

    async def wait(self, job_id: str) -> SyncJobView:
        """Wait until a job of this process has finished; the finished job."""
        done = self._done.get(job_id)
        if done is not None:
            await done.wait()
        return await self.repo.get_job(job_id)

    async def run_sync_within(
        self, student_id: str, *, commit: bool, max_duration_s: float = MAX_DURATION_S
    ) -> SyncOutcome:
        """Start a job and wait at most ``max_duration_s`` real seconds for it to finish."""
        job_id = await self.start(student_id, commit=commit)
        with anyio.move_on_after(max_duration_s):
            await self._done[job_id].wait()
        return SyncOutcome(await self.repo.get_job(job_id))

    def cancel(self, job_id: str) -> bool:
        """Cancel a job this process runs (it ends ``failed``/``sync_cancelled``); False if none."""
        scope = self._scopes.get(job_id)
        if scope is None:
            return False
        scope.cancel()
        return True

    async def latest(self, student_id: str) -> SyncJobView | None:
        """The customer's most recent job (the console shows its counters)."""
        jobs = await self.repo.jobs_of(student_id, limit=1)
        return jobs[0] if jobs else None

    async def recover(self) -> list[str]:
        """Mark as interrupted every active job whose runner stopped beating; their ids."""
        before = self.clock.now() - timedelta(seconds=self.stale_after_s)
        interrupted = await self.repo.interrupt_stale_jobs(before)
        if interrupted:
            log.warning("knowledge_jobs_interrupted", jobs=interrupted)
        return interrupted

    # --- running -------------------------------------------------------------------------------

    async def _create(self, student_id: str, commit: bool) -> SyncJobView:
        # The one place every sync starts: the allowlist is checked here, on each start.
        await self.sync.services.allowlist.require_customer(student_id)
        kind = "commit" if commit else "dry_run"
        job_id = uuid.uuid4().hex
        try:
            return await self.repo.create_job(job_id, student_id, kind, runner_id=self.runner_id)
        except Conflict as error:
            if error.code != "sync_already_running" or not await self.recover():
                raise
        # An interrupted job stood in the way and is now failed: try once more.
        return await self.repo.create_job(job_id, student_id, kind, runner_id=self.runner_id)

    async def _execute(
        self, job: SyncJobView, progress: ProgressCallback | None
    ) -> tuple[SyncJobView, DryRunReport | CommitReport | None]:
        tracker = _ProgressWriter(self, job.id, progress)
        report: DryRunReport | CommitReport | None = None
        finished: SyncJobView | None = None
        scope = anyio.CancelScope()
        self._scopes[job.id] = scope
        started = self.clock.now()
        if self.metrics is not None:
            self.metrics.sync_job_started(job.kind)
        try:
            with scope:
                with _atomic():
                    await self.repo.start_job(job.id)
                report = await self._run_beating(job, tracker)
                with _atomic():
                    finished = await self.repo.finish_job(
                        job.id,
                        "succeeded",
                        counters=report.counters(),
                        report=report.as_dict(),
                        progress=(report.apartments, report.apartments),
                    )
            if scope.cancelled_caught:
                finished = await self._fail(job.id, "sync_cancelled", "The sync was cancelled.")
        except PmsgateError as error:
            finished = await self._fail(job.id, error.code, error.message)
        except Exception as error:
            log.exception("knowledge_job_crashed", job_id=job.id)
            finished = await self._fail(
                job.id, "internal_error", f"The sync failed unexpectedly ({type(error).__name__})."
            )
        finally:
            self._scopes.pop(job.id, None)
            if finished is None:
                # Cancelled from outside (shutdown): record it before the cancellation goes on.
                with anyio.CancelScope(shield=True):
                    finished = await self._fail(job.id, "sync_cancelled", "The sync was cancelled.")
            self._count_finished(job, finished, started)
            done = self._done.get(job.id)
            if done is not None:
                done.set()
        assert finished is not None
        log.info("knowledge_job_finished", job_id=job.id, status=finished.status, kind=job.kind)
        return finished, report

    def _count_finished(
        self, job: SyncJobView, finished: SyncJobView | None, started: datetime
    ) -> None:
        if self.metrics is None or finished is None:
            return
        if finished.status == "succeeded":
            outcome = "succeeded"
        elif finished.error_code == "sync_cancelled":
            outcome = "cancelled"
        else:
            outcome = "failed"
        seconds = max(0.0, (self.clock.now() - started).total_seconds())
        self.metrics.sync_job_finished(job.kind, outcome, seconds)

    async def _run_beating(
        self, job: SyncJobView, tracker: _ProgressWriter
    ) -> DryRunReport | CommitReport:
        report: DryRunReport | CommitReport | None = None
        failure: Exception | None = None
        async with anyio.create_task_group() as beats:
            beats.start_soon(self._heartbeat, job.id, tracker)
            try:
                report = await self.sync.run(
                    job.student_id, commit=job.kind == "commit", progress=tracker
                )
            except Exception as error:
                # Raised here rather than inside the group, which would wrap it.
                failure = error
            finally:
                beats.cancel_scope.cancel()
        if failure is not None:
            raise failure
        assert report is not None
        return report

    async def _fail(self, job_id: str, code: str, message: str) -> SyncJobView:
        try:
            return await self.repo.finish_job(job_id, "failed", error_code=code, error=message)
        except Conflict:
            # Already finished (e.g. marked interrupted by another replica): keep that.
            return await self.repo.get_job(job_id)

    async def _heartbeat(self, job_id: str, tracker: _ProgressWriter) -> None:
        # Real time on purpose: liveness is about the process, whatever clock the sync uses.
        while True:
            await anyio.sleep(self.heartbeat_interval_s)
            await tracker.flush()


class _ProgressWriter:
    """Passes progress on and stores it (at most every ``progress_interval_s`` of the clock)."""

    def __init__(self, jobs: SyncJobs, job_id: str, forward: ProgressCallback | None) -> None:
        self._jobs = jobs
        self._job_id = job_id
        self._forward = forward
        self._latest: SyncProgress | None = None
        self._written: SyncProgress | None = None
        self._written_at: float | None = None
        # One write at a time, each of the latest state: concurrent writes could land in any order.
        self._lock = anyio.Lock()

    async def __call__(self, event: SyncProgress) -> None:
        self._latest = event
        if self._forward is not None:
            outcome = self._forward(event)
            if outcome is not None:
                await outcome
        now = self._jobs.clock.now().timestamp()
        due = (
            self._written is None
            or event.apartments_done != self._written.apartments_done
            or self._written_at is None
            or now - self._written_at >= self._jobs.progress_interval_s
        )
        if due:
            await self.flush()

    async def flush(self) -> None:
        async with self._lock:
            event = self._latest
            self._written_at = self._jobs.clock.now().timestamp()
            if event is not None and event is self._written:
                return
            done, total, counters = (0, 0, None)
            if event is not None:
                done, total = event.apartments_done, event.apartments_total
                counters = {
                    **event.counters,
                    "nodesDone": event.nodes_done,
                    "nodesTotal": event.nodes_total,
                }
            self._written = event
            with _atomic():
                await self._jobs.repo.update_progress(self._job_id, done, total, counters)


def _atomic() -> anyio.CancelScope:
    """A database write that a cancellation waits for rather than cuts (no half transaction)."""
    return anyio.CancelScope(shield=True)
