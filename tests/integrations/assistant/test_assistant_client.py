"""The assistant-platform client against the platform emulator, through real HTTP shapes.

The emulator and the client share one ManualClock; the client's sleep advances it,
so throttling and Retry-After waits cost no real time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from structlog.testing import capture_logs

from pmsgate.clock import ManualClock
from pmsgate.config import Settings
from pmsgate.integrations.assistant.client import (
    AgentUpdate,
    AssistantClient,
    CustomToolUpdate,
    Guardrail,
    KbNodeUpdate,
    NewAgent,
    NewCustomTool,
    NewKbNode,
    NewSkill,
    ToolParameter,
    Trigger,
    TriggerConfig,
)
from pmsgate.integrations.assistant.errors import (
    AssistantConflict,
    AssistantForbidden,
    AssistantNotFound,
    AssistantRateLimited,
    AssistantUnauthorized,
    AssistantUnavailable,
    AssistantValidationError,
    AssistantWriteOutcomeUnknown,
)
from pmsgate.sandbox.assistant.app import create_assistant_app
from pmsgate.sandbox.assistant.seed import EXISTING_WORKSPACE_SLUG, SANDBOX_ASSISTANT_TOKEN
from pmsgate.sandbox.assistant.store import AssistantStore
from pmsgate.sandbox.kross.store import KrossStore
from tests.support.asgi import asgi_client
from tests.support.clocks import RecordingSleep

pytestmark = pytest.mark.anyio

BASE_URL = "http://platform.test"

ECHO_CODE = """
def main(**params):
    return {"message": "echo " + params["word"], "rawData": {"params": params}}
"""

SECRET_CODE = """
import os

def main(**params):
    return {"message": "checked", "rawData": {"key": os.environ.get("PMSGATE_GATEWAY_KEY")}}
"""

FAILING_CODE = """
def main(**params):
    return {"message": str(1 / 0), "rawData": None}
"""

ENDLESS_CODE = """
def main(**params):
    while True:
        pass
"""


@pytest.fixture
def assistant_store(clock: ManualClock, kross_store: KrossStore) -> AssistantStore:
    return AssistantStore(seed=3, clock=clock, kross=kross_store)


@pytest.fixture
async def assistant_http(assistant_store: AssistantStore) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_assistant_app(assistant_store), BASE_URL) as http:
        yield http


@pytest.fixture
def sleep(clock: ManualClock) -> RecordingSleep:
    return RecordingSleep(clock)


def make_client(
    http: httpx.AsyncClient, clock: ManualClock, sleep: RecordingSleep, **options: Any
) -> AssistantClient:
    token = options.pop("token", SANDBOX_ASSISTANT_TOKEN)
    return AssistantClient(
        http, base_url=BASE_URL, token=SecretStr(token), clock=clock, sleep=sleep, **options
    )


@pytest.fixture
def client(
    assistant_http: httpx.AsyncClient, clock: ManualClock, sleep: RecordingSleep
) -> AssistantClient:
    return make_client(assistant_http, clock, sleep)


@pytest.fixture
async def workspace_id(client: AssistantClient) -> str:
    return (await client.ensure_workspace("Rossi Apartments", "rossi-apartments")).id


def echo_tool(workspace_id: str, name: str = "echo-word", **overrides: Any) -> NewCustomTool:
    fields: dict[str, Any] = {
        "workspace_id": workspace_id,
        "name": name,
        "description": "Repeats the word it is given.",
        "code": ECHO_CODE,
        "parameters": {
            "word": ToolParameter(
                type="string", required=True, description="Any single word, in lowercase letters."
            )
        },
        "enable_globally": True,
    }
    return NewCustomTool(**{**fields, **overrides})


async def stats(http: httpx.AsyncClient) -> dict[str, Any]:
    answer = await http.get("/_sandbox/stats")
    result: dict[str, Any] = answer.json()
    return result


async def set_emulator_limit(http: httpx.AsyncClient, per_minute: int) -> None:
    answer = await http.put("/_sandbox/config", json={"requests_per_minute": per_minute})
    assert answer.status_code == 200


async def eager_client(
    http: httpx.AsyncClient, clock: ManualClock, sleep: RecordingSleep, emulator_limit: int
) -> AssistantClient:
    """A client that does not throttle itself, against an emulator allowing so many a minute."""
    await set_emulator_limit(http, emulator_limit)
    return make_client(http, clock, sleep, requests_per_minute=10_000)


# --- workspaces -----------------------------------------------------------------------------


async def test_ensure_workspace_creates_it_once_and_finds_it_afterwards(
    client: AssistantClient, assistant_store: AssistantStore
) -> None:
    first = await client.ensure_workspace("Rossi Apartments", "rossi-apartments")
    second = await client.ensure_workspace("Rossi Apartments", "rossi-apartments")

    assert first.id == second.id
    assert len(first.id) == 32  # the reference's id format
    assert [w.slug for w in await client.list_workspaces()].count("rossi-apartments") == 1
    assert EXISTING_WORKSPACE_SLUG in {w.slug for w in assistant_store.workspaces()}


async def test_listing_workspaces_reads_every_page(
    assistant_http: httpx.AsyncClient, clock: ManualClock, sleep: RecordingSleep
) -> None:
    client = make_client(assistant_http, clock, sleep, page_size=4)
    for n in range(10):
        await client.create_workspace(f"Customer {n}", f"customer-{n}")

    workspaces = await client.list_workspaces()

    assert len(workspaces) == 11  # ten new ones and the seeded one
    assert len({w.id for w in workspaces}) == 11
    assert (await stats(assistant_http))["requests"]["by_route"]["GET /v1/workspaces"] == 3


# --- custom tools ---------------------------------------------------------------------------


async def test_custom_tool_is_created_listed_updated_and_deleted(
    client: AssistantClient, workspace_id: str
) -> None:
    created = await client.create_custom_tool(echo_tool(workspace_id))
    assert created.enable_globally is True
    assert created.parameters["word"].description == "Any single word, in lowercase letters."

    updated = await client.update_custom_tool(
        created.id, CustomToolUpdate(description="Says the word back.")
    )
    assert updated.description == "Says the word back."
    assert updated.code == ECHO_CODE
    assert [t.name for t in await client.list_custom_tools(workspace_id)] == ["echo-word"]

    await client.delete_custom_tool(created.id)
    assert await client.list_custom_tools(workspace_id) == []
    with pytest.raises(AssistantNotFound):
        await client.get_custom_tool(created.id)


async def test_listing_custom_tools_follows_the_cursor_across_pages(
    assistant_http: httpx.AsyncClient, clock: ManualClock, sleep: RecordingSleep, workspace_id: str
) -> None:
    client = make_client(assistant_http, clock, sleep, page_size=2)
    names = [f"tool-{n}" for n in range(5)]
    for name in names:
        await client.create_custom_tool(echo_tool(workspace_id, name))

    assert [t.name for t in await client.list_custom_tools(workspace_id)] == names
    assert (await stats(assistant_http))["requests"]["by_route"]["GET /v1/custom-tools"] == 3


async def test_parameter_without_description_is_refused_with_the_specification_message(
    client: AssistantClient, workspace_id: str
) -> None:
    tool = echo_tool(workspace_id, parameters={"word": ToolParameter(type="string", required=True)})

    with pytest.raises(AssistantValidationError) as caught:
        await client.create_custom_tool(tool)

    assert caught.value.code == "platform_validation_failed"
    assert caught.value.status == 422
    assert caught.value.upstream_message == "parameters[].description required"
    assert "parameters[].description required" in str(caught.value)


@pytest.mark.parametrize(
    "name", ["Check_Availability", "check availability", "double--hyphen", "-leading", "a" * 65]
)
async def test_tool_name_that_is_not_short_kebab_case_is_refused(
    client: AssistantClient, workspace_id: str, name: str
) -> None:
    with pytest.raises(AssistantValidationError) as caught:
        await client.create_custom_tool(echo_tool(workspace_id, name))
    assert caught.value.status == 422


async def test_tool_name_of_exactly_64_characters_is_accepted(
    client: AssistantClient, workspace_id: str
) -> None:
    created = await client.create_custom_tool(echo_tool(workspace_id, "a" * 64))
    assert created.name == "a" * 64


async def test_duplicate_tool_name_in_a_workspace_is_a_conflict(
    client: AssistantClient, workspace_id: str
) -> None:
    await client.create_custom_tool(echo_tool(workspace_id))

    with pytest.raises(AssistantConflict) as caught:
        await client.create_custom_tool(echo_tool(workspace_id))

    assert caught.value.code == "platform_conflict"
    assert caught.value.status == 409


async def test_same_tool_name_in_another_workspace_is_allowed(
    client: AssistantClient, workspace_id: str
) -> None:
    other = await client.ensure_workspace("Bianchi Homes", "bianchi-homes")
    await client.create_custom_tool(echo_tool(workspace_id))
    created = await client.create_custom_tool(echo_tool(other.id))
    assert created.workspace_id == other.id


async def test_custom_tool_run_returns_success_message_and_raw_data(
    client: AssistantClient, workspace_id: str
) -> None:
    tool = await client.create_custom_tool(echo_tool(workspace_id))

    result = await client.run_custom_tool(tool.id, {"word": "ciao"})

    assert result.success is True
    assert result.message == "echo ciao"
    assert result.raw_data == {"params": {"word": "ciao"}}


async def test_tool_code_reads_the_workspace_secret_as_an_environment_variable(
    client: AssistantClient, workspace_id: str
) -> None:
    await client.set_secret(workspace_id, "PMSGATE_GATEWAY_KEY", SecretStr("gk-test-value-42"))
    tool = await client.create_custom_tool(
        echo_tool(workspace_id, "read-secret", code=SECRET_CODE, parameters={})
    )

    result = await client.run_custom_tool(tool.id)

    assert result.success is True
    assert result.raw_data == {"key": "gk-test-value-42"}


async def test_failing_tool_answers_success_false_with_the_error(
    client: AssistantClient, workspace_id: str
) -> None:
    tool = await client.create_custom_tool(
        echo_tool(workspace_id, "divide", code=FAILING_CODE, parameters={})
    )

    result = await client.run_custom_tool(tool.id)

    assert result.success is False
    assert "ZeroDivisionError" in result.message
    assert result.raw_data is None


async def test_tool_that_runs_past_the_timeout_answers_success_false(
    client: AssistantClient, workspace_id: str, assistant_http: httpx.AsyncClient
) -> None:
    await assistant_http.put("/_sandbox/config", json={"tool_timeout_s": 0.5})
    tool = await client.create_custom_tool(
        echo_tool(workspace_id, "endless", code=ENDLESS_CODE, parameters={})
    )

    result = await client.run_custom_tool(tool.id)

    assert result.success is False
    assert "did not finish" in result.message


async def test_every_tool_run_is_recorded_for_the_workspace(
    client: AssistantClient, workspace_id: str, assistant_http: httpx.AsyncClient
) -> None:
    tool = await client.create_custom_tool(echo_tool(workspace_id))
    await client.run_custom_tool(tool.id, {"word": "uno"})
    await client.run_custom_tool(tool.id, {"word": "due"})

    runs = (await assistant_http.get(f"/_sandbox/workspaces/{workspace_id}/tool-runs")).json()

    assert [(r["tool_name"], r["parameters"], r["success"]) for r in runs] == [
        ("echo-word", {"word": "uno"}, True),
        ("echo-word", {"word": "due"}, True),
    ]


# --- skills and agents ----------------------------------------------------------------------


async def test_skills_and_the_guest_agent_are_created_read_and_updated(
    client: AssistantClient, workspace_id: str
) -> None:
    skill = await client.create_skill(
        NewSkill(
            workspace_id=workspace_id,
            name="booking-extension-assistant",
            display_name="Booking extension assistant",
            description="Helps a guest extend a stay.",
            body="Check availability before offering new dates.",
            allowed_tools=["check-availability"],
        )
    )
    assert [s.id for s in await client.list_skills(workspace_id)] == [skill.id]

    agent = await client.create_agent(
        NewAgent(
            workspace_id=workspace_id,
            name="Guest agent",
            guardrails=[
                Guardrail(title="Escalations in Italian", knowledge="Write them in Italian.")
            ],
            skill_ids=[skill.id],
            operation_mode="copilot",
            response_language="Original",
            triggers=[
                Trigger(name="Guest inbox messages", config=TriggerConfig(channels=["whatsapp"]))
            ],
        )
    )
    read = await client.get_agent(agent.id)
    assert read.operation_mode == "copilot"
    assert read.response_language == "Original"
    assert read.skill_ids == [skill.id]
    assert read.guardrails[0].title == "Escalations in Italian"
    assert read.triggers[0].config.inbox_type_id == "guest"

    updated = await client.update_agent(agent.id, AgentUpdate(enabled=False))
    assert updated.enabled is False
    assert updated.skill_ids == [skill.id]


async def test_agent_with_a_skill_of_another_workspace_is_refused(
    client: AssistantClient, workspace_id: str
) -> None:
    other = await client.ensure_workspace("Bianchi Homes", "bianchi-homes")
    foreign = await client.create_skill(
        NewSkill(
            workspace_id=other.id,
            name="foreign-skill",
            display_name="Foreign",
            description="Another customer's.",
            body="Nothing.",
        )
    )

    with pytest.raises(AssistantValidationError):
        await client.create_agent(
            NewAgent(workspace_id=workspace_id, name="Guest agent", skill_ids=[foreign.id])
        )


# --- listings -------------------------------------------------------------------------------


async def test_listings_mirror_the_booking_system_and_drop_to_none_after_a_password_change(
    client: AssistantClient,
    workspace_id: str,
    assistant_http: httpx.AsyncClient,
    kross_store: KrossStore,
) -> None:
    facility = kross_store.facilities()[0]
    connection = {
        "hotel_id": facility.hotel_id,
        "username": facility.username,
        "password": facility.password,
    }
    await assistant_http.put(f"/_sandbox/workspaces/{workspace_id}/pms-connection", json=connection)

    listings = await client.list_listings(workspace_id)
    assert sorted(li.name for li in listings) == sorted(
        a.name for a in facility.apartments.values()
    )
    assert {li.external_id for li in listings} == {str(i) for i in facility.apartments}

    kross_store.change_password(facility.hotel_id, "changed-by-the-customer")
    assert await client.list_listings(workspace_id) == []

    reconnected = {**connection, "password": "changed-by-the-customer"}
    await assistant_http.put(
        f"/_sandbox/workspaces/{workspace_id}/pms-connection", json=reconnected
    )
    again = await client.list_listings(workspace_id)
    # The same listing ids come back, so rows that point at them stay valid.
    assert [li.id for li in again] == [li.id for li in listings]


async def test_workspace_without_a_booking_system_connection_has_no_listings(
    client: AssistantClient, workspace_id: str
) -> None:
    assert await client.list_listings(workspace_id) == []


async def test_kross_connection_is_none_until_set_then_read_back_without_the_password(
    client: AssistantClient, workspace_id: str, kross_store: KrossStore
) -> None:
    facility = kross_store.facilities()[0]
    assert await client.get_kross_connection(workspace_id) is None

    stored = await client.set_kross_connection(
        workspace_id,
        hotel_id=facility.hotel_id,
        username=facility.username,
        password=SecretStr(facility.password),
    )
    read = await client.get_kross_connection(workspace_id)

    assert read is not None
    assert (read.hotel_id, read.username, read.healthy) == (
        facility.hotel_id,
        facility.username,
        True,
    )
    assert stored.model_dump() == read.model_dump()
    assert facility.password not in repr(read.model_dump())


# --- knowledge nodes ------------------------------------------------------------------------


async def test_knowledge_nodes_are_listed_by_listing_and_parent_across_pages(
    client: AssistantClient, workspace_id: str
) -> None:
    folder = await client.create_directory(workspace_id, "Knowledge sync", entity_ids=["listing-a"])
    assert folder.is_directory is True
    for n in range(25):
        await client.create_node(
            workspace_id,
            NewKbNode(
                title=f"Section {n}",
                body=f"Body {n}",
                parent_id=folder.id,
                entity_ids=["listing-a" if n % 2 == 0 else "listing-b"],
            ),
        )
    await client.create_node(workspace_id, NewKbNode(title="Workspace-wide", body="For all."))

    first = await client.nodes_page(workspace_id, parent_id=folder.id, limit=10)
    assert len(first.data) == 10
    assert first.has_more is True
    assert first.next_cursor
    second = await client.nodes_page(
        workspace_id, parent_id=folder.id, limit=10, cursor=first.next_cursor
    )
    assert {n.id for n in first.data}.isdisjoint({n.id for n in second.data})

    under_folder = [n async for n in client.iter_nodes(workspace_id, parent_id=folder.id)]
    assert len(under_folder) == 25
    of_listing_a = await client.list_nodes(
        workspace_id, listing_id="listing-a", parent_id=folder.id
    )
    assert len(of_listing_a) == 13
    assert all("listing-a" in n.entity_ids for n in of_listing_a)
    directories = await client.list_nodes(workspace_id, is_directory=True)
    assert [d.id for d in directories] == [folder.id]
    assert len(await client.list_nodes(workspace_id)) == 27


async def test_node_is_updated_in_place_and_a_non_empty_directory_cannot_be_deleted(
    client: AssistantClient, workspace_id: str
) -> None:
    folder = await client.create_directory(workspace_id, "Apartment Rosa")
    node = await client.create_node(
        workspace_id, NewKbNode(title="WiFi", body="Network A", parent_id=folder.id)
    )

    updated = await client.update_node(node.id, KbNodeUpdate(body="Network B, password b"))
    assert updated.id == node.id
    assert updated.body == "Network B, password b"
    assert updated.title == "WiFi"

    with pytest.raises(AssistantConflict):
        await client.delete_node(folder.id)
    await client.delete_node(node.id)
    await client.delete_node(folder.id)
    assert await client.list_nodes(workspace_id) == []


async def test_node_under_a_document_is_refused(client: AssistantClient, workspace_id: str) -> None:
    document = await client.create_node(workspace_id, NewKbNode(title="A document", body="text"))
    with pytest.raises(AssistantValidationError):
        await client.create_node(workspace_id, NewKbNode(title="Child", parent_id=document.id))


# --- secrets, members, roles ----------------------------------------------------------------


async def test_secrets_list_names_and_never_values(
    client: AssistantClient, workspace_id: str, assistant_http: httpx.AsyncClient
) -> None:
    await client.set_secret(workspace_id, "PMSGATE_GATEWAY_KEY", SecretStr("first-value"))
    await client.set_secret(workspace_id, "PMSGATE_GATEWAY_KEY", SecretStr("second-value"))
    await client.set_secret(workspace_id, "PMSGATE_GATEWAY_URL", SecretStr("https://gw.example"))

    secrets = await client.list_secrets(workspace_id)

    assert sorted(s.name for s in secrets) == ["PMSGATE_GATEWAY_KEY", "PMSGATE_GATEWAY_URL"]
    raw = await assistant_http.get(
        f"/v1/workspaces/{workspace_id}/secrets",
        headers={"Authorization": f"Bearer {SANDBOX_ASSISTANT_TOKEN}"},
    )
    assert "second-value" not in raw.text
    assert "gw.example" not in raw.text


async def test_an_admin_is_added_and_roles_are_listed(
    client: AssistantClient, workspace_id: str
) -> None:
    roles = {r.name for r in await client.list_roles(workspace_id)}
    assert {"Admin", "Editor", "Viewer"} <= roles

    added = await client.add_member(workspace_id, "platform-team@example.com", "Editor")
    promoted = await client.set_member_role(workspace_id, added.id, "Admin")
    members = await client.list_members(workspace_id)

    assert promoted.role == "Admin"
    assert ("platform-team@example.com", "Admin") in {(m.email, m.role) for m in members}
    with pytest.raises(AssistantConflict):
        await client.add_member(workspace_id, "platform-team@example.com", "Viewer")
    with pytest.raises(AssistantValidationError):
        await client.add_member(workspace_id, "someone@example.com", "Superuser")


# --- throttling and retries -----------------------------------------------------------------


async def test_client_never_triggers_the_rate_limit_over_300_requests_for_one_workspace(
    client: AssistantClient,
    workspace_id: str,
    assistant_http: httpx.AsyncClient,
    sleep: RecordingSleep,
    clock: ManualClock,
) -> None:
    started = clock.now()
    for _ in range(300):
        await client.list_listings(workspace_id)

    seen = await stats(assistant_http)
    assert seen["rate_limited"]["total"] == 0
    assert seen["requests"]["by_workspace"][workspace_id] == 300
    # The client waited (on the injected clock) instead of bursting: 300 at 100/min.
    assert (clock.now() - started).total_seconds() >= 120
    assert sleep.calls


async def test_rate_limited_read_waits_for_retry_after_and_then_succeeds(
    assistant_http: httpx.AsyncClient, clock: ManualClock, sleep: RecordingSleep, workspace_id: str
) -> None:
    eager = await eager_client(assistant_http, clock, sleep, 2)
    await eager.list_listings(workspace_id)
    await eager.list_listings(workspace_id)

    assert await eager.list_listings(workspace_id) == []

    seen = await stats(assistant_http)
    assert seen["rate_limited"]["by_workspace"][workspace_id] == 1
    assert sleep.calls == [60.0]


async def test_rate_limited_write_without_idempotency_key_is_not_retried(
    assistant_http: httpx.AsyncClient, clock: ManualClock, sleep: RecordingSleep, workspace_id: str
) -> None:
    eager = await eager_client(assistant_http, clock, sleep, 1)
    await eager.list_custom_tools(workspace_id)

    with pytest.raises(AssistantRateLimited) as caught:
        await eager.create_custom_tool(echo_tool(workspace_id))

    assert caught.value.retry_after == 60.0
    assert caught.value.retryable is True
    assert sleep.calls == []
    seen = await stats(assistant_http)
    assert seen["requests"]["by_route"].get("POST /v1/custom-tools") is None
    assert seen["rate_limited"]["total"] == 1


async def test_rate_limited_write_with_idempotency_key_is_retried_after_retry_after(
    assistant_http: httpx.AsyncClient,
    clock: ManualClock,
    sleep: RecordingSleep,
    workspace_id: str,
    assistant_store: AssistantStore,
) -> None:
    eager = await eager_client(assistant_http, clock, sleep, 1)
    await eager.list_custom_tools(workspace_id)

    created = await eager.create_custom_tool(echo_tool(workspace_id), idempotency_key="tool-1")

    assert sleep.calls == [60.0]
    assert [t.id for t in assistant_store.tools(workspace_id)] == [created.id]


async def test_retry_after_longer_than_the_cap_fails_at_once_instead_of_waiting(
    assistant_http: httpx.AsyncClient, clock: ManualClock, sleep: RecordingSleep, workspace_id: str
) -> None:
    eager = make_client(
        assistant_http, clock, sleep, requests_per_minute=10_000, max_retry_after_s=10
    )
    await set_emulator_limit(assistant_http, 1)
    await eager.list_listings(workspace_id)

    with pytest.raises(AssistantRateLimited):
        await eager.list_listings(workspace_id)
    assert sleep.calls == []


async def test_failed_write_without_idempotency_key_is_sent_once(
    client: AssistantClient,
    workspace_id: str,
    assistant_http: httpx.AsyncClient,
    assistant_store: AssistantStore,
) -> None:
    await assistant_http.post("/_sandbox/faults", json={"fail_next": 1})

    with pytest.raises(AssistantUnavailable):
        await client.create_custom_tool(echo_tool(workspace_id))

    seen = await stats(assistant_http)
    assert seen["requests"]["by_route"]["POST /v1/custom-tools"] == 1
    assert assistant_store.tools(workspace_id) == []


async def test_gateway_timeout_on_a_write_without_key_is_reported_as_outcome_unknown(
    client: AssistantClient, workspace_id: str, assistant_http: httpx.AsyncClient
) -> None:
    await assistant_http.post("/_sandbox/faults", json={"fail_next": 1, "fail_status": 504})

    with pytest.raises(AssistantWriteOutcomeUnknown) as caught:
        await client.create_custom_tool(echo_tool(workspace_id))

    assert caught.value.code == "platform_write_outcome_unknown"
    assert caught.value.retryable is False


async def test_failed_write_with_idempotency_key_is_retried_and_applied_once(
    client: AssistantClient,
    workspace_id: str,
    assistant_http: httpx.AsyncClient,
    assistant_store: AssistantStore,
    sleep: RecordingSleep,
) -> None:
    await assistant_http.post("/_sandbox/faults", json={"fail_next": 2})

    created = await client.create_custom_tool(echo_tool(workspace_id), idempotency_key="k-1")
    again = await client.create_custom_tool(echo_tool(workspace_id), idempotency_key="k-1")

    assert again.id == created.id
    assert [t.id for t in assistant_store.tools(workspace_id)] == [created.id]
    seen = await stats(assistant_http)
    assert seen["injected_errors"] == 2
    # Backoff between attempts is stamina's (skipped in its testing mode), not the throttle's.
    assert sleep.calls == []


async def test_read_is_retried_after_a_transient_failure(
    client: AssistantClient, workspace_id: str, assistant_http: httpx.AsyncClient
) -> None:
    await assistant_http.post("/_sandbox/faults", json={"fail_next": 1})

    assert await client.list_custom_tools(workspace_id) == []
    assert (await stats(assistant_http))["injected_errors"] == 1


# --- authentication and secrecy -------------------------------------------------------------


async def test_unknown_token_is_unauthorized(
    assistant_http: httpx.AsyncClient, clock: ManualClock, sleep: RecordingSleep
) -> None:
    client = make_client(assistant_http, clock, sleep, token="not-a-real-token")
    with pytest.raises(AssistantUnauthorized) as caught:
        await client.list_workspaces()
    assert caught.value.code == "platform_unauthorized"


async def test_workspace_token_cannot_touch_another_workspace(
    assistant_http: httpx.AsyncClient, clock: ManualClock, sleep: RecordingSleep, workspace_id: str
) -> None:
    other = await make_client(assistant_http, clock, sleep).ensure_workspace("Other", "other")
    issued = await assistant_http.post("/_sandbox/tokens", json={"workspace_ids": [workspace_id]})
    scoped = make_client(assistant_http, clock, sleep, token=issued.json()["token"])

    assert [w.id for w in await scoped.list_workspaces()] == [workspace_id]
    with pytest.raises(AssistantForbidden):
        await scoped.list_custom_tools(other.id)


async def test_token_and_secret_values_stay_out_of_logs_reprs_and_errors(
    client: AssistantClient, workspace_id: str
) -> None:
    value = "very-secret-value-123"
    with capture_logs() as logs:
        await client.set_secret(workspace_id, "GOOD_NAME", SecretStr(value))
        with pytest.raises(AssistantValidationError) as caught:
            await client.set_secret(workspace_id, "bad name!", SecretStr(value))

    visible = " ".join([repr(client), repr(caught.value), str(caught.value), repr(logs)])
    assert value not in visible
    assert SANDBOX_ASSISTANT_TOKEN not in visible
    assert logs  # requests are logged, just without secrets


async def test_from_settings_requires_a_token_and_reads_the_base_url() -> None:
    async with httpx.AsyncClient() as http:
        with pytest.raises(ValueError):
            AssistantClient.from_settings(Settings(assistant_api_token=None), http)
        client = AssistantClient.from_settings(
            Settings(
                assistant_api_url="http://platform.test/",
                assistant_api_token=SecretStr("t"),
            ),
            http,
        )
    assert client.base_url == "http://platform.test"
