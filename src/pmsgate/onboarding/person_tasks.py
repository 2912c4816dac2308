"""What a person does when the platform offers no API for a step (docs/assistant-api.md).

Some onboarding steps need endpoints that the assistant platform's public reference does
not document (workspace creation, workspace secrets, members and roles, usage, listings,
the booking-system connection, test conversations). When the real platform refuses one
(the client's ``platform_endpoint_unavailable``), the step becomes a person's task: it is
recorded as waiting, with what to do in the platform's dashboard and which evidence to
record with ``pmsgate onboard confirm``; the run goes on. Once confirmed, the same refusal
counts as done. Nothing here writes upstream.

Each step declares its own :class:`~pmsgate.onboarding.steps.PersonTask` (``Step.by_hand``,
next to its check and apply); a step without one gets general instructions.
"""

from __future__ import annotations

from typing import Any

from pmsgate.onboarding.steps import OnboardingContext, PersonTask, Step, StepResult

ENDPOINT_UNAVAILABLE = "platform_endpoint_unavailable"

_DEFAULT = PersonTask(
    "Do this step in the platform dashboard: the platform offers no API for it.",
    "what was done and how it was checked",
)


def person_task(ctx: OnboardingContext, step: Step, refused: str) -> StepResult:
    """The step as a person's task: waiting with instructions, or done once confirmed."""
    task = step.by_hand or _DEFAULT
    evidence: dict[str, Any] = {"person_task": True, "refused": refused, "record": task.evidence}
    confirmation = ctx.manual_evidence.get(step.id)
    if confirmation:
        evidence["confirmation"] = confirmation
        return StepResult(
            done=True,
            evidence=evidence,
            message="done by a person (the platform offers no API for it)",
        )
    confirm = (
        f"then record it: pmsgate onboard confirm {ctx.student_id} {step.id} "
        f'--evidence "{task.evidence}"'
    )
    return StepResult(
        done=False,
        evidence=evidence,
        message=f"a person's task: the platform offers no API for it ({refused})",
        waiting_for=f"{task.instructions} {confirm}",
        fix=task.instructions,
    )
