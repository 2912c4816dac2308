"""What a run did and what the checklist says: data (JSON-ready) and its Rich rendering.

:class:`RunReport` is one run's outcome per step; :class:`Checklist` is the
customer's standing checklist (the latest recorded result per step, dry runs left
out), which ``pmsgate onboard status`` prints. Evidence is shown as recorded —
steps never put a secret in it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import date
from typing import Any, Literal

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from pmsgate.onboarding.registry import STEPS
from pmsgate.onboarding.steps import Step
from pmsgate.storage.onboarding import RunView, StepResultView

OutcomeStatus = Literal[
    "done", "not_done", "waiting", "would_do", "failed", "stopped", "skipped", "not_checked"
]
RunStatus = Literal["running", "succeeded", "failed", "stopped"]

# How each status reads in the checklist, and its colour.
STATUS_LABELS: dict[str, tuple[str, str]] = {
    "done": ("done", "green"),
    "not_done": ("not done", "yellow"),
    "waiting": ("waiting for a person", "cyan"),
    "would_do": ("would do", "blue"),
    "failed": ("FAILED", "bold red"),
    "stopped": ("STOPPED", "bold red"),
    "skipped": ("skipped", "dim"),
    "not_checked": ("not checked yet", "dim"),
}


@dataclass(frozen=True)
class StepOutcome:
    """One step as a run (or the checklist) sees it."""

    number: int
    id: str
    title: str
    kind: str
    status: OutcomeStatus
    done: bool = False
    message: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    fix: str | None = None
    waiting_for: str | None = None
    due: date | None = None
    applied: bool = False  # apply ran in this run
    error_code: str | None = None
    recorded_at: str | None = None
    recorded_by: str | None = None

    @property
    def label(self) -> str:
        """The status as the checklist words it."""
        return STATUS_LABELS[self.status][0]

    @property
    def warnings(self) -> list[str]:
        """What holds but a person should look at (evidence ``warnings``, e.g. step 14's)."""
        found = self.evidence.get("warnings") if isinstance(self.evidence, dict) else None
        return [str(w) for w in found] if isinstance(found, list) else []

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view: the fields in their order (``id`` as ``step``), then the
        warnings."""
        view = {"step" if name == "id" else name: value for name, value in asdict(self).items()}
        view["due"] = self.due.isoformat() if self.due else None
        view["warnings"] = self.warnings
        return view

    @classmethod
    def of_step(cls, step: Step, status: OutcomeStatus, **more: Any) -> StepOutcome:
        """``step`` (its number, id, title and kind) in ``status``, with ``more`` of its fields."""
        return cls(
            number=step.number,
            id=step.id,
            title=step.title,
            kind=str(step.kind),
            status=status,
            **more,
        )

    @classmethod
    def of_record(cls, step: Step, record: StepResultView) -> StepOutcome:
        """The outcome a stored result says."""
        return cls.of_step(
            step,
            record.status,
            done=record.done,
            message=record.message,
            evidence=record.evidence,
            fix=record.fix,
            waiting_for=record.waiting_for,
            due=record.due,
            error_code=record.evidence.get("error") if record.status == "failed" else None,
            recorded_at=record.recorded_at.isoformat(),
            recorded_by=record.recorded_by,
        )


class _Outcomes:
    """What a run's report and a checklist share: steps' outcomes, counted, as JSON."""

    outcomes: list[StepOutcome]

    def counts(self) -> dict[str, int]:
        """How many steps are in each status."""
        counts: dict[str, int] = {}
        for outcome in self.outcomes:
            counts[outcome.status] = counts.get(outcome.status, 0) + 1
        return counts

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view."""
        raise NotImplementedError

    def to_json(self) -> str:
        """This as one JSON object."""
        return json.dumps(self.as_dict(), ensure_ascii=False)


# What a run's report says, in this order: its own fields, and what is computed from its steps.
_REPORT_KEYS = (
    "student_id",
    "run_id",
    "dry_run",
    "status",
    "route",
    "complete",
    "ended_at_step",
    "error_code",
    "message",
    "fix",
    "counts",
    "steps",
)


@dataclass
class RunReport(_Outcomes):
    """The outcome of one run: per step, and overall."""

    student_id: str
    run_id: str
    dry_run: bool
    status: RunStatus = "running"
    route: str | None = None
    outcomes: list[StepOutcome] = field(default_factory=list)
    ended_at_step: str | None = None
    error_code: str | None = None
    message: str | None = None
    fix: str | None = None

    @property
    def exit_code(self) -> int:
        """0 unless an automatable step failed or a prerequisite stopped the run."""
        return 1 if self.status in ("failed", "stopped") else 0

    @property
    def waiting(self) -> list[StepOutcome]:
        """The steps waiting for a person."""
        return [o for o in self.outcomes if o.status == "waiting"]

    @property
    def complete(self) -> bool:
        """True when every step of the route is done."""
        return self.status == "succeeded" and all(
            o.status in ("done", "skipped") for o in self.outcomes
        )

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view (its keys in the order of :data:`_REPORT_KEYS`)."""
        computed = {
            "complete": self.complete,
            "counts": self.counts(),
            "steps": [o.as_dict() for o in self.outcomes],
        }
        return {
            key: computed[key] if key in computed else getattr(self, key) for key in _REPORT_KEYS
        }


@dataclass
class Checklist(_Outcomes):
    """The customer's standing checklist: the latest recorded result of each step."""

    student_id: str
    route: str | None
    last_run: RunView | None
    outcomes: list[StepOutcome]

    @classmethod
    def build(
        cls,
        student_id: str,
        latest: dict[str, StepResultView],
        last_run: RunView | None,
        steps: Sequence[Step] = STEPS,
    ) -> Checklist:
        """The checklist from the latest results (steps off the customer's route: skipped)."""
        route = last_run.route if last_run is not None else None
        outcomes: list[StepOutcome] = []
        for step in steps:
            record = latest.get(step.id)
            off_route = route is not None and route not in step.routes
            if record is not None and not off_route:
                outcomes.append(StepOutcome.of_record(step, record))
                continue
            # A step of the other route keeps its old results as history, not as the checklist.
            outcomes.append(
                StepOutcome.of_step(
                    step,
                    "skipped" if off_route else "not_checked",
                    message=f"not on Route {route}" if off_route else "",
                )
            )
        return cls(student_id=student_id, route=route, last_run=last_run, outcomes=outcomes)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view."""
        return {
            "student_id": self.student_id,
            "route": self.route,
            "last_run": self.last_run.as_dict() if self.last_run else None,
            "counts": self.counts(),
            "steps": [o.as_dict() for o in self.outcomes],
        }


# --- rendering ---------------------------------------------------------------------------------


def _evidence_text(evidence: dict[str, Any], limit: int = 240) -> str:
    lines: list[str] = []
    parts: list[str] = []
    for key, value in evidence.items():
        if key == "warnings":
            continue  # shown with the details, in yellow
        if key == "items" and isinstance(value, dict):
            # A manual step's items: one line each, with the person's evidence when given.
            for item, entry in value.items():
                entry = entry if isinstance(entry, dict) else {}
                given = entry.get("evidence")
                mark = f"done: {given}" if given else "waiting"
                lines.append(f"[{item}] {mark}")
            continue
        shown = value if isinstance(value, str | int | float | bool) or value is None else None
        if shown is None:
            shown = json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))
        parts.append(f"{key}={shown}")
    text = ", ".join(parts)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return "\n".join([*lines, text] if text else lines)


def status_text(outcome: StepOutcome) -> Text:
    """The coloured status of one step."""
    label, style = STATUS_LABELS[outcome.status]
    return Text(label, style=style)


def outcomes_table(outcomes: list[StepOutcome], *, title: str, evidence: bool = True) -> Table:
    """The steps as a table: number, title, kind, status, what it says (and evidence)."""
    table = Table(title=title, title_justify="left", expand=False)
    table.add_column("#", justify="right")
    table.add_column("step")
    table.add_column("kind")
    table.add_column("status")
    table.add_column("details", overflow="fold")
    if evidence:
        table.add_column("evidence", overflow="fold", style="dim")
    for outcome in outcomes:
        details = Text(outcome.message)
        if outcome.waiting_for:
            # A step's items ("[item] what; [item] what") read best one per line.
            waiting = outcome.waiting_for.replace("; [", "\n  [")
            details.append(f"\nwaiting for: {waiting}", style="cyan")
        if outcome.due:
            details.append(f"\ndue: {outcome.due.isoformat()}", style="cyan")
        for warning in outcome.warnings:
            details.append(f"\nwarning: {warning}", style="yellow")
        if outcome.fix and outcome.status in ("failed", "stopped", "waiting", "not_done"):
            details.append(f"\nfix: {outcome.fix}", style="yellow")
        row: list[RenderableType] = [
            str(outcome.number),
            escape(outcome.title),
            outcome.kind,
            status_text(outcome),
            details,
        ]
        if evidence:
            row.append(Text(_evidence_text(outcome.evidence)))
        table.add_row(*row)
    return table


def render_report(report: RunReport) -> RenderableType:
    """A run's outcome: the table and one summary line."""
    title = (
        f"Onboarding of {report.student_id}"
        + (" (dry run)" if report.dry_run else "")
        + (f" - Route {report.route}" if report.route else "")
    )
    summary = Text()
    if report.status == "succeeded":
        waiting = len(report.waiting)
        if report.dry_run:
            summary.append("dry run finished: nothing was written", style="blue")
        elif report.complete:
            summary.append("every step is done", style="green")
        else:
            summary.append("every automatable step is done", style="green")
            if waiting:
                summary.append(f"; {waiting} waiting for a person", style="cyan")
    else:
        summary.append(
            f"run {report.status} at step {report.ended_at_step}: {report.message}",
            style="bold red",
        )
        if report.fix:
            summary.append(f"\nfix: {report.fix}", style="yellow")
    return Group(outcomes_table(report.outcomes, title=title, evidence=False), summary)
