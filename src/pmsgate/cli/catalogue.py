"""`pmsgate catalogue …`: check the catalogue (the packaged one or an edited copy), show a tool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from pmsgate.catalogue.loader import inspect_catalogue
from pmsgate.cli.support import command_group

catalogue_app = command_group(
    "The catalogue: tools, skills, guardrails, guest agent, knowledge template."
)

PathOption = Annotated[
    Path | None,
    typer.Option(
        "--path",
        help="A catalogue directory to check instead of the packaged one (e.g. an edited copy).",
        exists=True,
        file_okay=False,
        dir_okay=True,
        resolve_path=True,
    ),
]


@catalogue_app.command("check")
def check(path: PathOption = None) -> None:
    """Validate and lint the catalogue; exit 1 and list every problem if there is one."""
    # Built here, not at import: the width then follows the caller's COLUMNS.
    console = Console()
    report = inspect_catalogue(path)
    if report.ok and report.catalogue is not None:
        catalogue = report.catalogue
        console.print(f"catalogue v{catalogue.version} OK: {catalogue.counts()}")
        console.print(f"digest {catalogue.digest}", style="dim")
        return
    table = Table(title=f"Catalogue problems ({len(report.problems)})", show_lines=False)
    table.add_column("where", overflow="fold")
    table.add_column("kind", no_wrap=True)
    table.add_column("excerpt", overflow="fold")
    for problem in report.problems:
        table.add_row(problem.where, problem.kind, problem.excerpt)
    console.print(table)
    console.print(
        "[bold red]catalogue refused[/]: describe formats in words, never with a "
        "real-looking name, phone number, e-mail address, code or key."
    )
    raise typer.Exit(code=1)


@catalogue_app.command("tool")
def tool(
    name: Annotated[str, typer.Argument(help="Tool name, e.g. check-availability.")],
    workspace_id: Annotated[
        str, typer.Option(help="Workspace id to put in the body.")
    ] = "WORKSPACE_ID",
    code_only: Annotated[
        bool, typer.Option("--code", help="Print only the custom tool's Python code.")
    ] = False,
    path: PathOption = None,
) -> None:
    """Print one tool's POST /v1/custom-tools body (or its code), as onboarding sends it."""
    console = Console()
    report = inspect_catalogue(path)
    if not report.ok or report.catalogue is None:
        console.print("[bold red]the catalogue has problems[/]: run `pmsgate catalogue check`")
        raise typer.Exit(code=1)
    definition = report.catalogue.tools.get(name)
    if definition is None:
        console.print(f"[bold red]no tool {name!r}[/]; tools: {', '.join(report.catalogue.tools)}")
        raise typer.Exit(code=2)
    if code_only:
        typer.echo(definition.custom_tool_code())
    else:
        typer.echo(json.dumps(definition.custom_tool_body(workspace_id), indent=2))
