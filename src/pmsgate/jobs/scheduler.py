"""The in-process scheduler: each job runs every interval, every tick is recorded.

:class:`Scheduler` is an async context manager; inside it one task per job
(an anyio task group) sleeps until the job's next tick and runs it. Ticks fall on
a grid counted from the Unix epoch (every 6 hours: 00, 06, 12, 18 UTC; every
minute: on the minute), so replicas and restarts agree on when a tick is due. On
entering, a job whose last successful run is older than the start of the current
grid interval runs at once (a restart never skips an interval's work).

Every tick is a row of ``job_runs``: ``running`` → ``succeeded`` with the job's
summary, or ``failed`` with the error's code and message (a service error's own
safe message; for anything else only the exception's type, which can never hold
a secret). A failure is logged and the job simply runs again on its next tick: it
is never dropped, and no job's failure reaches the scheduler, another job or the
server. :meth:`Scheduler.run_once` runs one job now (the CLI and the console).

Every finished run is counted in the process's metrics when the scheduler has them
(``pmsgate_job_runs_total{scheduled_job,outcome}``, ``pmsgate_job_last_success_timestamp_seconds``,
``pmsgate_job_interval_seconds``; docs/operations.md, What to watch): this is the one place
jobs run, the scheduled ticks, the CLI's and the console's alike.

Time comes from the injected clock and waits from the injected ``sleep``, so tests
never wait for real.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
import structlog

from pmsgate.clock import Clock
from pmsgate.errors import NotFound
from pmsgate.gateway.metrics import GatewayMetrics
from pmsgate.jobs.registry import JOB_SPECS
from pmsgate.jobs.runs import JobRuns
from pmsgate.jobs.spec import (
    Job,
    JobPartlyFailed,
    JobSpec,
    check_specs,
    error_detail,
    grid_start,
)
from pmsgate.storage.job_runs import JobRunView
from pmsgate.web.context import WebServices

log = structlog.get_logger(__name__)

Sleep = Callable[[float], Awaitable[None]]

# Runs older than this are deleted (at most once an hour): a job ticking every minute
# would otherwise add half a million rows a year.
RUN_RETENTION = timedelta(days=14)
PRUNE_EVERY = timedelta(hours=1)
# How long a job may go on finishing its work when the scheduler stops (e.g. a last flush).
EXIT_GRACE_S = 10.0


def job_not_found(name: str, known: Sequence[str]) -> NotFound:
    """The error for a job name that is not scheduled."""
    return NotFound(
        f"There is no job named {name!r}.",
        code="job_not_found",
        hint=f"Jobs: {', '.join(known)}.",
    )


def next_tick(now: datetime, interval_s: float, after: datetime | None = None) -> datetime:
    """The first grid point after ``now`` (and after ``after``: no tick ever runs twice)."""
    due = grid_start(now, interval_s) + timedelta(seconds=interval_s)
    if after is not None and due <= after:
        due = after + timedelta(seconds=interval_s)
    return due


class Scheduler:
    """Runs each job every interval in a task group, recording every tick."""

    def __init__(
        self,
        jobs: Sequence[Job],
        clock: Clock,
        runs: JobRuns,
        sleep: Sleep = anyio.sleep,
        exit_grace_s: float = EXIT_GRACE_S,
        metrics: GatewayMetrics | None = None,
    ) -> None:
        names = [job.name for job in jobs]
        if len(set(names)) != len(names):
            raise ValueError("job names must be unique")
        self.jobs: dict[str, Job] = {job.name: job for job in jobs}
        self.clock = clock
        self.runs = runs
        self._sleep = sleep
        self._exit_grace_s = exit_grace_s
        self.metrics = metrics
        if metrics is not None:
            for job in jobs:
                metrics.job_scheduled(job.name, job.interval_s, None)
        self._locks = {name: anyio.Lock() for name in names}
        self._group: anyio.abc.TaskGroup | None = None
        self._last_prune: datetime | None = None
        # Stopping interrupts the waits between ticks, never a tick under way (a query cut
        # in half would cost the database connection): ticks finish, within EXIT_GRACE_S.
        self._stopping = False
        self._waits: dict[str, anyio.CancelScope] = {}
        self._loops_left = 0
        self._loops_done = anyio.Event()

    def __repr__(self) -> str:
        return f"Scheduler(jobs={list(self.jobs)}, running={self._group is not None})"

    # --- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> Scheduler:
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        self._stopping = False
        self._loops_left = len(self.jobs)
        self._loops_done = anyio.Event()
        for job in self.jobs.values():
            group.start_soon(self._loop, job, name=f"job:{job.name}")
        log.info("scheduler_started", jobs=list(self.jobs))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        group, self._group = self._group, None
        if group is None:
            return None
        self._stopping = True
        for wait in self._waits.values():
            wait.cancel()
        with anyio.move_on_after(self._exit_grace_s, shield=True):
            await self._loops_done.wait()
        group.cancel_scope.cancel()
        try:
            await group.__aexit__(None, None, None)
        finally:
            await self._run_at_exit()
            log.info("scheduler_stopped")
        return None

    # --- running jobs ----------------------------------------------------------------------

    def job(self, name: str) -> Job:
        """The job of this name (``-`` or ``_`` alike), or ``job_not_found``."""
        job = self.jobs.get(name.strip().replace("_", "-"))
        if job is None:
            raise job_not_found(name, list(self.jobs))
        return job

    async def run_once(self, name: str) -> JobRunView:
        """Run one job now (after a tick of it already under way); its recorded run."""
        return await self.tick(self.job(name))

    async def tick(self, job: Job) -> JobRunView:
        """One recorded run of ``job``; failures are recorded and logged, never raised.

        Only a database that cannot record the run at all raises (there is nothing to
        return then); the loop catches that too and tries again on the next tick.
        """
        async with self._locks.setdefault(job.name, anyio.Lock()):
            # Recording is shielded: a shutdown lands in the job's own work, never between a
            # row and its outcome, so no run is left ``running`` by a clean stop.
            with anyio.CancelScope(shield=True):
                run = await self.runs.start(job.name)
            try:
                summary = await job.run()
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):
                    await self.runs.finish(
                        run.id,
                        "failed",
                        {"error": {"code": "cancelled", "message": "The scheduler stopped."}},
                    )
                self._count(job, run.started_at, succeeded=False)
                raise
            except Exception as error:
                detail: dict[str, Any] = {"error": error_detail(error)}
                if isinstance(error, JobPartlyFailed):
                    detail = {**error.summary, **detail}
                with anyio.CancelScope(shield=True):
                    finished = await self.runs.finish(run.id, "failed", detail)
                log.warning(
                    "job_failed",
                    job=job.name,
                    run_id=run.id,
                    code=detail["error"]["code"],
                    message=detail["error"]["message"],
                )
                self._count(job, run.started_at, succeeded=False)
            else:
                with anyio.CancelScope(shield=True):
                    finished = await self.runs.finish(run.id, "succeeded", summary)
                log.info("job_succeeded", job=job.name, run_id=run.id, summary=finished.detail)
                self._count(job, run.started_at, succeeded=True)
        await self._prune()
        return finished

    # --- internals -------------------------------------------------------------------------

    def _count(self, job: Job, started_at: datetime, *, succeeded: bool) -> None:
        if self.metrics is not None:
            self.metrics.job_finished(job.name, succeeded, started_at)

    async def _loop(self, job: Job) -> None:
        try:
            if await self._due_now(job) and not self._stopping:
                await self._safe_tick(job)
            last: datetime | None = None
            while not self._stopping:
                now = self.clock.now()
                due = next_tick(now, job.interval_s, last)
                with anyio.CancelScope() as wait:
                    self._waits[job.name] = wait
                    await self._sleep(max(0.0, (due - now).total_seconds()))
                self._waits.pop(job.name, None)
                if wait.cancelled_caught or self._stopping:
                    return
                last = due
                await self._safe_tick(job)
        finally:
            self._loops_left -= 1
            if self._loops_left == 0:
                self._loops_done.set()

    async def _safe_tick(self, job: Job) -> None:
        try:
            await self.tick(job)
        except Exception as error:  # the run could not even be recorded: next tick retries
            log.error("job_not_recorded", job=job.name, **error_detail(error))
            self._count(job, self.clock.now(), succeeded=False)

    async def _due_now(self, job: Job) -> bool:
        """True when no successful run of ``job`` started in the current grid interval."""
        try:
            last = await self.runs.last_succeeded(job.name)
        except Exception as error:
            log.error("job_runs_unreadable", job=job.name, **error_detail(error))
            return True
        if last is not None and self.metrics is not None:  # a restart keeps the alert's view
            self.metrics.job_scheduled(job.name, job.interval_s, last.started_at)
        return last is None or last.started_at < grid_start(self.clock.now(), job.interval_s)

    async def _run_at_exit(self) -> None:
        for job in self.jobs.values():
            if not job.run_at_exit:
                continue
            with anyio.CancelScope(shield=True), anyio.move_on_after(EXIT_GRACE_S):
                await self._safe_tick(job)

    async def _prune(self) -> None:
        now = self.clock.now()
        if self._last_prune is not None and now - self._last_prune < PRUNE_EVERY:
            return
        self._last_prune = now
        try:
            removed = await self.runs.prune(now - RUN_RETENTION)
        except Exception as error:
            log.warning("job_runs_not_pruned", **error_detail(error))
            return
        if removed:
            log.info("job_runs_pruned", removed=removed)


# --- the jobs of pmsgate: declared once each, in pmsgate.jobs.registry.JOB_SPECS -----------------


def build_jobs(web: WebServices, specs: Sequence[JobSpec] | None = None) -> list[Job]:
    """The jobs (pmsgate.jobs.registry.JOB_SPECS unless ``specs``) on this process's services."""
    specs = JOB_SPECS if specs is None else specs
    check_specs(specs)
    return [spec.job(web) for spec in specs]


def build_scheduler(
    web: WebServices,
    *,
    sleep: Sleep = anyio.sleep,
    only: Collection[str] | None = None,
    specs: Sequence[JobSpec] | None = None,
) -> Scheduler:
    """The scheduler of the jobs (or of those named in ``only``); enter it to run them."""
    runs = JobRuns(web.customers.sessions, web.clock)
    jobs = [job for job in build_jobs(web, specs) if only is None or job.name in only]
    return Scheduler(jobs, web.clock, runs, sleep=sleep, metrics=web.gateway.metrics)
