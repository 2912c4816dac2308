"""The record of job ticks as the scheduler and ``pmsgate jobs`` use it: one transaction a call.

The queries are :class:`pmsgate.storage.job_runs.JobRunRepository`'s; this service checks the
job names and statuses it is given and raises the caller-facing errors.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pmsgate.errors import InvalidInput, NotFound
from pmsgate.storage.job_runs import FINISHED, MAX_JOB_NAME, JobRunRepository, JobRunView
from pmsgate.storage.records import Records


def _job_name(job: str) -> str:
    name = job.strip()
    if not name or len(name) > MAX_JOB_NAME:
        raise InvalidInput(
            f"A job name has 1 to {MAX_JOB_NAME} characters.",
            code="invalid_job_name",
            hint="Use one of the names `pmsgate jobs list` shows.",
        )
    return name


class JobRuns(Records):
    """Records job ticks and reads the latest ones."""

    async def start(self, job: str) -> JobRunView:
        """Record that a tick of ``job`` starts now."""
        name = _job_name(job)
        async with self._sessions.begin() as session:
            return await JobRunRepository(session).start(name, self._clock.now())

    async def finish(
        self, run_id: int, status: str, detail: dict[str, Any] | None = None
    ) -> JobRunView:
        """Record how the run ended (``succeeded`` or ``failed``) and what it did."""
        if status not in FINISHED:
            raise InvalidInput(
                f"A run ends as one of {', '.join(FINISHED)}.",
                code="invalid_job_status",
                hint="Record succeeded or failed.",
            )
        async with self._sessions.begin() as session:
            finished = await JobRunRepository(session).finish(
                run_id, status, self._clock.now(), detail
            )
        if finished is None:
            raise NotFound(
                f"No job run with id {run_id}.",
                code="job_run_not_found",
                hint="Record the run's start first.",
            )
        return finished

    async def latest(self, job: str) -> JobRunView | None:
        """The most recent run of ``job``, whatever its status."""
        async with self._sessions() as session:
            return await JobRunRepository(session).latest(job.strip())

    async def last_succeeded(self, job: str) -> JobRunView | None:
        """The most recent successful run of ``job``."""
        async with self._sessions() as session:
            return await JobRunRepository(session).latest(job.strip(), "succeeded")

    async def recent(self, job: str | None = None, *, limit: int = 20) -> list[JobRunView]:
        """The latest runs, newest first (of one job when given)."""
        name = job.strip() if job is not None else None
        async with self._sessions() as session:
            return await JobRunRepository(session).recent(name, max(1, min(limit, 1000)))

    async def latest_by_job(self) -> dict[str, JobRunView]:
        """The most recent run of every job that ever ran, by job name."""
        async with self._sessions() as session:
            return await JobRunRepository(session).latest_by_job()

    async def prune(self, before: datetime) -> int:
        """Delete the runs started before ``before``; returns how many went."""
        async with self._sessions.begin() as session:
            return await JobRunRepository(session).prune(before)
