"""Step 17 (Route B quick setup) against the emulators and a gateway served on loopback."""

from __future__ import annotations

import pytest

from pmsgate.errors import InvalidInput
from pmsgate.onboarding.steps_route_b import (
    apply_route_b,
    availability_test_stay,
    check_route_b,
    provision_tools,
)
from tests.customers.support import EnrolledSandbox

from .step_support import (
    assistant_routes,
    assistant_writes,
    customer_file,
    live_gateway,
    onboarding_context,
    run_step,
    step_sandbox,
    workspace_of,
)

pytestmark = pytest.mark.anyio

SEED, OWN_TWO = 7, 0  # an own-key customer with two apartments


async def without_listings(enrolled: EnrolledSandbox) -> str:
    """Route B's workspace: no booking-system connection on the platform, so 0 listings."""
    workspace_id = await workspace_of(enrolled)
    enrolled.sandbox.assistant.clear_kross_connection(workspace_id)
    return workspace_id


async def test_route_b_provisions_from_the_row_and_the_agent_calls_check_availability(
    database_url,
):
    async with step_sandbox(database_url, seed=SEED, student_index=OWN_TWO) as enrolled:
        workspace_id = await without_listings(enrolled)
        async with live_gateway(enrolled.settings, enrolled.app, enrolled.clock):
            ctx = onboarding_context(enrolled)
            first, last = await run_step(ctx, check_route_b, apply_route_b)

            before = assistant_routes(enrolled)
            again = await check_route_b(onboarding_context(enrolled))
            writes = assistant_writes(before, assistant_routes(enrolled))

        store = enrolled.sandbox.assistant
        conversations = store.test_conversations(workspace_id)
        runs = store.tool_runs(workspace_id)
        customer = await enrolled.context()

    arrival, departure = availability_test_stay(ctx)
    assert first.done is False
    assert last.done is True, last.message
    assert customer.kross is not None
    assert last.evidence["pms_integration_id"] == customer.kross.id
    assert last.evidence["minimum_skills"] == {
        "booking-extension-assistant": True,
        "check-in-access-manager": True,
        "reservation-status-verification-procedure": True,
    }
    test = last.evidence["availability_test"]
    assert test["tool_calls"] == [
        {
            "name": "check-availability",
            "parameters": {"arrival": arrival.isoformat(), "departure": departure.isoformat()},
            "success": True,
            "answered": True,
        }
    ]
    [conversation] = conversations
    assert conversation.id == test["conversation_id"]
    # The tool really ran on the platform and answered through the live gateway.
    [run] = runs
    assert run.tool_name == "check-availability" and run.success is True, run.message
    assert len(run.raw_data["data"]["apartments"]) == len(enrolled.facility["apartments"])
    # A re-run checks only: no platform write, no second test conversation.
    assert again.done is True
    assert writes == {}


async def test_a_failing_tool_call_leaves_the_step_not_done_with_the_reason(database_url):
    # No gateway is served at the configured URL: the custom tool cannot reach it.
    async with step_sandbox(database_url, seed=SEED, student_index=OWN_TWO) as enrolled:
        await without_listings(enrolled)
        _, last = await run_step(onboarding_context(enrolled), check_route_b, apply_route_b)

    assert last.done is False
    [call] = last.evidence["availability_test"]["tool_calls"]
    # The platform ran the tool (its code reports the failure as an answer), nothing answered.
    assert call["name"] == "check-availability" and call["answered"] is False
    assert "has not called check-availability successfully" in last.message
    assert "gateway" in last.message


async def test_a_student_id_where_the_integration_row_id_belongs_is_a_clear_error(database_url):
    async with step_sandbox(database_url, seed=SEED, student_index=OWN_TWO) as enrolled:
        await without_listings(enrolled)
        ctx = onboarding_context(enrolled)
        customer = await enrolled.context()
        assert customer.kross is not None and customer.notes is not None

        with pytest.raises(InvalidInput) as raised:
            await provision_tools(ctx, enrolled.student_id)
        with pytest.raises(InvalidInput) as notion_row:
            await provision_tools(ctx, customer.notes.id)
        # The same mistake written in the customer file stops the step with the fix.
        in_file = customer_file(
            enrolled,
            booking_system={
                "hotel_id": enrolled.hotel_id,
                "username": enrolled.facility["username"],
                "password": enrolled.facility["password"],
                "api_key": enrolled.facility["api_key"],
                "integration_id": enrolled.student_id,
            },
        )
        stopped = await check_route_b(onboarding_context(enrolled, in_file))
        tools = enrolled.sandbox.assistant.tools(await workspace_of(enrolled))

    assert raised.value.code == "student_id_given_for_integration_id"
    assert customer.kross.id in raised.value.message  # names the row id to use instead
    assert "never the student_id" in raised.value.hint
    assert notion_row.value.code == "not_a_booking_system_integration"
    assert stopped.stop is True
    assert stopped.evidence["error"] == "student_id_given_for_integration_id"
    assert tools == []  # nothing was provisioned from a wrong id
