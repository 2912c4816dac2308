"""`pmsgate doctor`: the checklist a platform team runs before its first customer."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from pmsgate.config import get_settings
from pmsgate.doctor.findings import Report, Status

_STYLE = {Status.OK: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.SKIP: "dim"}


def doctor(
    live: Annotated[
        bool,
        typer.Option(
            "--live",
            help="Also run the read-only first-contact probe of a real facility, workspace "
            "and notes connection (a handful of requests, all within the limits).",
        ),
    ] = False,
    hotel_id: Annotated[
        str | None, typer.Option(help="A registered facility to probe (--live).")
    ] = None,
    workspace_id: Annotated[
        str | None, typer.Option(help="An assistant-platform workspace to probe (--live).")
    ] = None,
    customer: Annotated[
        str | None,
        typer.Option(
            help="A customer's student_id: its facility, workspace and notes connection are "
            "probed (--live), unless --hotel-id / --workspace-id say otherwise.",
        ),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Check configuration, database, Redis and the upstreams; --live probes real systems."""
    # Imported here: the runner pulls in the whole stack, `pmsgate --help` must not.
    from pmsgate.doctor.runner import Target, run_doctor

    target = Target(hotel_id=hotel_id, workspace_id=workspace_id, student_id=customer)
    report = asyncio.run(run_doctor(get_settings(), live=live, target=target))
    if json_output:
        typer.echo(json.dumps(report.as_dict(), indent=2))
    else:
        render(report, Console())
    if report.failed:
        raise typer.Exit(code=1)


def render(report: Report, console: Console) -> None:
    """The report as a checklist grouped by area (readable at any terminal width)."""
    area = None
    for finding in report.findings:
        if finding.area != area:
            area = finding.area
            console.print(f"\n[bold]{escape(area)}[/]")
        style = _STYLE[finding.status]
        console.print(
            f"  [{style}]{finding.status.value:<4}[/] {escape(finding.check)}: "
            f"{escape(finding.found)}"
        )
        if finding.advice:
            console.print(f"       [dim]→ {escape(finding.advice)}[/]")
    counts = report.counts()
    summary = ", ".join(f"{n} {status}" for status, n in counts.items() if n)
    verdict = "[bold red]not ready[/]" if report.failed else "[green]ready[/]"
    console.print(f"\n{verdict}: {summary}")
