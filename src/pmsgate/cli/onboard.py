"""`pmsgate onboard …`: run the onboarding runbook, show a customer's checklist, confirm steps.

- ``pmsgate onboard CUSTOMER.yaml [--dry-run] [--json]`` (same as ``pmsgate onboard
  run CUSTOMER.yaml``): every step (docs/requirements.md R21) in order, with a live view of the
  steps on a terminal (standard error), then the run's table — or, with ``--json``,
  one JSON object on standard output. A run in which no step applied anything says
  "Nothing changed".
- ``pmsgate onboard status STUDENT_ID [--json]``: the checklist (done / not done /
  waiting for a person, with evidence in plain words and due dates; ``--json`` keeps the
  evidence as recorded).
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
(:data:`pmsgate.cli.knowledge.upstreams`): real clients by default, the
emulators' ASGI app in the sandbox and the tests.
"""

from __future__ import annotations

import getpass
import json
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

from pmsgate.cli import knowledge as knowledge_cli
from pmsgate.cli.support import (
    JsonOption,
    StudentArgument,
    console,
    err_console,
    fail,
    run_on_container,
)
from pmsgate.errors import PmsgateError
from pmsgate.onboarding.context import OnboardingServices
from pmsgate.onboarding.customer_file import load_customer_file
from pmsgate.onboarding.registry import STEPS
from pmsgate.onboarding.report import (
    STATUS_LABELS,
    Checklist,
    RunReport,
    StepOutcome,
    render_report,
)
from pmsgate.onboarding.runner import (
    OnboardingRunner,
    StepEvent,
    StepResultView,
    confirm_step,
    reopen_step,
)
from pmsgate.onboarding.steps import Step

T = TypeVar("T")


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
    help="Onboard a customer (17 steps): `pmsgate onboard CUSTOMER.yaml`, then `status` and "
    "`confirm`.",
    no_args_is_help=True,
)


def _run_on_onboarding_services(work: Callable[[OnboardingServices], Awaitable[T]]) -> T:
    upstreams = knowledge_cli.upstreams
    return run_on_container(lambda container: work(container.onboarding), upstreams)


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
        if nothing_changed(report):
            console.print(
                "Nothing changed: every step was already done or waits for a person; "
                "nothing was written or sent."
            )
    if report.exit_code:
        raise typer.Exit(code=report.exit_code)


@onboard_app.command("status")
def status_command(
    student_id: StudentArgument,
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
        console.print(checklist_in_words(checklist))


def nothing_changed(report: RunReport) -> bool:
    """Whether a (real) run went through without any step applying anything."""
    return (
        not report.dry_run
        and report.status == "succeeded"
        and not any(outcome.applied for outcome in report.outcomes)
    )


# --- the checklist in plain words --------------------------------------------------------------


def checklist_in_words(checklist: Checklist) -> RenderableType:
    """The standing checklist, step by step: its status, what it says, its evidence as
    ``name: value`` lines (``--json`` keeps the evidence as recorded)."""
    parts: list[RenderableType] = []
    route = f" - Route {checklist.route}" if checklist.route else ""
    parts.append(Text(f"Checklist of {checklist.student_id}{route}", style="bold"))
    if checklist.last_run is not None:
        run = checklist.last_run
        parts.append(
            Text(
                f"Last run #{run.number}: {run.status}, started "
                f"{run.started_at.isoformat(timespec='seconds')}",
                style="dim",
            )
        )
    for outcome in checklist.outcomes:
        parts += ["", *_step_in_words(outcome)]
    counts = checklist.counts()
    parts += [
        "",
        Text(", ".join(f"{STATUS_LABELS[status][0]}: {n}" for status, n in counts.items())),
    ]
    return Group(*parts)


def _step_in_words(outcome: StepOutcome) -> list[RenderableType]:
    label, style = STATUS_LABELS[outcome.status]
    heading = Text(f"{outcome.number:>2}. {outcome.title}: ", style="bold")
    heading.append(label, style=style)
    heading.append(f" ({outcome.kind})", style="dim")
    lines: list[Text] = []
    if outcome.message:
        lines.append(Text(outcome.message))
    if outcome.waiting_for:
        # A step's items ("[item] what; [item] what") read best one per line.
        first, *items = outcome.waiting_for.split("; [")
        lines += [Text(f"waiting for: {first}"), *(Text(f"  [{item}") for item in items)]
    if outcome.due:
        lines.append(Text(f"due: {outcome.due.isoformat()}", style="cyan"))
    for warning in outcome.warnings:
        lines.append(Text(f"warning: {warning}", style="yellow"))
    if outcome.fix and outcome.status in ("failed", "stopped", "waiting", "not_done"):
        lines.append(Text(f"fix: {outcome.fix}", style="yellow"))
    if outcome.recorded_at:
        by = f" by {outcome.recorded_by}" if outcome.recorded_by else ""
        lines.append(Text(f"recorded {outcome.recorded_at}{by}", style="dim"))
    evidence = evidence_lines(outcome.evidence)
    if evidence:
        lines.append(Text("evidence:"))
        lines += [Text(f"  {line}") for line in evidence]
    return [heading, *(Padding(line, (0, 0, 0, 4)) for line in lines)]


def evidence_lines(evidence: Any, indent: str = "") -> list[str]:
    """Recorded evidence as plain lines: ``name: value``, nested values indented, a
    manual step's items one per line (``[item] done: …`` or ``[item] waiting``)."""
    if not isinstance(evidence, dict):
        return [f"{indent}{_words(evidence)}"] if evidence not in (None, "", []) else []
    lines: list[str] = []
    for key, value in evidence.items():
        if key == "warnings":
            continue  # shown with the step, in yellow
        if key == "items" and isinstance(value, dict):
            for item, entry in value.items():
                entry = entry if isinstance(entry, dict) else {}
                given = entry.get("evidence")
                lines.append(f"{indent}[{item}] " + (f"done: {given}" if given else "waiting"))
            continue
        name = str(key).replace("_", " ")
        if isinstance(value, dict) and value:
            lines.append(f"{indent}{name}:")
            lines += evidence_lines(value, indent + "  ")
        elif isinstance(value, list) and any(isinstance(v, dict) for v in value):
            lines.append(f"{indent}{name}:")
            for entry in value:
                nested = evidence_lines(entry, indent + "    ")
                if nested:
                    lines.append(f"{indent}  - {nested[0].strip()}")
                    lines += nested[1:]
        else:
            lines.append(f"{indent}{name}: {_words(value)}")
    return lines


def _words(value: Any) -> str:
    """A scalar or a list of scalars as words."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(_words(v) for v in value) or "none"
    return str(value)


StepArgument = Annotated[str, typer.Argument(help="The step's id (e.g. `channels`) or number.")]
ItemOption = Annotated[
    str | None,
    typer.Option("--item", help="The item of a step confirmed item by item (channels)."),
]


def _by_option(verb: str) -> Any:
    return typer.Option("--by", help=f"Who {verb} (default: the login name).")


@onboard_app.command("confirm")
def confirm_command(
    student_id: StudentArgument,
    step: StepArgument,
    evidence: Annotated[
        str,
        typer.Option("--evidence", help="What was done and how it was checked (never a secret)."),
    ],
    item: ItemOption = None,
    by: Annotated[str | None, _by_option("confirms")] = None,
    as_json: JsonOption = False,
) -> None:
    """Record a person's evidence for a manual step (or one of its items)."""
    _change_step(confirm_step, student_id, step, evidence, item, by, as_json=as_json)


@onboard_app.command("reopen")
def reopen_command(
    student_id: StudentArgument,
    step: StepArgument,
    note: Annotated[
        str, typer.Option("--note", help="Why the confirmation is taken back (never a secret).")
    ] = "",
    item: ItemOption = None,
    by: Annotated[str | None, _by_option("reopens")] = None,
    as_json: JsonOption = False,
) -> None:
    """Take back a person's confirmation of a step (or one item): it waits for a person again."""
    _change_step(reopen_step, student_id, step, note, item, by, as_json=as_json)


def _change_step(
    change: Callable[..., Awaitable[StepResultView]],
    student_id: str,
    step: str,
    text: str,
    item: str | None,
    by: str | None,
    *,
    as_json: bool,
) -> None:
    """Confirm or reopen a step as a person (``by``, else the login name) and print it."""
    person = by or _login_name()

    async def work(services: OnboardingServices) -> dict[str, Any]:
        view = await change(services, student_id, step, text, item=item, person=person)
        return view.as_dict()

    recorded = _run_on_onboarding_services(work)
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


def _login_name() -> str | None:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return None
