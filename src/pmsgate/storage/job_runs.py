"""Runs of the scheduled jobs (``job_runs``): the only queries on that table.

Every tick of a job is a row: ``running`` when it starts, then ``succeeded`` with
the job's summary or ``failed`` with the error's code and message (never a
secret: the scheduler writes only the service's own error codes and messages, or
an exception's type). Replicas share the table, so a replica starting up can tell
whether another one already ran a job in the current interval. The repository works in
the caller's session and never commits; :class:`pmsgate.jobs.runs.JobRuns` checks the
names and statuses and owns the transactions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select

from pmsgate.storage.models import JobRun, JobRunStatus
from pmsgate.storage.repository import Repository
from pmsgate.storage.views import json_fields, view_of

MAX_JOB_NAME = 64
FINISHED: tuple[JobRunStatus, ...] = ("succeeded", "failed")


@dataclass(frozen=True)
class JobRunView:
    """One recorded tick of a job."""

    id: int
    job: str
    status: JobRunStatus
    started_at: datetime
    finished_at: datetime | None
    detail: dict[str, Any] | None

    @property
    def error_code(self) -> str | None:
        """The code of the error a failed run recorded."""
        error = (self.detail or {}).get("error")
        code = error.get("code") if isinstance(error, dict) else None
        return code if isinstance(code, str) else None

    @property
    def duration_s(self) -> float | None:
        """How long the run took, once finished."""
        if self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view."""
        return json_fields(self)


def _view(row: JobRun) -> JobRunView:
    return view_of(JobRunView, row)


def _json(detail: dict[str, Any] | None) -> dict[str, Any] | None:
    # Summaries may hold dates or decimals: store them as the strings they print as.
    if detail is None:
        return None
    loaded: dict[str, Any] = json.loads(json.dumps(detail, default=str))
    return loaded


class JobRunRepository(Repository):
    """Records job ticks and reads the latest ones, in the caller's session; never commits."""

    async def start(self, job: str, at: datetime) -> JobRunView:
        """Record that a tick of ``job`` started ``at`` (flushed, so the run has its id)."""
        row = JobRun(job=job, status="running", started_at=at)
        await self._add(row)
        return _view(row)

    async def finish(
        self, run_id: int, status: JobRunStatus, at: datetime, detail: dict[str, Any] | None
    ) -> JobRunView | None:
        """Record how the run ended and what it did; None when there is no such run."""
        row = await self._session.get(JobRun, run_id)
        if row is None:
            return None
        row.status = status
        row.finished_at = at
        row.detail = _json(detail)
        await self._session.flush()
        return _view(row)

    async def latest(self, job: str, status: JobRunStatus | None = None) -> JobRunView | None:
        """The most recent run of ``job`` (with that status, when given)."""
        statement = select(JobRun).where(JobRun.job == job)
        if status is not None:
            statement = statement.where(JobRun.status == status)
        row = await self._session.scalar(
            statement.order_by(JobRun.started_at.desc(), JobRun.id.desc()).limit(1)
        )
        return _view(row) if row is not None else None

    async def recent(self, job: str | None, limit: int) -> list[JobRunView]:
        """The latest ``limit`` runs, newest first (of one job when given)."""
        statement = select(JobRun)
        if job is not None:
            statement = statement.where(JobRun.job == job)
        rows = await self._session.scalars(
            statement.order_by(JobRun.started_at.desc(), JobRun.id.desc()).limit(limit)
        )
        return [_view(row) for row in rows]

    async def latest_by_job(self) -> dict[str, JobRunView]:
        """The most recent run of every job that ever ran, by job name."""
        newest = select(JobRun.job, func.max(JobRun.id).label("id")).group_by(JobRun.job).subquery()
        rows = await self._session.scalars(select(JobRun).join(newest, JobRun.id == newest.c.id))
        return {row.job: _view(row) for row in rows}

    async def prune(self, before: datetime) -> int:
        """Delete the runs started before ``before``; returns how many went."""
        result = await self._session.execute(delete(JobRun).where(JobRun.started_at < before))
        return int(getattr(result, "rowcount", 0) or 0)
