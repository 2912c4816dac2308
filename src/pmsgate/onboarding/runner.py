"""The onboarding runner: check → apply → check for each step, every result persisted.

For each step in order whose routes include the run's route (before step 9 decides
it, every step runs):

1. ``check``. Done → recorded, next step: a finished step is re-checked (cheap,
   read-only) and never applied again, so a re-run resumes where the last one
   stopped and repeats no side effect.
2. Not done and ``stop`` → recorded, the run STOPS (a failed prerequisite: the
   reason and the fix).
3. Not done and waiting for a person (a ``manual`` step, or any step that sets
   ``waiting_for``) → recorded with its due date; the run CONTINUES — a person
   never blocks what the machine can do.
4. Not done ``check`` step → recorded as not done; the run continues.
5. Not done ``auto`` step → ``apply`` (in a dry run: recorded as "would do: …" from
   ``describe``, nothing applied), then ``check`` again; still not done → the run
   FAILS at this step.

A step that needs an endpoint the public platform reference does not document (error
code ``platform_endpoint_unavailable``: the real platform answered 403/404/405/501) is
recorded as **a person's task** (status ``waiting``) with the instructions of
its ``Step.by_hand`` (:mod:`pmsgate.onboarding.person_tasks`) and the run continues; once a person
recorded evidence with ``pmsgate onboard confirm``, the same refusal counts as done.

Any other exception from a step is caught, recorded (its code and message: the service's
errors never carry a secret) and fails the run at that step; in a dry run it is
recorded as "cannot check yet" and the run goes on (a later step often depends on
an earlier one that a dry run does not apply). Steps of the other route are
skipped, as are route-specific steps while the route is undecided.

**The audit trail.** An ``apply`` is the only place a step changes something outside
(a workspace, custom tools, the gateway key stored in the workspace's secrets, the
agent, registry rows, knowledge nodes, channels, messages). So the runner, not each
step, records ``onboarding.side_effect`` once per applied step, after its result is
stored: the step, how it ended, and the re-check's evidence of what is there now
(made to fit by :func:`pmsgate.audit.trail.fit_details`: a secret-looking key is left
out). The actor is whoever runs the runbook (``pmsgate onboard`` by default); the
customer is the file's. A dry run and a step already done apply nothing and record
nothing.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal

import anyio
import structlog

from pmsgate.audit.actions import Actor, AuditAction, Outcome
from pmsgate.audit.trail import fit_details
from pmsgate.errors import Conflict, InvalidInput, NotFound, PmsgateError
from pmsgate.onboarding.context import OnboardingServices
from pmsgate.onboarding.customer_file import CustomerFile
from pmsgate.onboarding.person_tasks import ENDPOINT_UNAVAILABLE, person_task
from pmsgate.onboarding.registry import STEPS
from pmsgate.onboarding.report import RunReport, StepOutcome
from pmsgate.onboarding.steps import (
    BOTH_ROUTES,
    OnboardingContext,
    Step,
    StepKind,
    StepResult,
    execution_order,
    find_step,
)
from pmsgate.storage.models import OnboardingStepStatus
from pmsgate.storage.onboarding import NewStepResult, StepResultView

log = structlog.get_logger(__name__)

Phase = Literal["checking", "applying", "rechecking", "finished"]
# Who runs the runbook when the caller names no one: an operator's `pmsgate onboard`.
DEFAULT_ACTOR = Actor.cli("pmsgate onboard")


@dataclass(frozen=True)
class StepEvent:
    """Progress of one step: the phase it is in, and its outcome once finished."""

    step: Step
    phase: Phase
    outcome: StepOutcome | None = None


ProgressCallback = Callable[[StepEvent], Awaitable[None] | None]


def error_details(error: Exception) -> tuple[str, str, str | None]:
    """(code, message, hint) of an exception, safe to record and print."""
    if isinstance(error, PmsgateError):
        return error.code, error.message, error.hint
    code = getattr(error, "code", None)
    message = getattr(error, "message", None)
    if isinstance(code, str) and isinstance(message, str):
        # Upstream errors (platform, notes, booking system) carry a code and a safe message.
        return code, message, getattr(error, "hint", None)
    # Anything else: its type only — an arbitrary message may quote a secret.
    return "internal_error", f"unexpected {type(error).__name__}", None


class OnboardingRunner:
    """Runs the steps for one customer file on the given services."""

    def __init__(
        self,
        services: OnboardingServices,
        steps: Sequence[Step] | None = None,
        *,
        actor: Actor | None = None,
    ) -> None:
        self.services = services
        # The run's order: the runbook's, with step 16 after step 17 (Step.runs_after).
        self.steps = execution_order(steps if steps is not None else STEPS)
        # Who the audit trail names for the side effects of a run.
        self.actor = actor or DEFAULT_ACTOR

    async def run(
        self,
        file: CustomerFile,
        *,
        dry_run: bool = False,
        progress: ProgressCallback | None = None,
    ) -> RunReport:
        """One run of the runbook for the customer of ``file`` (see the module docstring)."""
        repo = self.services.repository
        student_id = file.student_id
        checklist = await repo.checklist(student_id)
        confirmations = await repo.confirmations(student_id)
        run = await repo.start_run(student_id, dry_run=dry_run)
        ctx = self.services.context(
            file,
            dry_run=dry_run,
            run_id=run.id,
            manual_evidence={key: value.evidence for key, value in confirmations.items()},
            previous={key: value.evidence for key, value in checklist.items()},
        )
        ctx.run.steps = tuple(self.steps)
        report = RunReport(student_id=student_id, run_id=run.id, dry_run=dry_run)
        log.info("onboarding_run_started", student_id=student_id, run_id=run.id, dry_run=dry_run)
        try:
            for step in self.steps:
                outcome = await self._step(ctx, step, progress)
                report.outcomes.append(outcome)
                report.route = ctx.route
                if outcome.status in ("failed", "stopped"):
                    report.status = outcome.status
                    report.ended_at_step = step.id
                    report.error_code = outcome.error_code
                    report.message = outcome.message
                    report.fix = outcome.fix
                    break
            else:
                report.status = "succeeded"
        finally:
            # An interrupted run (cancelled, crashed) is recorded as failed where it was.
            if report.status == "running":
                report.status = "failed"
                report.message = report.message or "interrupted"
            await repo.finish_run(
                run.id,
                report.status,
                route=report.route,
                ended_at_step=report.ended_at_step,
                error_code=report.error_code,
                message=report.message,
            )
        log.info(
            "onboarding_run_finished",
            student_id=student_id,
            run_id=run.id,
            status=report.status,
            route=report.route,
            ended_at_step=report.ended_at_step,
        )
        return report

    async def _step(
        self, ctx: OnboardingContext, step: Step, progress: ProgressCallback | None
    ) -> StepOutcome:
        skip = self._skip_reason(ctx, step)
        if skip is not None:
            outcome = StepOutcome.of_step(step, "skipped", message=skip)
            await _notify(progress, StepEvent(step, "finished", outcome))
            return outcome
        await _notify(progress, StepEvent(step, "checking"))
        attempt = await _attempt(ctx, step, progress)
        outcome = await self._record(ctx, step, attempt)
        await _notify(progress, StepEvent(step, "finished", outcome))
        return outcome

    async def _record(self, ctx: OnboardingContext, step: Step, attempt: _Attempt) -> StepOutcome:
        """Store the step's result (and an apply's side effect); the outcome to report."""
        result, status = attempt.result, attempt.status
        waiting_for = result.waiting_for
        if status == "waiting" and waiting_for is None:
            waiting_for = result.message or f"a person to do: {step.title}"
        # What the stored result and the reported outcome both say.
        said: dict[str, Any] = {
            "done": result.done,
            "message": result.message,
            "fix": result.fix,
            "waiting_for": waiting_for,
            "due": result.due,
        }
        record = await self.services.repository.record(
            new_step_result(
                ctx.student_id,
                step,
                status,
                evidence=_json_ready(result.evidence),
                run_id=ctx.run_id,
                dry_run=ctx.dry_run,
                **said,
            )
        )
        ctx.run.results[step.id] = result
        if attempt.apply_started:
            # An apply that ran (or broke off: part of it may have happened). One the platform
            # refused outright (a person's task now) changed nothing and is not recorded.
            await self._record_side_effect(
                ctx, step, status, result, attempt.applied, attempt.error_code
            )
        return StepOutcome.of_step(
            step,
            status,
            evidence=record.evidence,
            applied=attempt.applied,
            error_code=attempt.error_code,
            recorded_at=record.recorded_at.isoformat(),
            recorded_by=record.recorded_by,
            **said,
        )

    async def _record_side_effect(
        self,
        ctx: OnboardingContext,
        step: Step,
        status: str,
        result: StepResult,
        applied: bool,
        error_code: str | None,
    ) -> None:
        """``onboarding.side_effect`` for one applied step (after its result is stored)."""
        audit = self.services.audit
        if audit is None:
            return
        details: dict[str, Any] = {
            "step": step.id,
            "number": step.number,
            "title": step.title,
            "status": status,
            "run_id": ctx.run_id,
            "completed": applied,  # False: the apply broke off part way
            "evidence": fit_details(_json_ready(result.evidence) or {}),
        }
        if error_code is not None:
            details["error_code"] = error_code
        outcome = Outcome.SUCCESS if status == "done" else Outcome.FAILURE
        with anyio.CancelScope(shield=True):
            await audit.record(
                AuditAction.ONBOARDING_SIDE_EFFECT,
                actor=self.actor,
                subject=f"customer:{ctx.student_id}",
                outcome=outcome,
                details=details,
                student_id=ctx.student_id,
            )

    @staticmethod
    def _skip_reason(ctx: OnboardingContext, step: Step) -> str | None:
        if step.routes >= BOTH_ROUTES:
            return None
        if ctx.route is None:
            return "route not decided (step 9)"
        if ctx.route not in step.routes:
            return f"not on Route {ctx.route}"
        return None


@dataclass(frozen=True)
class _Attempt:
    """What checking (and applying) one step came to, before it is recorded."""

    result: StepResult
    status: OnboardingStepStatus
    applied: bool = False  # an apply ran to its end
    apply_started: bool = False  # an apply ran, or broke off part way
    error_code: str | None = None


async def _attempt(
    ctx: OnboardingContext, step: Step, progress: ProgressCallback | None
) -> _Attempt:
    """Check → apply → check again (never applied in a dry run); errors become results."""
    applied = apply_started = False
    try:
        result = await step.check(ctx)
        status = _status_after_check(step, result)
        if status != "apply":
            return _Attempt(result, status)
        if ctx.dry_run:
            what = await step.describe(ctx) if step.describe else "apply this step"
            would = StepResult(done=False, evidence=result.evidence, message=f"would do: {what}")
            return _Attempt(would, "would_do")
        assert step.apply is not None  # _status_after_check said so
        await _notify(progress, StepEvent(step, "applying"))
        apply_started = True
        await step.apply(ctx)
        applied = True
        await _notify(progress, StepEvent(step, "rechecking"))
        result = await step.check(ctx)
        status = _status_after_check(step, result)
        if status == "apply":
            result = StepResult(
                done=False,
                evidence=result.evidence,
                message=f"still not done after applying: {result.message}",
                fix=result.fix,
            )
            return _Attempt(result, "failed", applied=True, apply_started=True)
        return _Attempt(result, status, applied=True, apply_started=True)
    except Exception as error:
        return _after_error(ctx, step, error, applied=applied, apply_started=apply_started)


def _after_error(
    ctx: OnboardingContext,
    step: Step,
    error: Exception,
    *,
    applied: bool,
    apply_started: bool,
) -> _Attempt:
    """The result of a check or apply that raised."""
    error_code, message, hint = error_details(error)
    log.warning("onboarding_step_error", step=step.id, code=error_code, error=type(error).__name__)
    if error_code == ENDPOINT_UNAVAILABLE:
        # Not a failure: the platform offers no API for it, so a person does it. Refused
        # outright: nothing changed outside.
        result = person_task(ctx, step, message)
        return _Attempt(result, "done" if result.done else "waiting", applied=applied)
    if ctx.dry_run:
        result = StepResult(
            done=False,
            evidence={"error": error_code},
            message=f"cannot check yet: {message}",
            fix=hint,
        )
        return _Attempt(result, "not_done", applied, apply_started, error_code)
    result = StepResult(done=False, evidence={"error": error_code}, message=message, fix=hint)
    return _Attempt(result, "failed", applied, apply_started, error_code)


def _status_after_check(step: Step, result: StepResult) -> OnboardingStepStatus | Literal["apply"]:
    if result.done:
        return "done"
    if result.stop:
        return "stopped"
    if result.waiting_for is not None or step.kind is StepKind.MANUAL:
        return "waiting"
    if step.kind is StepKind.AUTO and step.apply is not None:
        return "apply"
    return "not_done"


def _json_ready(value: Any) -> Any:
    """Evidence as JSON can hold it (dates and other objects as text)."""
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_json_ready(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


async def _notify(progress: ProgressCallback | None, event: StepEvent) -> None:
    if progress is None:
        return
    outcome = progress(event)
    if inspect.isawaitable(outcome):
        await outcome


# --- a person's confirmation of a manual step --------------------------------------------------


async def confirm_step(
    services: OnboardingServices,
    student_id: str,
    step_ref: str,
    evidence: str,
    *,
    item: str | None = None,
    person: str | None = None,
    actor: Actor | None = None,
    steps: Sequence[Step] | None = None,
) -> StepResultView:
    """Record a person's evidence for a manual step (or one of its items); kept for later runs.

    A step with items (``channels``) needs ``item``; the step is done once every
    required item is confirmed. A non-manual step can be confirmed only while it
    waits for a person; the next run re-checks it. Audited ``onboarding.step_confirmed``
    with ``actor`` (the admin, from the console) or the CLI as actor.
    """
    repo = services.repository
    student_id = student_id.strip()
    step = _person_step(STEPS if steps is None else steps, step_ref)
    text = evidence.strip()
    if not text:
        raise InvalidInput(
            "The evidence is empty.",
            code="evidence_required",
            hint='Say what was done and how it was checked, e.g. --evidence "number +39… live".',
        )
    checklist = await _checklist(services, student_id)
    latest = checklist.get(step.id)
    _refuse_unconfirmable(step, latest, item)
    now = services.clock.now()
    confirmation = {"evidence": text, "confirmed_at": now.isoformat(), "by": person}
    earlier = (await repo.confirmations(student_id)).get(step.id)
    confirmed = _confirmed(step, item, confirmation, earlier, latest)
    return await _record_for_person(
        services,
        AuditAction.ONBOARDING_STEP_CONFIRMED,
        student_id,
        step,
        confirmed,
        item=item,
        note=text,
        actor=actor,
        person=person,
    )


def _refuse_unconfirmable(step: Step, latest: StepResultView | None, item: str | None) -> None:
    """Refuse a confirmation the step does not take (not a person's step, a wrong item)."""
    if step.kind is not StepKind.MANUAL and (latest is None or latest.status != "waiting"):
        raise Conflict(
            f"Step {step.number} ({step.id}) is not a manual step and is not waiting for a person.",
            code="step_not_manual",
            hint="Only manual steps, or steps the checklist shows as waiting for a person, "
            "take a person's evidence.",
        )
    if step.items and item is None:
        raise InvalidInput(
            f"Step {step.id} is confirmed item by item.",
            code="item_required",
            hint="Give --item, one of: " + ", ".join(step.item_ids),
        )
    if item is not None and item not in step.item_ids:
        raise InvalidInput(
            f"Step {step.id} has no item {item}.",
            code="unknown_item",
            hint=(
                "Items: " + ", ".join(step.item_ids)
                if step.items
                else "This step has no items: leave --item out."
            ),
        )


@dataclass(frozen=True)
class _Confirmed:
    """A step's result once a person's confirmation is added."""

    evidence: dict[str, Any]
    status: OnboardingStepStatus
    message: str
    waiting_for: str | None = None
    due: date | None = None


def _confirmed(
    step: Step,
    item: str | None,
    confirmation: dict[str, Any],
    earlier: StepResultView | None,
    latest: StepResultView | None,
) -> _Confirmed:
    """The result ``confirmation`` makes of the step (with the items confirmed before it)."""
    if item is None:
        if step.kind is not StepKind.MANUAL:
            return _Confirmed(
                confirmation,
                "not_done",
                "a person's evidence is recorded; the next run re-checks this step",
            )
        return _Confirmed(confirmation, "done", "confirmed by a person")
    items = dict((earlier.evidence.get("items") or {}) if earlier else {})
    items[item] = confirmation
    known = latest.evidence if latest is not None else {}
    required = known.get("required_items") or list(step.item_ids)
    pending = [i for i in required if i not in items]
    described = known.get("items") or {}
    waiting_for = None
    due = None
    if pending:
        waiting_for = "; ".join(f"[{i}] {(described.get(i) or {}).get('what', i)}" for i in pending)
        # The due date stands while an item with a lead time still waits.
        dated = any(entry.dated for i in pending if (entry := step.item(i)) is not None)
        due = latest.due if latest is not None and dated else None
    message = (
        f"{item} confirmed; {len(pending)} item(s) still waiting"
        if pending
        else f"{item} confirmed; every item confirmed"
    )
    if step.kind is not StepKind.MANUAL:
        status: OnboardingStepStatus = "not_done"
    else:
        status = "waiting" if pending else "done"
    return _Confirmed({"items": items}, status, message, waiting_for, due)


async def _checklist(services: OnboardingServices, student_id: str) -> dict[str, StepResultView]:
    """The customer's checklist; ``onboarding_not_found`` when it has no results."""
    checklist = await services.repository.checklist(student_id)
    if not checklist:
        raise NotFound(
            f"Customer {student_id} has no onboarding results.",
            code="onboarding_not_found",
            hint="Run `pmsgate onboard CUSTOMER.yaml` first; check the student_id.",
        )
    return checklist


def new_step_result(
    student_id: str, step: Step, status: OnboardingStepStatus, **more: Any
) -> NewStepResult:
    """A result of ``step`` to store, in ``status``, with ``more`` of its fields."""
    return NewStepResult(
        student_id=student_id,
        step_id=step.id,
        number=step.number,
        kind=str(step.kind),
        status=status,
        **more,
    )


async def _record_for_person(
    services: OnboardingServices,
    action: AuditAction,
    student_id: str,
    step: Step,
    result: _Confirmed,
    *,
    item: str | None,
    note: str,
    actor: Actor | None,
    person: str | None,
) -> StepResultView:
    """Store a person's confirmation or reopening of the step, then its event in the trail
    (the console's admin or the CLI as actor)."""
    view = await services.repository.record(
        new_step_result(
            student_id,
            step,
            result.status,
            done=result.status == "done",
            evidence=_json_ready(result.evidence),
            message=result.message,
            waiting_for=result.waiting_for,
            due=result.due,
            recorded_by="person",
            person=person,
        )
    )
    if services.audit is None:  # a runner built without the trail (some tests)
        return view
    who = actor if actor is not None else Actor.cli(f"pmsgate onboard ({person or 'unknown'})")
    await services.audit.record(
        action,
        actor=who,
        subject=f"step:{step.id}" + (f"/{item}" if item else ""),
        details=fit_details({"step": step.id, "number": step.number, "item": item, "note": note}),
        student_id=student_id,
    )
    return view


def _person_step(catalogue: Sequence[Step], step_ref: str) -> Step:
    step = find_step(catalogue, step_ref)
    if step is None:
        raise InvalidInput(
            f"No onboarding step {step_ref}.",
            code="unknown_step",
            hint="Steps: " + ", ".join(f"{s.number} {s.id}" for s in catalogue),
        )
    return step


async def reopen_step(
    services: OnboardingServices,
    student_id: str,
    step_ref: str,
    note: str = "",
    *,
    item: str | None = None,
    person: str | None = None,
    actor: Actor | None = None,
    steps: Sequence[Step] | None = None,
) -> StepResultView:
    """Take back a person's confirmation of a step (or of one item): it waits for a person again.

    The earlier evidence stays in the step's history; the next run sees the step (or the
    item) unconfirmed and lists it as a person's task again. 409 ``step_not_confirmed``
    when there is nothing a person confirmed to take back.
    """
    repo = services.repository
    student_id = student_id.strip()
    step = _person_step(STEPS if steps is None else steps, step_ref)
    checklist = await _checklist(services, student_id)
    earlier = (await repo.confirmations(student_id)).get(step.id)
    confirmed = dict(earlier.evidence) if earlier is not None else {}
    items = dict(confirmed.get("items") or {})
    if item is not None and item not in items:
        raise Conflict(
            f"Item {item} of step {step.id} is not confirmed.",
            code="step_not_confirmed",
            hint="Only a confirmed step or item can be reopened; see the checklist.",
        )
    if item is None and not (confirmed.get("evidence") or items):
        raise Conflict(
            f"Step {step.number} ({step.id}) has no person's confirmation to take back.",
            code="step_not_confirmed",
            hint="Only a confirmed step or item can be reopened; see the checklist.",
        )
    text = note.strip()
    recorded: dict[str, Any] = {}
    if item is not None:
        items.pop(item)
        recorded = {"items": items}
    latest = checklist.get(step.id)
    who = f" by {person}" if person else ""
    reopened = _Confirmed(
        recorded,
        "waiting",
        (f"{item} reopened" if item else "reopened") + who + (f": {text}" if text else ""),
        f"[{item}] to be confirmed again" if item else "a person, to do and confirm it again",
        latest.due if latest is not None else None,
    )
    return await _record_for_person(
        services,
        AuditAction.ONBOARDING_STEP_REOPENED,
        student_id,
        step,
        reopened,
        item=item,
        note=text,
        actor=actor,
        person=person,
    )
