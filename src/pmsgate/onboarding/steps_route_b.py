"""Step 17 (docs/requirements.md R21.17): Route B quick setup (no listings, custom tools only).

What the step verifies, and does when missing:

1. the workspace configuration row (step 3 wrote it; ``billing_mode`` ``partner_markup``);
2. the allowlist entry — optional on Route B, reported only;
3. the six tools provisioned by :func:`provision_tools`, which takes the id of the
   customer's **booking-system PMS integration row** (spec: "the STUDENT parameter of
   the script is the id of the customer's booking-system PMS integration row, not the
   student_id"). A student_id given in its place is refused with
   ``student_id_given_for_integration_id`` (the integration repository's own error,
   naming the right row id when it knows it);
4. the three minimum skills, present, enabled and attached to the guest agent;
5. the final test: a **test conversation** asks the guest agent for availability over a
   date range, and ``check-availability`` must have been called and have answered (the
   catalogue's tool code reports a gateway failure as an answer ``check-availability
   failed: …``, a successful run for the platform, so the message is looked at too). The
   test-conversation API is an **emulator-only assumption** (docs/assistant-api.md):
   against a platform without it the test becomes a manual item, confirmed with
   ``pmsgate onboard confirm STUDENT route-b-quick-setup --evidence …``.

The check reads the recorded test conversations back, so a re-run of a finished
Route B asks the agent nothing again.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import structlog

from pmsgate.catalogue import STANDARD_SKILL_NAMES
from pmsgate.customers.context import KROSS_PROVIDER
from pmsgate.customers.service import upstream_error
from pmsgate.errors import InvalidInput, PmsgateError
from pmsgate.integrations.assistant.client import Agent, AgentConversation, AgentToolCall
from pmsgate.integrations.assistant.errors import AssistantError, AssistantNotFound
from pmsgate.onboarding.steps import (
    ONLY_B,
    OnboardingContext,
    PersonTask,
    Step,
    StepKind,
    StepResult,
)
from pmsgate.onboarding.steps_provisioning import (
    ToolsState,
    apply_guest_agent,
    assistant_errors,
    catalogue,
    idempotency_key,
    inspect_agent,
    inspect_tools,
    provision_workspace_tools,
    require_workspace,
    workspace_id_of,
)
from pmsgate.storage.integrations import IntegrationView

log = structlog.get_logger(__name__)

AVAILABILITY_TOOL = "check-availability"
# The test stay: a short range a few weeks ahead (inside the gateway's 60-day window).
TEST_ARRIVAL_IN_DAYS = 21
TEST_NIGHTS = 3


# --- the integration row id, never the student_id ----------------------------------------------


async def booking_system_row(ctx: OnboardingContext, integration_id: str) -> IntegrationView:
    """The customer's booking-system PMS integration row with this id; a clear error otherwise."""
    row = await ctx.customers.integrations.get(integration_id)  # names a student_id as such
    if row.provider != KROSS_PROVIDER:
        raise InvalidInput(
            f"{integration_id} is the customer's {row.provider} integration row, not the "
            "booking-system one.",
            code="not_a_booking_system_integration",
            hint="Pass the id of the customer's booking-system (kross) PMS integration row.",
        )
    if row.student_id != ctx.student_id:
        raise InvalidInput(
            f"Integration row {integration_id} belongs to another customer.",
            code="integration_of_another_customer",
            hint="Pass the id of this customer's booking-system PMS integration row.",
        )
    return row


async def provision_tools(ctx: OnboardingContext, integration_id: str) -> ToolsState:
    """The six catalogue tools and the gateway secrets for the facility of a PMS integration row.

    ``integration_id`` is the id of the customer's booking-system PMS integration row
    (``int-…``), never the student_id: a student_id is refused with
    ``student_id_given_for_integration_id``. Only what differs is written.
    """
    row = await booking_system_row(ctx, integration_id)
    hotel_id = row.facility_hotel_id
    if hotel_id is None:
        from pmsgate.onboarding.steps_setup import ensure_facility  # a sibling step module

        hotel_id = (await ensure_facility(ctx)).hotel_id
    workspace_id = await require_workspace(ctx)
    return await provision_workspace_tools(ctx, workspace_id, hotel_id)


async def integration_id_of(ctx: OnboardingContext) -> str | None:
    """The row id step 17 provisions with: the customer file's, else the stored kross row's."""
    given = ctx.file.booking_system.integration_id
    if given and given.strip():
        return given.strip()
    customer = await ctx.customer_context()
    return customer.kross.id if customer.kross is not None else None


# --- the test conversation ---------------------------------------------------------------------


def availability_test_stay(ctx: OnboardingContext) -> tuple[dt.date, dt.date]:
    """The arrival and departure the test conversation asks about."""
    arrival = ctx.clock.now().date() + dt.timedelta(days=TEST_ARRIVAL_IN_DAYS)
    return arrival, arrival + dt.timedelta(days=TEST_NIGHTS)


def availability_test_message(ctx: OnboardingContext) -> str:
    """A guest's availability question over a date range (English and Italian)."""
    arrival, departure = availability_test_stay(ctx)
    return (
        f"Hello! Is there availability from {arrival.isoformat()} to {departure.isoformat()}? "
        f"/ Buongiorno, c'è disponibilità dal {arrival.isoformat()} al {departure.isoformat()}?"
    )


def tool_answered(call: AgentToolCall) -> bool:
    """The tool ran and the gateway answered (not the catalogue code's ``<tool> failed: …``)."""
    # The catalogue's tool code never raises: a failure is an answer, a successful run.
    return call.success and not call.message.startswith(f"{call.name} failed:")


def availability_called(conversation: AgentConversation) -> bool:
    """Whether the agent called check-availability, and it answered, in this conversation."""
    return any(c.name == AVAILABILITY_TOOL and tool_answered(c) for c in conversation.tool_calls)


def _conversation_evidence(conversation: AgentConversation) -> dict[str, Any]:
    return {
        "conversation_id": conversation.id,
        "message": conversation.message,
        "tool_calls": [
            {
                "name": c.name,
                "parameters": c.parameters,
                "success": c.success,
                "answered": tool_answered(c),
            }
            for c in conversation.tool_calls
        ],
        "reply": conversation.reply[:300],
    }


async def _conversations(ctx: OnboardingContext, agent: Agent) -> list[AgentConversation] | None:
    """The agent's recorded test conversations; None when the platform has no such API."""
    try:
        return await ctx.customers.assistant.list_test_conversations(
            agent.id, workspace_id=agent.workspace_id
        )
    except AssistantNotFound:
        return None
    except AssistantError as error:
        raise upstream_error(error, "reading the test conversations") from None


# --- the step ----------------------------------------------------------------------------------


def _stop(evidence: dict[str, Any], error: PmsgateError) -> StepResult:
    evidence["error"] = error.code
    return StepResult(
        done=False, evidence=evidence, message=error.message, stop=True, fix=error.hint
    )


async def check_route_b(ctx: OnboardingContext) -> StepResult:
    """Configuration row, tools from the integration row, three skills, the availability test."""
    evidence: dict[str, Any] = {}
    workspace_id = await workspace_id_of(ctx)
    customer = await ctx.customer_context()
    config = customer.workspace
    evidence["workspace_configuration"] = (
        {"workspace_id": config.workspace_id, "billing_mode": config.billing_mode}
        if config is not None
        else None
    )
    entry = await ctx.customers.allowlist.find(ctx.file.email)
    evidence["allowlist"] = "present" if entry is not None else "absent (optional on Route B)"
    if config is None or workspace_id is None or config.billing_mode != "partner_markup":
        return StepResult(
            done=False,
            evidence=evidence,
            message="no workspace configuration with billing_mode partner_markup (steps 3, 5)",
        )
    integration_id = await integration_id_of(ctx)
    if integration_id is None:
        return StepResult(
            done=False, evidence=evidence, message="no booking-system PMS integration row"
        )
    try:
        row = await booking_system_row(ctx, integration_id)
    except PmsgateError as error:
        return _stop(evidence, error)
    evidence["pms_integration_id"] = row.id
    tools = await inspect_tools(ctx, workspace_id, row.facility_hotel_id)
    evidence["tools"] = tools.evidence(ctx)
    agent_state = await inspect_agent(ctx, workspace_id)
    agent = agent_state.agent
    attached = set(agent.skill_ids) if agent is not None else set()
    minimum = {
        name: (skill := agent_state.skills.get(name)) is not None
        and skill.enabled
        and skill.id in attached
        for name in STANDARD_SKILL_NAMES
    }
    evidence["minimum_skills"] = minimum
    problems = []
    if not tools.done:
        problems += tools.problems()
    if not all(minimum.values()):
        problems.append(
            "minimum skills not attached: " + ", ".join(n for n, ok in minimum.items() if not ok)
        )
    if agent is None:
        problems.append("no guest agent (step 7)")
    if problems:
        return StepResult(done=False, evidence=evidence, message="; ".join(problems))
    assert agent is not None
    conversations = await _conversations(ctx, agent)
    if conversations is None:
        confirmed = ctx.manual_evidence.get(ROUTE_B_QUICK_SETUP.id)
        if confirmed:
            evidence["availability_test"] = {"confirmed_by_person": confirmed}
            return StepResult(
                done=True,
                evidence=evidence,
                message="tools and skills in place; availability test confirmed by a person",
            )
        arrival, departure = availability_test_stay(ctx)
        return StepResult(
            done=False,
            evidence=evidence,
            message="the platform has no test-conversation API: the availability test is manual",
            waiting_for=(
                f"ask the guest agent in the platform's test chat for availability from "
                f"{arrival} to {departure}, check that it called check-availability, then "
                f"`pmsgate onboard confirm {ctx.student_id} {ROUTE_B_QUICK_SETUP.id} --evidence …`"
            ),
        )
    passed = next((c for c in reversed(conversations) if availability_called(c)), None)
    if passed is None:
        last = conversations[-1] if conversations else None
        if last is not None:
            evidence["availability_test"] = _conversation_evidence(last)
        why = (
            f"; last test: {last.reply[:200]}" if last is not None else ": no test conversation yet"
        )
        return StepResult(
            done=False,
            evidence=evidence,
            message="the agent has not called check-availability successfully" + why,
        )
    evidence["availability_test"] = _conversation_evidence(passed)
    return StepResult(
        done=True,
        evidence=evidence,
        message=(
            f"Route B ready: six tools on row {row.id}, the three minimum skills, and the agent "
            f"called check-availability in a test conversation ({passed.id})"
        ),
    )


async def apply_route_b(ctx: OnboardingContext) -> None:
    """Provision the tools from the integration row, attach the skills, run the test."""
    integration_id = await integration_id_of(ctx)
    if integration_id is None:
        raise InvalidInput(
            f"Customer {ctx.student_id} has no booking-system PMS integration row.",
            code="pms_not_linked",
            hint="Run step 3 (workspace configuration), which creates and links it.",
        )
    workspace_id = await require_workspace(ctx)
    await provision_tools(ctx, integration_id)
    state = await inspect_agent(ctx, workspace_id)
    if not state.done:
        await apply_guest_agent(ctx)
        state = await inspect_agent(ctx, workspace_id)
    agent = state.agent
    if agent is None:
        raise PmsgateError(
            "The guest agent is missing after provisioning it.",
            code="guest_agent_missing",
            status=502,
            hint="Check the workspace on the platform and run onboarding again.",
        )
    conversations = await _conversations(ctx, agent)
    if conversations is None or any(availability_called(c) for c in conversations):
        return  # no API (manual test) or already passed
    message = availability_test_message(ctx)
    async with assistant_errors("running the test conversation"):
        conversation = await ctx.customers.assistant.run_test_conversation(
            agent.id,
            message,
            workspace_id=workspace_id,
            idempotency_key=idempotency_key(
                ctx, "test-conversation", workspace_id, catalogue().agent.name, message
            ),
        )
    log.info(
        "onboarding_test_conversation",
        student_id=ctx.student_id,
        agent_id=agent.id,
        tools=[c.name for c in conversation.tool_calls],
        availability_called=availability_called(conversation),
    )


async def describe_route_b(ctx: OnboardingContext) -> str:
    """What apply_route_b would do."""
    integration_id = await integration_id_of(ctx) or "(the kross row step 3 creates)"
    arrival, departure = availability_test_stay(ctx)
    return (
        f"provision the six tools for PMS integration row {integration_id}, attach the three "
        f"minimum skills, and ask the guest agent for availability from {arrival} to "
        f"{departure} in a test conversation (check-availability must be called)"
    )


ROUTE_B_QUICK_SETUP = Step(
    number=17,
    id="route-b-quick-setup",
    title="Route B quick setup",
    kind=StepKind.AUTO,
    routes=ONLY_B,
    check=check_route_b,
    apply=apply_route_b,
    describe=describe_route_b,
    by_hand=PersonTask(
        "In the platform dashboard, ask the guest agent for availability between two dates "
        "and check that it calls check-availability.",
        "the message sent and the tool call seen",
    ),
)
