"""What a person does when the platform offers no API for a step (docs/platform-api.md).

Some onboarding steps need endpoints that the assistant platform's public reference does
not document (workspace creation, workspace secrets, members and roles, usage, listings,
the booking-system connection, test conversations). When the real platform refuses one
(the client's ``platform_endpoint_unavailable``), the step becomes a person's task: it is
recorded as waiting, with what to do in the platform's dashboard and which evidence to
record with ``pmsgate onboard confirm``; the run goes on. Once confirmed, the same refusal
counts as done. Nothing here writes upstream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pmsgate.onboarding.steps import OnboardingContext, Step, StepResult

ENDPOINT_UNAVAILABLE = "platform_endpoint_unavailable"


@dataclass(frozen=True)
class PersonTask:
    """The instructions of one step done by hand, and the evidence to record."""

    instructions: str
    evidence: str


PERSON_TASKS: dict[str, PersonTask] = {
    "workspace": PersonTask(
        "In the platform dashboard, create the customer's workspace (the name and slug of "
        "the customer file) and give the account token access to it; the next run finds it "
        "in GET /v1/workspaces and records its id.",
        "the workspace id and name as the dashboard shows them",
    ),
    "custom-tools": PersonTask(
        "In the platform dashboard, add the workspace secrets the custom tools read: the "
        "gateway URL and a gateway key minted for this workspace (`pmsgate gateway "
        "facilities mint-key HOTEL_ID --label pmsgate-workspace:WORKSPACE_ID`); the tools "
        "themselves are created by the runbook.",
        "the two secret names and the gateway key's prefix (never the key)",
    ),
    "platform-admin": PersonTask(
        "In the platform dashboard, add the platform team's admins of the customer file to "
        "the workspace with the Admin role.",
        "the e-mails added and their role",
    ),
    "route-choice": PersonTask(
        "In the platform dashboard, count the workspace's listings (the booking-system "
        "sync): one per apartment means Route A, none means Route B; then follow that "
        "route's steps by hand or once the listings API is available.",
        "the number of listings and the route chosen",
    ),
    "listings-count": PersonTask(
        "In the platform dashboard, check that the workspace lists one listing per "
        "apartment of the booking system.",
        "the number of listings and of apartments",
    ),
    "apartment-registry": PersonTask(
        "In the platform dashboard, read each listing's id and write the apartment "
        "registry rows by hand.",
        "the listing id of every apartment",
    ),
    "onboarding-message": PersonTask(
        "Read the workspace's usage in the platform dashboard (spend, messages, tool calls) "
        "as the baseline.",
        "the three numbers and when they were read",
    ),
    "route-b-quick-setup": PersonTask(
        "In the platform dashboard, ask the guest agent for availability between two dates "
        "and check that it calls check-availability.",
        "the message sent and the tool call seen",
    ),
}

_DEFAULT = PersonTask(
    "Do this step in the platform dashboard: the platform offers no API for it.",
    "what was done and how it was checked",
)


def person_task(ctx: OnboardingContext, step: Step, refused: str) -> StepResult:
    """The step as a person's task: waiting with instructions, or done once confirmed."""
    from pmsgate.onboarding.steps import StepResult

    task = PERSON_TASKS.get(step.id, _DEFAULT)
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
