"""`pmsgate knowledge sync --student ID [--commit] [--json]`: the knowledge sync from a terminal.

Registered on the ``knowledge`` command group of :mod:`pmsgate.cli.knowledge`
(importing this module adds the command). The sync runs in the foreground as a
recorded job (so a sync started from the web app for the same customer is refused
while this one runs, and the console shows its counters afterwards), with a Rich
progress bar on standard error and the counters as a table — or, with ``--json``,
the whole report as one JSON object on standard output.

Exit status: 0 when the sync ran and no apartment failed, 1 when some apartment
failed (the others are synced), 2 when the sync could not run (error on stderr).
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from pmsgate.cli.knowledge import StudentOption, knowledge_app, open_cli_customer_services
from pmsgate.cli.support import console, err_console, run
from pmsgate.knowledge.records import KnowledgeSyncRecords
from pmsgate.knowledge.sync import KnowledgeSync
from pmsgate.knowledge.sync_jobs import SyncJobs
from pmsgate.knowledge.sync_reports import CommitReport, DryRunReport, SyncProgress
from pmsgate.storage.knowledge import SyncJobView


class _Bar:
    """Apartments and nodes as two Rich progress bars."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.apartments: TaskID = progress.add_task("apartments", total=None)
        self.nodes: TaskID = progress.add_task("nodes", total=None)

    def __call__(self, event: SyncProgress) -> None:
        label = f"apartments · {event.apartment}" if event.apartment else "apartments"
        self.progress.update(
            self.apartments,
            total=event.apartments_total,
            completed=event.apartments_done,
            description=escape(label[:60]),
        )
        if event.kind == "commit":
            self.progress.update(
                self.nodes, total=event.nodes_total or None, completed=event.nodes_done
            )
        else:
            self.progress.update(self.nodes, visible=False)


async def _run(
    student: str, commit: bool, show_progress: bool
) -> tuple[SyncJobView, DryRunReport | CommitReport | None]:
    async with open_cli_customer_services() as services:
        repo = KnowledgeSyncRecords(services.sessions, services.clock)
        sync = KnowledgeSync(services, repo)
        async with SyncJobs(sync, repo) as jobs:
            progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err_console,
                disable=not show_progress,
                transient=True,
            )
            with progress:
                return await jobs.run(student, commit=commit, progress=_Bar(progress))


def _counters_table(report: DryRunReport | CommitReport) -> Table:
    kind = "commit" if isinstance(report, CommitReport) else "dry run"
    table = Table(title=f"Knowledge sync ({kind}) of {escape(report.student_id)}")
    table.add_column("counter")
    table.add_column("value", justify="right")
    for name, value in report.counters().items():
        table.add_row(name, str(value))
    if isinstance(report, CommitReport):
        table.add_row("syncFolderCreated", "yes" if report.sync_folder_created else "no")
        present = sum(report.wifi_nodes.values())
        table.add_row("wifiNodes present", f"{present}/{len(report.wifi_nodes)}")
    return table


def _apartments_table(report: DryRunReport | CommitReport) -> Table:
    table = Table(title="Apartments")
    for column in ("room type", "apartment", "listing", "status", "missing sections", "nodes"):
        table.add_column(column)
    if isinstance(report, CommitReport):
        for item in report.details:
            status = item.status if item.error is None else f"{item.status}: {item.error.code}"
            if item.status == "unresolved":
                status = f"unresolved ({item.unresolved_reason})"
            nodes = f"+{item.created} ~{item.updated} ={item.unchanged} -{item.deleted}"
            if item.wifi_node is not None:
                nodes += f" · wifi {'yes' if item.wifi_node else 'NO'}"
            table.add_row(
                item.pms_room_type_id,
                escape(item.name),
                item.listing_id or "—",
                escape(status),
                ", ".join(item.missing_sections) or "—",
                nodes,
            )
        return table
    for check in report.details:
        if check.error is not None:
            status = f"failed: {check.error.code}"
        elif not check.resolved:
            status = f"unresolved ({check.unresolved_reason})"
        else:
            status = "resolved"
        if check.template_complete is False:
            status += " · template incomplete"
        table.add_row(
            check.pms_room_type_id,
            escape(check.name),
            check.listing_id or "—",
            escape(status),
            ", ".join(check.missing_sections) or "—",
            "—" if check.nodes is None else str(check.nodes),
        )
    return table


@knowledge_app.command("sync")
def sync_command(
    student: StudentOption,
    commit: Annotated[
        bool,
        typer.Option(
            "--commit", help="Write the nodes to the assistant platform (default: a dry run)."
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the whole report as one JSON object.")
    ] = False,
) -> None:
    """Sync the apartments' notes pages into the assistant's knowledge base (dry run by default)."""
    job, report = run(_run(student, commit, show_progress=not as_json))
    if report is None:
        err_console.print(
            f"[bold red]error[/] {escape(job.error_code or 'sync_failed')}: "
            f"{escape(job.error or 'the sync did not finish')}"
        )
        raise typer.Exit(code=2)
    if as_json:
        typer.echo(json.dumps({"jobId": job.id, **report.as_dict()}, ensure_ascii=False))
    else:
        console.print(_apartments_table(report))
        console.print(_counters_table(report))
        console.print(f"[dim]job {job.id}[/]")
    if report.failed:
        raise typer.Exit(code=1)
