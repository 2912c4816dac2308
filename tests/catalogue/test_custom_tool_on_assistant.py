"""The catalogue provisioned on the platform emulator: six tools run there, skills, the agent.

The whole path is real: our platform client creates each tool from
``custom_tool_body`` and stores the gateway's address and key as workspace
secrets; the emulator runs the tool's code in a child interpreter with those
secrets as its environment; the code calls a gateway served by uvicorn on
loopback, which reads the booking-system emulator.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator

import httpx
import pytest
from pydantic import SecretStr

from pmsgate.catalogue import (
    PAYMENT_SKILL_NAME,
    STANDARD_SKILL_NAMES,
    CustomerProfile,
    load_catalogue,
)
from pmsgate.clock import ManualClock
from pmsgate.integrations.assistant.client import AssistantClient, NewAgent, NewCustomTool, NewSkill
from pmsgate.sandbox.assistant.app import create_assistant_app
from pmsgate.sandbox.assistant.seed import SANDBOX_ASSISTANT_TOKEN
from pmsgate.sandbox.assistant.store import AssistantStore
from pmsgate.sandbox.kross.store import KrossStore

from .support import KEY_SECRET, URL_SECRET, live_gateway

pytestmark = pytest.mark.anyio

ASSISTANT_URL = "http://platform.test"


@pytest.fixture
async def assistant(clock: ManualClock, kross_store: KrossStore) -> AsyncIterator[AssistantClient]:
    store = AssistantStore(seed=3, clock=clock, kross=kross_store)
    transport = httpx.ASGITransport(app=create_assistant_app(store))
    async with httpx.AsyncClient(transport=transport, base_url=ASSISTANT_URL) as http:
        yield AssistantClient(
            http, base_url=ASSISTANT_URL, token=SecretStr(SANDBOX_ASSISTANT_TOKEN), clock=clock
        )


async def test_the_six_catalogue_tools_run_on_the_assistant_and_answer_through_the_gateway(
    assistant, database_url, kross_http, kross_store, clock
):
    catalogue = load_catalogue()
    workspace = await assistant.ensure_workspace("Catalogue Test Homes", "catalogue-test-homes")
    today = clock.now().date()

    async with live_gateway(database_url, kross_http, kross_store, clock) as (url, key, record):
        await assistant.set_secret(workspace.id, URL_SECRET, SecretStr(url))
        await assistant.set_secret(workspace.id, KEY_SECRET, SecretStr(key))
        created = {
            name: await assistant.create_custom_tool(
                NewCustomTool.model_validate(tool.custom_tool_body(workspace.id))
            )
            for name, tool in catalogue.tools.items()
        }
        listed = await assistant.list_custom_tools(workspace.id)

        availability = await assistant.run_custom_tool(
            created["check-availability"].id,
            {
                "arrival": (today + dt.timedelta(days=10)).isoformat(),
                "departure": (today + dt.timedelta(days=12)).isoformat(),
            },
        )
        in_house = await assistant.run_custom_tool(created["get-in-house-guests"].id)
        reservation_id = in_house.raw_data["data"]["reservations"][0]["reservation_id"]
        runs = {
            "get-reservation-status": {"reservation_id": reservation_id},
            "check-portal-status": {"reservation_id": reservation_id},
            "get-incomplete-portals": {},
            "get-checkin-instructions": {"reservation_id": reservation_id},
        }
        results = {
            name: await assistant.run_custom_tool(created[name].id, params)
            for name, params in runs.items()
        }

    assert sorted(t.name for t in listed) == sorted(catalogue.tools)
    assert all(t.enable_globally for t in listed)
    assert all(key not in t.code for t in listed)  # the key lives in the secrets only
    assert availability.success is True, availability.message
    apartments = kross_store.facility(record["hotel_id"]).apartments
    data = availability.raw_data["data"]
    assert {a["apartment_id"] for a in data["apartments"]} == set(apartments)
    assert availability.message.startswith(
        f"{data['available_count']} of {len(apartments)} apartments free"
    )
    assert in_house.success is True, in_house.message
    for name, result in results.items():
        assert result.success is True, (name, result.message)
        assert "data" in result.raw_data, name
        assert "failed" not in result.message, (name, result.message)


async def test_skills_and_guest_agent_bodies_are_accepted_and_read_back_as_the_spec_wants(
    assistant,
):
    catalogue = load_catalogue()
    workspace = await assistant.ensure_workspace("Catalogue Agent Homes", "catalogue-agent-homes")
    skills = [
        await assistant.create_skill(NewSkill.model_validate(skill.assistant_body(workspace.id)))
        for skill in catalogue.skills_for(CustomerProfile(upsell_autonomous=True))
    ]
    skill_ids = [s.id for s in skills]

    agent = await assistant.create_agent(
        NewAgent.model_validate(catalogue.agent_body(workspace.id, skill_ids))
    )
    read_back = await assistant.get_agent(agent.id)

    assert [s.name for s in skills] == [*STANDARD_SKILL_NAMES, PAYMENT_SKILL_NAME]
    record = read_back.model_dump(by_alias=True, mode="json")
    assert catalogue.agent_problems(record, skill_ids) == []
    assert len(record["guardrails"]) == len(catalogue.guardrails)
