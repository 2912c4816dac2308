"""`pmsgate onboard …`: run the onboarding runbook, show a customer's checklist, confirm steps.

- ``pmsgate onboard CUSTOMER.yaml [--dry-run] [--json]`` (same as ``pmsgate onboard
  run CUSTOMER.yaml``): every step of spec §4.3 in order, with a live view of the
  steps on a terminal (standard error), then the run's table — or, with ``--json``,
  one JSON object on standard output.
- ``pmsgate onboard status STUDENT_ID [--json]``: the checklist (done / not done /
  waiting for a person, with evidence and due dates).
- ``pmsgate onboard confirm STUDENT_ID STEP [--item ITEM] --evidence "…" [--by NAME]``:
  a person's evidence for a manual step (``channels`` is confirmed item by item).
- ``pmsgate onboard reopen STUDENT_ID STEP [--item ITEM] [--note "…"] [--by NAME]``: take a
  person's confirmation back; the step waits for a person again. The console's customer
  page does both too (the same service, audited with the admin as actor).

Exit status: 0 when the run went through (steps waiting for a person are fine),
1 when an automatable step failed or a prerequisite stopped the run, 2 when the
command could not run (invalid customer file, configuration, database; the error
code, message and hint on standard error). Secrets are never printed.

The upstreams are reached through the same seam as ``pmsgate knowledge``
(:data:`pmsgate.knowledge.cli.upstreams`): real clients by default, the
emulators' ASGI app in the sandbox and the tests.
"""

from __future__ import annotations

import getpass
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

from pmsgate.cli_support import fail, open_cli_container, run
from pmsgate.errors import PmsgateError
from pmsgate.knowledge import cli as knowledge_cli
from pmsgate.onboarding.context import OnboardingServices
from pmsgate.onboarding.customer_file import load_customer_file
from pmsgate.onboarding.registry import STEPS
from pmsgate.onboarding.report import (
    STATUS_LABELS,
    Checklist,
    RunReport,
    render_checklist,
    render_report,
)
from pmsgate.onboarding.runner import OnboardingRunner, StepEvent, confirm_step, reopen_step
from pmsgate.onboarding.steps import Step

T = TypeVar("T")

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


class _FileByDefault(TyperGroup):
    """`pmsgate onboard FILE.yaml …` means `pmsgate onboard run FILE.yaml …`."""

    # ``ctx`` is typer's vendored click Context, which it does not export under a public name.
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """Route anything that is not a subcommand (or the group's --help) to `run`."""
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


onboard_app = typer.Typer(
    cls=_FileByDefault,
    help="Onboard a customer (spec §4.3): `pmsgate onboard CUSTOMER.yaml`, then `status` and "
    "`confirm`.",
    no_args_is_help=True,
)

JsonOption = Annotated[
    bool, typer.Option("--json", help="Print one JSON object on standard output.")
]


@asynccontextmanager
async def open_cli_onboarding_services() -> AsyncIterator[OnboardingServices]:
    """The command's container (:func:`pmsgate.cli_support.open_cli_container`, with the
    knowledge group's upstreams: the tests' seam), as the onboarding services."""
    upstreams = knowledge_cli.upstreams
    async with open_cli_container(upstreams) as container:
        yield container.onboarding


def _run_on_onboarding_services(work: Callable[[OnboardingServices], Awaitable[T]]) -> T:
    async def _go() -> T:
        async with open_cli_onboarding_services() as services:
            return await work(services)

    return run(_go())


# --- the live view -----------------------------------------------------------------------------


class _LiveSteps:
    """A table of the steps that updates as the run goes (only on a terminal)."""

    PHASES = {"checking": "checking…", "applying": "applying…", "rechecking": "re-checking…"}

    def __init__(self, steps: Sequence[Step]) -> None:
        self.steps = steps
        self.state: dict[int, Text] = {}
        self.live = Live(self._table(), console=err_console, transient=True, refresh_per_second=8)

    def _table(self) -> Table:
        table = Table(title="onboarding", title_justify="left")
        table.add_column("#", justify="right")
        table.add_column("step")
        table.add_column("status")
        for step in self.steps:
            table.add_row(
                str(step.number), escape(step.title), self.state.get(step.number, Text("…"))
            )
        return table

    def __call__(self, event: StepEvent) -> None:
        if event.outcome is not None:
            label, style = STATUS_LABELS[event.outcome.status]
            self.state[event.step.number] = Text(label, style=style)
        else:
            self.state[event.step.number] = Text(self.PHASES.get(event.phase, event.phase))
        self.live.update(self._table())


# --- commands ----------------------------------------------------------------------------------


@onboard_app.command("run")
def run_command(
    file: Annotated[
        Path, typer.Argument(help="The customer file (YAML; format: docs/onboarding.md).")
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Check every step and say what would be done.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Run every onboarding step for the customer of FILE (resumes where it stopped)."""
    try:
        customer = load_customer_file(file)
    except PmsgateError as error:
        raise fail(error) from None
    steps = STEPS
    show_live = not as_json and err_console.is_terminal

    async def work(services: OnboardingServices) -> RunReport:
        runner = OnboardingRunner(services, steps)
        if not show_live:
            return await runner.run(customer, dry_run=dry_run)
        view = _LiveSteps(steps)
        with view.live:
            return await runner.run(customer, dry_run=dry_run, progress=view)

    report = _run_on_onboarding_services(work)
    if as_json:
        typer.echo(report.to_json())
    else:
        console.print(render_report(report))
    if report.exit_code:
        raise typer.Exit(code=report.exit_code)


@onboard_app.command("status")
def status_command(
    student_id: Annotated[str, typer.Argument(help="The customer's student_id.")],
    as_json: JsonOption = False,
) -> None:
    """The customer's checklist: done / not done / waiting for a person, evidence, due dates."""

    async def work(services: OnboardingServices) -> Checklist:
        repo = services.repository
        latest = await repo.checklist(student_id)
        if not latest:
            raise PmsgateError(
                f"Customer {student_id.strip()} has no onboarding results.",
                code="onboarding_not_found",
                status=404,
                hint="Run `pmsgate onboard CUSTOMER.yaml` first; check the student_id.",
            )
        return Checklist.build(student_id.strip(), latest, await repo.last_run(student_id))

    checklist = _run_on_onboarding_services(work)
    if as_json:
        typer.echo(checklist.to_json())
    else:
        console.print(render_checklist(checklist))


@onboard_app.command("confirm")
def confirm_command(
    student_id: Annotated[str, typer.Argument(help="The customer's student_id.")],
    step: Annotated[str, typer.Argument(help="The step's id (e.g. `channels`) or number.")],
    evidence: Annotated[
        str,
        typer.Option("--evidence", help="What was done and how it was checked (never a secret)."),
    ],
    item: Annotated[
        str | None,
        typer.Option("--item", help="The item of a step confirmed item by item (channels)."),
    ] = None,
    by: Annotated[
        str | None, typer.Option("--by", help="Who confirms (default: the login name).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Record a person's evidence for a manual step (or one of its items)."""
    person = by or _login_name()

    async def work(services: OnboardingServices) -> dict[str, Any]:
        view = await confirm_step(services, student_id, step, evidence, item=item, person=person)
        return view.as_dict()

    _print_step(_run_on_onboarding_services(work), as_json=as_json)


def _print_step(recorded: dict[str, Any], *, as_json: bool) -> None:
    """A step as confirm/reopen left it: its JSON, or one line and what it waits for."""
    if as_json:
        typer.echo(json.dumps(recorded, ensure_ascii=False))
        return
    label, style = STATUS_LABELS[recorded["status"]]
    console.print(
        f"step {recorded['number']} {escape(recorded['step'])}: [{style}]{label}[/] "
        f"- {escape(recorded['message'])}"
    )
    if recorded["waiting_for"]:
        console.print(f"[cyan]waiting for:[/] {escape(recorded['waiting_for'])}")


@onboard_app.command("reopen")
def reopen_command(
    student_id: Annotated[str, typer.Argument(help="The customer's student_id.")],
    step: Annotated[str, typer.Argument(help="The step's id (e.g. `channels`) or number.")],
    note: Annotated[
        str, typer.Option("--note", help="Why the confirmation is taken back (never a secret).")
    ] = "",
    item: Annotated[
        str | None,
        typer.Option("--item", help="The item of a step confirmed item by item (channels)."),
    ] = None,
    by: Annotated[
        str | None, typer.Option("--by", help="Who reopens (default: the login name).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Take back a person's confirmation of a step (or one item): it waits for a person again."""
    person = by or _login_name()

    async def work(services: OnboardingServices) -> dict[str, Any]:
        view = await reopen_step(services, student_id, step, note, item=item, person=person)
        return view.as_dict()

    _print_step(_run_on_onboarding_services(work), as_json=as_json)


def _login_name() -> str | None:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return None
