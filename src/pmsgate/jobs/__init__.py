"""Scheduled work (docs/jobs.md): usage snapshots, hourly gateway usage, checks, listings syncs.

The scheduler is :mod:`pmsgate.jobs.scheduler` (:func:`~pmsgate.jobs.scheduler.build_scheduler`);
what a job is, :mod:`pmsgate.jobs.spec`; the jobs, each declared once with its interval
and work, are :data:`pmsgate.jobs.registry.JOB_SPECS`; each job's work is in its own
module (:mod:`~pmsgate.jobs.usage`, :mod:`~pmsgate.jobs.connections`,
:mod:`~pmsgate.jobs.listings`). ``pmsgate serve`` runs the scheduler in-process
when ``PMSGATE_SCHEDULER_ENABLED`` is on; an external scheduler (cron, a systemd
timer, a Kubernetes CronJob) runs ``pmsgate jobs refresh-usage`` / ``pmsgate jobs
run NAME`` instead (:mod:`pmsgate.cli.jobs`).
"""

from __future__ import annotations

from pmsgate.jobs.connections import CHECK_CONNECTIONS
from pmsgate.jobs.listings import RESTART_LISTINGS_SYNCS
from pmsgate.jobs.registry import JOB_SPECS, PER_PROCESS_JOBS
from pmsgate.jobs.scheduler import Scheduler, build_jobs, build_scheduler
from pmsgate.jobs.spec import Job, JobPartlyFailed, JobSpec
from pmsgate.jobs.usage import FLUSH_GATEWAY_USAGE, REFRESH_USAGE

__all__ = [
    "CHECK_CONNECTIONS",
    "FLUSH_GATEWAY_USAGE",
    "JOB_SPECS",
    "PER_PROCESS_JOBS",
    "REFRESH_USAGE",
    "RESTART_LISTINGS_SYNCS",
    "Job",
    "JobPartlyFailed",
    "JobSpec",
    "Scheduler",
    "build_jobs",
    "build_scheduler",
]
