"""Steps 6 and 7 against the emulators: the six tools and secrets, the guest agent."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from pmsgate.catalogue import (
    ESCALATION_LANGUAGE_ID,
    MIN_GUARDRAILS,
    PAYMENT_SKILL_NAME,
    STANDARD_SKILL_NAMES,
    load_catalogue,
)
from pmsgate.errors import ConfigurationError, PmsgateError
from pmsgate.onboarding.steps_provisioning import (
    apply_custom_tools,
    apply_guest_agent,
    check_custom_tools,
    check_guest_agent,
    key_label,
)
from pmsgate.sandbox.assistant.seed import EXISTING_WORKSPACE_SLUG
from tests.customers.support import EnrolledSandbox

from . import step_support
from .step_support import (
    assistant_routes,
    assistant_writes_since,
    customer_file,
    onboarding_context,
    run_step,
    workspace_of,
)

pytestmark = pytest.mark.anyio

SEED, STUDENT_INDEX = 7, 1  # the partner customer with four apartments


def secret_values(enrolled: EnrolledSandbox, workspace_id: str) -> dict[str, str]:
    """The workspace secrets as the emulator holds them (values are write-only over the API)."""
    return {s.name: s.value for s in enrolled.sandbox.assistant.secrets(workspace_id)}


@pytest.fixture
async def enrolled(database_url: str) -> AsyncIterator[EnrolledSandbox]:
    """The partner customer with four apartments, enrolled (see ``step_sandbox``)."""
    async with step_support.step_sandbox(
        database_url, seed=SEED, student_index=STUDENT_INDEX
    ) as sandbox:
        yield sandbox


async def test_six_catalogue_tools_and_the_gateway_secrets_are_provisioned(
    enrolled: EnrolledSandbox,
):
    ctx = onboarding_context(enrolled)
    workspace_id = await workspace_of(enrolled)

    first, last = await run_step(ctx, check_custom_tools, apply_custom_tools)

    tools = enrolled.sandbox.assistant.tools(workspace_id)
    secrets = secret_values(enrolled, workspace_id)
    facility = await enrolled.services.facilities.authenticate(secrets["PMSGATE_GATEWAY_KEY"])
    keys = await enrolled.services.facilities.list_keys(enrolled.hotel_id)
    # The workspace's key answers the six tools and nothing else (docs/gateway.md, Scopes).
    with pytest.raises(PmsgateError) as payment:
        await enrolled.services.facilities.authenticate(
            secrets["PMSGATE_GATEWAY_KEY"], "operations:write:reservations/add-payment"
        )

    assert payment.value.code == "scope_missing"
    catalogue = load_catalogue()
    assert first.done is False
    assert last.done is True, last.message
    assert sorted(t.name for t in tools) == sorted(catalogue.tools)
    for tool in tools:
        body = catalogue.tools[tool.name].custom_tool_body(workspace_id)
        assert tool.enable_globally is True
        assert tool.code == body["code"]  # from the catalogue, never from another workspace
        assert "existing customer" not in tool.code
    assert secrets["PMSGATE_GATEWAY_URL"] == enrolled.settings.gateway_public_url.rstrip("/")
    assert facility.hotel_id == enrolled.hotel_id
    ours = [k for k in keys if k.label == key_label(workspace_id) and k.revoked_at is None]
    assert len(ours) == 1
    assert ours[0].scopes == ["tools:read"]
    assert last.evidence["gateway_key_prefix"] == ours[0].prefix
    assert secrets["PMSGATE_GATEWAY_KEY"].startswith(ours[0].prefix)
    evidence = json.dumps(last.evidence)
    assert secrets["PMSGATE_GATEWAY_KEY"] not in evidence  # never a secret in the evidence
    assert set(last.evidence["tools"]) == set(catalogue.tools)


async def test_a_second_check_and_apply_make_no_assistant_write(enrolled: EnrolledSandbox):
    await run_step(onboarding_context(enrolled), check_custom_tools, apply_custom_tools)
    await run_step(onboarding_context(enrolled), check_guest_agent, apply_guest_agent)
    keys_before = await enrolled.services.facilities.list_keys(enrolled.hotel_id)
    before = assistant_routes(enrolled)

    ctx = onboarding_context(enrolled)  # a new run
    tools = await check_custom_tools(ctx)
    agent = await check_guest_agent(ctx)
    await apply_custom_tools(ctx)  # even applied again, nothing differs: nothing written
    await apply_guest_agent(ctx)

    writes = assistant_writes_since(enrolled, before)
    keys_after = await enrolled.services.facilities.list_keys(enrolled.hotel_id)

    assert tools.done and agent.done
    assert writes == {}
    assert keys_after == keys_before  # no key minted or revoked


async def test_a_drifted_tool_is_restored_in_place_and_a_customer_tool_is_left_alone(
    enrolled: EnrolledSandbox,
):
    await run_step(onboarding_context(enrolled), check_custom_tools, apply_custom_tools)
    workspace_id = await workspace_of(enrolled)
    store = enrolled.sandbox.assistant
    drifted = next(t for t in store.tools(workspace_id) if t.name == "check-availability")
    store.update_tool(drifted.id, {"description": "Edited by hand.", "enable_globally": False})
    store.create_tool(
        workspace_id,
        name="customer-own-tool",
        description="The customer's own tool.",
        language="python",
        code="def main(**params):\n    return {'message': 'mine', 'rawData': None}\n",
        parameters={},
    )
    before = assistant_routes(enrolled)

    first, last = await run_step(
        onboarding_context(enrolled), check_custom_tools, apply_custom_tools
    )

    writes = assistant_writes_since(enrolled, before)
    restored = store.tool(drifted.id)
    names = sorted(t.name for t in store.tools(workspace_id))

    assert first.done is False
    assert first.evidence["drifted"] == {"check-availability": ["description", "enable_globally"]}
    assert last.done is True, last.message
    assert writes == {"PATCH /v1/custom-tools/{tool_id}": 1}
    body = load_catalogue().tools["check-availability"].custom_tool_body(workspace_id)
    assert restored.description == body["description"]
    assert restored.enable_globally is True
    assert "customer-own-tool" in names  # never deleted
    assert last.evidence["foreign_tools"] == ["customer-own-tool"]
    assert "customer-own-tool" in last.message


async def test_a_deleted_tool_is_created_again_on_the_next_run(enrolled: EnrolledSandbox):
    await run_step(onboarding_context(enrolled), check_custom_tools, apply_custom_tools)
    workspace_id = await workspace_of(enrolled)
    store = enrolled.sandbox.assistant
    gone = next(t for t in store.tools(workspace_id) if t.name == "get-in-house-guests")
    store.delete_tool(gone.id)

    first, last = await run_step(
        onboarding_context(enrolled), check_custom_tools, apply_custom_tools
    )
    names = sorted(t.name for t in store.tools(workspace_id))

    assert first.evidence["missing"] == ["get-in-house-guests"]
    assert last.done is True, last.message
    assert names == sorted(load_catalogue().tools)


async def test_a_revoked_gateway_key_is_replaced_by_a_new_one(enrolled: EnrolledSandbox):
    await run_step(onboarding_context(enrolled), check_custom_tools, apply_custom_tools)
    workspace_id = await workspace_of(enrolled)
    facilities = enrolled.services.facilities
    old = next(
        k
        for k in await facilities.list_keys(enrolled.hotel_id)
        if k.label == key_label(workspace_id)
    )
    await facilities.revoke_key(enrolled.hotel_id, old.id)

    first, last = await run_step(
        onboarding_context(enrolled), check_custom_tools, apply_custom_tools
    )
    raw = secret_values(enrolled, workspace_id)["PMSGATE_GATEWAY_KEY"]
    authenticated = await facilities.authenticate(raw)

    assert first.done is False
    assert "no active gateway key" in first.message
    assert last.done is True, last.message
    assert last.evidence["gateway_key_prefix"] != old.prefix
    assert authenticated.hotel_id == enrolled.hotel_id


async def test_without_the_gateway_url_setting_the_step_fails_with_the_fix(database_url):
    async with step_support.step_sandbox(
        database_url,
        seed=SEED,
        student_index=STUDENT_INDEX,
        settings_overrides={"gateway_public_url": None},
    ) as enrolled:
        ctx = onboarding_context(enrolled)
        first = await check_custom_tools(ctx)
        with pytest.raises(ConfigurationError) as raised:
            await apply_custom_tools(ctx)

    assert first.done is False
    assert raised.value.code == "gateway_public_url_missing"
    assert "PMSGATE_GATEWAY_PUBLIC_URL" in raised.value.hint


# --- 7 guest agent -----------------------------------------------------------------------------


async def test_guest_agent_reads_back_as_spec_step_7_wants(enrolled: EnrolledSandbox):
    ctx = onboarding_context(enrolled)
    workspace_id = await workspace_of(enrolled)

    first, last = await run_step(ctx, check_guest_agent, apply_guest_agent)

    store = enrolled.sandbox.assistant
    [agent] = store.agents(workspace_id)
    skills = {s.id: s.name for s in store.skills(workspace_id)}
    existing = next(w for w in store.workspaces() if w.slug == EXISTING_WORKSPACE_SLUG)
    other_skills = [s.id for s in store.skills(existing.id)]

    catalogue = load_catalogue()
    assert first.done is False
    assert last.done is True, last.message
    assert agent.operation_mode == "copilot"
    assert agent.enabled is True
    assert agent.response_language == "Original"
    assert len(agent.guardrails) >= MIN_GUARDRAILS
    assert catalogue.escalation_guardrail.assistant_body() in agent.guardrails
    assert [skills[i] for i in agent.skill_ids] == list(STANDARD_SKILL_NAMES)
    assert not set(agent.skill_ids) & set(other_skills)
    assert any(t["config"]["inboxTypeId"] == "guest" for t in agent.triggers)
    assert last.evidence["escalation_guardrail"] == ESCALATION_LANGUAGE_ID
    assert last.evidence["problems"] == []


async def test_payment_link_skill_is_attached_when_the_customer_handles_upsell(
    enrolled: EnrolledSandbox,
):
    file = customer_file(enrolled, autonomy={"handles_upsell": True})
    ctx = onboarding_context(enrolled, file)
    _, last = await run_step(ctx, check_guest_agent, apply_guest_agent)
    workspace_id = await workspace_of(enrolled)
    store = enrolled.sandbox.assistant
    [agent] = store.agents(workspace_id)
    skills = {s.id: s.name for s in store.skills(workspace_id)}

    assert last.done is True, last.message
    assert [skills[i] for i in agent.skill_ids] == [*STANDARD_SKILL_NAMES, PAYMENT_SKILL_NAME]


async def test_a_drifted_agent_is_repaired_keeping_the_customers_additions(
    enrolled: EnrolledSandbox,
):
    await run_step(onboarding_context(enrolled), check_guest_agent, apply_guest_agent)
    workspace_id = await workspace_of(enrolled)
    store = enrolled.sandbox.assistant
    [agent] = store.agents(workspace_id)
    own_skill = store.create_skill(
        workspace_id,
        name="customer-own-skill",
        display_name="Own skill",
        description="The customer's own skill.",
        body="Answer about the garden.",
    )
    own_guardrail = {"title": "Garden", "knowledge": "The garden closes at ten."}
    # "Fixing" the Italian escalations by switching the reply language, and trimming.
    store.update_agent(
        agent.id,
        {
            "response_language": "Italian",
            "operation_mode": "autopilot",
            "guardrails": [*agent.guardrails[:5], own_guardrail],
            "skill_ids": [*agent.skill_ids, own_skill.id],
            "triggers": [],
            "enabled": False,
        },
    )

    first, last = await run_step(onboarding_context(enrolled), check_guest_agent, apply_guest_agent)
    repaired = store.agent(agent.id)

    catalogue = load_catalogue()
    assert first.done is False
    assert "response_language is 'Italian'" in first.message
    assert last.done is True, last.message
    assert repaired.response_language == "Original"
    assert repaired.operation_mode == "copilot"
    assert repaired.guardrails[: len(catalogue.guardrails)] == [
        g.assistant_body() for g in catalogue.guardrails
    ]
    assert own_guardrail in repaired.guardrails
    assert own_skill.id in repaired.skill_ids
    assert repaired.enabled is True
    assert [t["config"]["inboxTypeId"] for t in repaired.triggers] == ["guest"]
    assert (
        catalogue.agent_problems(
            {
                "operation_mode": repaired.operation_mode,
                "enabled": repaired.enabled,
                "response_language": repaired.response_language,
                "guardrails": repaired.guardrails,
                "skill_ids": repaired.skill_ids,
                "triggers": repaired.triggers,
            }
        )
        == []
    )
