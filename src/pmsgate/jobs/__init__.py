"""Scheduled work (docs/jobs.md): usage snapshots, hourly gateway usage, checks, listings syncs.

The scheduler and the list of the four jobs with their interval settings are in
:mod:`pmsgate.jobs.scheduler` (:data:`~pmsgate.jobs.scheduler.JOB_SPECS`,
:func:`~pmsgate.jobs.scheduler.build_scheduler`); each job's work is in its own
module (:mod:`~pmsgate.jobs.usage`, :mod:`~pmsgate.jobs.connections`,
:mod:`~pmsgate.jobs.listings`). ``pmsgate serve`` runs the scheduler in-process
when ``PMSGATE_SCHEDULER_ENABLED`` is on; an external scheduler (cron, a systemd
timer, a Kubernetes CronJob) runs ``pmsgate jobs refresh-usage`` / ``pmsgate jobs
run NAME`` instead (:mod:`pmsgate.jobs.cli`).
"""

from __future__ import annotations

from pmsgate.jobs.scheduler import (
    CHECK_CONNECTIONS,
    FLUSH_GATEWAY_USAGE,
    JOB_SPECS,
    REFRESH_USAGE,
    RESTART_LISTINGS_SYNCS,
    Job,
    JobPartlyFailed,
    JobSpec,
    Scheduler,
    build_jobs,
    build_scheduler,
)

__all__ = [
    "CHECK_CONNECTIONS",
    "FLUSH_GATEWAY_USAGE",
    "JOB_SPECS",
    "REFRESH_USAGE",
    "RESTART_LISTINGS_SYNCS",
    "Job",
    "JobPartlyFailed",
    "JobSpec",
    "Scheduler",
    "build_jobs",
    "build_scheduler",
]
