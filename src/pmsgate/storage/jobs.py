"""Runs of the scheduled jobs (``job_runs``): the only queries on that table.

Every tick of a job is a row: ``running`` when it starts, then ``succeeded`` with
the job's summary or ``failed`` with the error's code and message (never a
secret: the scheduler writes only the service's own error codes and messages, or
an exception's type). Replicas share the table, so a replica starting up can tell
whether another one already ran a job in the current interval.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import Clock, SystemClock
from pmsgate.errors import InvalidInput, NotFound
from pmsgate.storage.models import JobRun, JobRunStatus

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
        return {
            "id": self.id,
            "job": self.job,
            "status": self.status,
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "detail": self.detail,
        }


def _view(row: JobRun) -> JobRunView:
    return JobRunView(
        id=row.id,
        job=row.job,
        status=cast(JobRunStatus, row.status),
        started_at=row.started_at,
        finished_at=row.finished_at,
        detail=row.detail,
    )


def _job_name(job: str) -> str:
    name = job.strip()
    if not name or len(name) > MAX_JOB_NAME:
        raise InvalidInput(
            f"A job name has 1 to {MAX_JOB_NAME} characters.",
            code="invalid_job_name",
            hint="Use one of the names `pmsgate jobs list` shows.",
        )
    return name


def _json(detail: dict[str, Any] | None) -> dict[str, Any] | None:
    # Summaries may hold dates or decimals: store them as the strings they print as.
    if detail is None:
        return None
    loaded: dict[str, Any] = json.loads(json.dumps(detail, default=str))
    return loaded


class JobRunRepository:
    """Records job ticks and reads the latest ones."""

    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], clock: Clock | None = None
    ) -> None:
        self._sessions = sessions
        self._clock = clock or SystemClock()

    async def start(self, job: str) -> JobRunView:
        """Record that a tick of ``job`` starts now."""
        row = JobRun(job=_job_name(job), status="running", started_at=self._clock.now())
        async with self._sessions.begin() as session:
            session.add(row)
        return _view(row)

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
            row = await session.get(JobRun, run_id)
            if row is None:
                raise NotFound(
                    f"No job run with id {run_id}.",
                    code="job_run_not_found",
                    hint="Record the run's start first.",
                )
            row.status = status
            row.finished_at = self._clock.now()
            row.detail = _json(detail)
        return _view(row)

    async def latest(self, job: str) -> JobRunView | None:
        """The most recent run of ``job``, whatever its status."""
        return await self._latest(job, None)

    async def last_succeeded(self, job: str) -> JobRunView | None:
        """The most recent successful run of ``job``."""
        return await self._latest(job, "succeeded")

    async def recent(self, job: str | None = None, *, limit: int = 20) -> list[JobRunView]:
        """The latest runs, newest first (of one job when given)."""
        statement = select(JobRun)
        if job is not None:
            statement = statement.where(JobRun.job == job.strip())
        async with self._sessions() as session:
            rows = await session.scalars(
                statement.order_by(JobRun.started_at.desc(), JobRun.id.desc()).limit(
                    max(1, min(limit, 1000))
                )
            )
            return [_view(row) for row in rows]

    async def latest_by_job(self) -> dict[str, JobRunView]:
        """The most recent run of every job that ever ran, by job name."""
        newest = select(JobRun.job, func.max(JobRun.id).label("id")).group_by(JobRun.job).subquery()
        async with self._sessions() as session:
            rows = await session.scalars(select(JobRun).join(newest, JobRun.id == newest.c.id))
            return {row.job: _view(row) for row in rows}

    async def prune(self, before: datetime) -> int:
        """Delete the runs started before ``before``; returns how many went."""
        async with self._sessions.begin() as session:
            result = await session.execute(delete(JobRun).where(JobRun.started_at < before))
        return int(getattr(result, "rowcount", 0) or 0)

    async def _latest(self, job: str, status: str | None) -> JobRunView | None:
        statement = select(JobRun).where(JobRun.job == job.strip())
        if status is not None:
            statement = statement.where(JobRun.status == status)
        async with self._sessions() as session:
            row = await session.scalar(
                statement.order_by(JobRun.started_at.desc(), JobRun.id.desc()).limit(1)
            )
        return _view(row) if row is not None else None
