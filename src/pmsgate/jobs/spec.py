"""What a scheduled job is: its declaration, what it runs, and how it reports a failure.

The job modules (usage.py, connections.py, …) and the scheduler both build on this module;
it imports none of them, so the registry (:data:`pmsgate.jobs.registry.JOB_SPECS`) can
import the job modules and the scheduler the registry, with no circle.

Ticks fall on a grid counted from the Unix epoch (every 6 hours: 00, 06, 12, 18 UTC; every
minute: on the minute): :func:`grid_start` is where the current interval began.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pmsgate.config import Settings
from pmsgate.errors import PmsgateError
from pmsgate.web.context import WebServices

JobFunction = Callable[[], Awaitable[dict[str, Any] | None]]
# What a job runs: a coroutine function of the process's services, answering its summary.
JobWork = Callable[[WebServices], Awaitable[dict[str, Any] | None]]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Job:
    """A named piece of work run every ``interval_s`` seconds; returns a JSON-able summary."""

    name: str
    interval_s: float
    run: JobFunction
    description: str = ""
    # Run once more when the scheduler stops (e.g. flushing counts still in memory).
    run_at_exit: bool = False

    def __post_init__(self) -> None:
        if not self.name or not math.isfinite(self.interval_s) or self.interval_s <= 0:
            raise ValueError("a job needs a name and a positive interval")


class JobPartlyFailed(PmsgateError):
    """A job did part of its work: the tick counts as failed (and is retried), its summary kept."""

    code = "job_partly_failed"
    status = 500
    hint = "See the failures listed in the run's detail; the job runs again on its next tick."

    def __init__(self, message: str, summary: dict[str, Any]) -> None:
        super().__init__(message)
        self.summary = summary


def tick_summary(summary: dict[str, Any], failed: Sequence[object], failure: str) -> dict[str, Any]:
    """A tick's ``summary``; :class:`JobPartlyFailed` carrying it when anything ``failed``
    (its message: the count, then ``failure``, e.g. "3 registry checks could not run.")."""
    if failed:
        raise JobPartlyFailed(f"{len(failed)} {failure}.", summary)
    return summary


def error_detail(error: BaseException) -> dict[str, str]:
    """The code and message recorded for a failure: never a secret."""
    if isinstance(error, PmsgateError):
        return {"code": error.code, "message": error.message}
    code = getattr(error, "code", None)
    message = getattr(error, "message", None)
    # The upstream clients' errors (platform, notes, booking system) carry their own safe
    # code and scrubbed message; any other exception's text may quote a URL or a value.
    if isinstance(code, str) and isinstance(message, str):
        return {"code": code, "message": message}
    return {"code": "unexpected_error", "message": f"The job raised {type(error).__name__}."}


def grid_start(now: datetime, interval_s: float) -> datetime:
    """The start of the grid interval (counted from the Unix epoch) that ``now`` falls in."""
    elapsed = (now - EPOCH).total_seconds()
    return EPOCH + timedelta(seconds=math.floor(elapsed / interval_s) * interval_s)


def interval_setting(settings: Settings, name: str, default_s: float) -> float:
    """Job ``name``'s interval: ``PMSGATE_JOB_INTERVALS_S[name]`` when set, else ``default_s``."""
    return float(settings.job_intervals_s.get(name, default_s))


@dataclass(frozen=True)
class JobSpec:
    """A scheduled job, declared once: its name, default interval and the work it runs.

    Its interval is ``PMSGATE_JOB_INTERVALS_S`` (a JSON map by job name) when that names
    it, else ``default_interval_s``. A new job needs no new setting.
    """

    name: str
    default_interval_s: float
    run: JobWork
    description: str
    # Run once more when the scheduler stops (e.g. flushing counts still in memory).
    run_at_exit: bool = False
    # Work only the process itself can do (its in-memory counts): it runs in every server
    # process, even when an external scheduler runs the shared jobs.
    per_process: bool = False

    def __post_init__(self) -> None:
        if (
            not self.name
            or self.name != self.name.strip().lower().replace("_", "-")
            or not math.isfinite(self.default_interval_s)
            or self.default_interval_s <= 0
        ):
            raise ValueError(f"job {self.name!r}: a kebab-case name and a positive interval")

    def interval_s(self, settings: Settings) -> float:
        """The job's interval under these settings."""
        return interval_setting(settings, self.name, self.default_interval_s)

    def variable(self) -> str:
        """The environment variable that sets this job's interval (for `pmsgate jobs list`)."""
        return f'PMSGATE_JOB_INTERVALS_S["{self.name}"]'

    def job(self, web: WebServices) -> Job:
        """This job on a process's services, at the interval its settings give."""
        return Job(
            name=self.name,
            interval_s=self.interval_s(web.settings),
            run=lambda: self.run(web),
            description=self.description,
            run_at_exit=self.run_at_exit,
        )


def check_specs(specs: Sequence[JobSpec]) -> None:
    """Refuse a job list with a name used twice (before anything is scheduled)."""
    names = [spec.name for spec in specs]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"job names declared twice: {', '.join(repeated)}")
