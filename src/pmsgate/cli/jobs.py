"""`pmsgate jobs …`: run a scheduled job once (for an external scheduler) and list the jobs.

- ``pmsgate jobs refresh-usage`` — one usage refresh (docs/requirements.md R19.1), for cron, a
  systemd timer or a Kubernetes CronJob every 6 hours when the server's own scheduler is off.
- ``pmsgate jobs run NAME`` — any job once (``pmsgate jobs list`` names them).
- ``pmsgate jobs list`` — each job, its interval and setting, its last run and status.

Every run is recorded in ``job_runs`` like a tick of the in-process scheduler, so the
console and ``jobs list`` show it. ``--json`` prints exactly one JSON object on
standard output. Exit status of a run: 0 when it succeeded, 1 when it did part of its
work (e.g. some customer's usage could not be read; the others are recorded), 2 when
it could not run (the error's code, message and hint on standard error).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from sqlalchemy.exc import SQLAlchemyError

from pmsgate.cli.support import (
    JsonOption,
    Upstreams,
    command_group,
    console,
    database_unavailable,
    err_console,
    fail,
    open_cli_container,
)
from pmsgate.cli.support import run as run_async
from pmsgate.config import get_settings
from pmsgate.container import open_container
from pmsgate.jobs.registry import JOB_SPECS
from pmsgate.jobs.runs import JobRuns
from pmsgate.jobs.scheduler import Scheduler, build_scheduler, job_not_found
from pmsgate.jobs.spec import JobPartlyFailed
from pmsgate.jobs.usage import REFRESH_USAGE
from pmsgate.storage.job_runs import JobRunView

jobs_app = command_group(
    "Scheduled jobs: usage snapshots, hourly gateway usage, connection checks, "
    "listings syncs (docs/jobs.md)."
)


# How the commands reach the upstreams: real clients by default; the sandbox and tests
# put httpx clients on the emulators and a shared clock here (the same seam as
# `pmsgate knowledge`, no behaviour replaced).
upstreams = Upstreams()


@asynccontextmanager
async def open_scheduler() -> AsyncIterator[Scheduler]:
    """The jobs on a freshly opened container (not started: run them one by one)."""
    async with open_cli_container(upstreams) as container:
        yield build_scheduler(container.web, sleep=upstreams.sleep)


async def _run_job(name: str) -> JobRunView:
    async with open_scheduler() as scheduler:
        return await scheduler.run_once(name)


def _exit_code(run: JobRunView) -> int:
    if run.status == "succeeded":
        return 0
    return 1 if run.error_code == JobPartlyFailed.code else 2


def _print_value(key: str, value: Any) -> None:
    if isinstance(value, list):
        console.print(f"{escape(key)}: {len(value)}")
        for item in value:
            if isinstance(item, dict):
                text = ", ".join(f"{k}={v}" for k, v in item.items())
            else:
                text = str(item)
            console.print(f"  - {escape(text)}")
    elif isinstance(value, dict):
        console.print(f"{escape(key)}: {escape(json.dumps(value, default=str))}")
    else:
        console.print(f"{escape(key)}: {escape(str(value))}")


def _report(run: JobRunView, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(run.as_dict(), ensure_ascii=False))
        return
    took = f" in {run.duration_s:.1f} s" if run.duration_s is not None else ""
    colour = "green" if run.status == "succeeded" else "red"
    console.print(f"job {escape(run.job)} [{colour}]{run.status}[/]{took} (run {run.id})")
    detail = dict(run.detail or {})
    error = detail.pop("error", None)
    for key, value in detail.items():
        _print_value(key, value)
    if isinstance(error, dict):
        err_console.print(
            f"[bold red]error[/] {escape(str(error.get('code')))}: "
            f"{escape(str(error.get('message')))}"
        )
        if error.get("code") != JobPartlyFailed.code:
            err_console.print("[dim]hint:[/] it runs again on its next tick; see docs/jobs.md.")


def _run_and_report(name: str, as_json: bool) -> None:
    job_run = run_async(_run_job(name))
    _report(job_run, as_json)
    code = _exit_code(job_run)
    if code:
        raise typer.Exit(code=code)


@jobs_app.command("refresh-usage")
def refresh_usage_command(as_json: JsonOption = False) -> None:
    """Record this slot's usage snapshot of every customer (run it every 6 hours)."""
    _run_and_report(REFRESH_USAGE, as_json)


@jobs_app.command("run")
def run_command(
    name: Annotated[str, typer.Argument(help="The job to run (see `pmsgate jobs list`).")],
    as_json: JsonOption = False,
) -> None:
    """Run one job now, recorded like a scheduled tick."""
    known = [spec.name for spec in JOB_SPECS]
    if name.strip().replace("_", "-") not in known:
        # Refused before opening anything: a typo should not need a database.
        raise fail(job_not_found(name, known))
    _run_and_report(name.strip().replace("_", "-"), as_json)


async def _latest_runs() -> dict[str, JobRunView]:
    try:
        async with open_container(get_settings(), migrate=False) as container:
            return await JobRuns(container.sessions).latest_by_job()
    except (SQLAlchemyError, OSError) as error:
        raise database_unavailable(error) from None


@jobs_app.command("list")
def list_command(as_json: JsonOption = False) -> None:
    """Each job, its interval, its last run and how it ended."""
    settings = get_settings()
    latest = run_async(_latest_runs())
    rows = []
    for spec in JOB_SPECS:
        run = latest.get(spec.name)
        rows.append(
            {
                "job": spec.name,
                "interval_s": spec.interval_s(settings),
                "setting": spec.variable(),
                "description": spec.description,
                "last_run": run.as_dict() if run is not None else None,
            }
        )
    if as_json:
        payload = {"scheduler_enabled": settings.scheduler_enabled, "jobs": rows}
        typer.echo(json.dumps(payload, ensure_ascii=False))
        return
    table = Table(title="Scheduled jobs")
    for column in ("job", "every", "setting", "last run", "status", "error"):
        table.add_column(column)
    for spec in JOB_SPECS:
        run = latest.get(spec.name)
        table.add_row(
            spec.name,
            _duration(spec.interval_s(settings)),
            spec.variable(),
            run.started_at.strftime("%Y-%m-%d %H:%M:%S UTC") if run is not None else "never",
            run.status if run is not None else "-",
            (run.error_code or "") if run is not None else "",
        )
    console.print(table)
    where = "inside `pmsgate serve`" if settings.scheduler_enabled else "by an external scheduler"
    console.print(f"The jobs run {where} (PMSGATE_SCHEDULER_ENABLED={settings.scheduler_enabled}).")


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"
