"""Client and emulator against the same documented examples (``contract_examples.py``).

Each example is played twice: the client reads the documented answer served by an
``httpx.MockTransport`` (the upstream, not our code), and the emulator answers the same
request with the same shape — envelope, keys, id format — so the two never drift apart.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from pmsgate.clock import ManualClock
from pmsgate.integrations.assistant.client import (
    AssistantClient,
    CustomToolUpdate,
    KbNodeUpdate,
    NewAgent,
    NewCustomTool,
    NewKbNode,
    NewSkill,
)
from pmsgate.integrations.assistant.errors import AssistantNotFound
from pmsgate.sandbox.assistant.app import create_assistant_app
from pmsgate.sandbox.assistant.seed import SANDBOX_ASSISTANT_TOKEN
from pmsgate.sandbox.assistant.store import AssistantStore
from tests.support.asgi import asgi_client

from .contract_examples import (
    AGENT,
    EXAMPLES,
    NODE,
    SKILL,
    TOOL,
    TOOL_CODE,
    WORKSPACE,
    Example,
)

pytestmark = pytest.mark.anyio

ID32 = re.compile(r"^[0-9a-z]{32}$")
BY_NAME = {e.name: e for e in EXAMPLES}


# --- the client reads every documented answer ---------------------------------------------------


def documented(example: Example, seen: list[httpx.Request]) -> httpx.MockTransport:
    """The upstream answering ``example`` to its method and path (anything else is a 599)."""
    path = example.path.format(
        workspace_id=WORKSPACE,
        tool_id=TOOL,
        skill_id=SKILL,
        agent_id=AGENT,
        node_id=NODE,
        missing_id="m" * 32,
    )

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.method == example.method and request.url.path == path:
            return httpx.Response(example.status, json=example.answer)
        return httpx.Response(599, json={"error": f"unexpected {request.method} {request.url}"})

    return httpx.MockTransport(answer)


def new_tool() -> NewCustomTool:
    body = BY_NAME["create-custom-tool"].body or {}
    return NewCustomTool.model_validate({**body, "workspace_id": WORKSPACE})


ClientCall = Callable[[AssistantClient], Awaitable[Any]]

CLIENT_CALLS: dict[str, ClientCall] = {
    "create-custom-tool": lambda c: c.create_custom_tool(new_tool()),
    "get-custom-tool": lambda c: c.get_custom_tool(TOOL),
    "update-custom-tool": lambda c: c.update_custom_tool(
        TOOL, CustomToolUpdate(description="Says whether a room is free.")
    ),
    "list-custom-tools": lambda c: c.list_custom_tools(WORKSPACE),
    "run-custom-tool": lambda c: c.run_custom_tool(TOOL, {"room": "12"}),
    "list-custom-tool-runtimes": lambda c: c.custom_tool_runtimes(),
    "create-skill": lambda c: c.create_skill(
        NewSkill(
            workspace_id=WORKSPACE,
            name="late-arrivals",
            display_name="Late arrivals",
            description="For guests arriving after the desk closes.",
            body="Send the self check-in steps.",
        )
    ),
    "list-skills": lambda c: c.list_skills(WORKSPACE),
    "create-agent": lambda c: c.create_agent(NewAgent(workspace_id=WORKSPACE, name="Front desk")),
    "get-agent": lambda c: c.get_agent(AGENT),
    "list-agents": lambda c: c.list_agents(WORKSPACE),
    "create-knowledge-node": lambda c: c.create_node(WORKSPACE, NewKbNode(title="Parking")),
    "update-knowledge-node": lambda c: c.update_node(NODE, KbNodeUpdate(body="Paid parking.")),
    "unknown-custom-tool": lambda c: c.get_custom_tool("m" * 32),
}


def client_on(transport: httpx.MockTransport, clock: ManualClock) -> AssistantClient:
    async def no_sleep(_seconds: float) -> None:
        return None

    http = httpx.AsyncClient(transport=transport)
    return AssistantClient(
        http,
        base_url="https://platform.test",
        token=SecretStr("contract-token"),
        clock=clock,
        sleep=no_sleep,
    )


def test_every_example_has_a_client_call() -> None:
    assert set(CLIENT_CALLS) == set(BY_NAME)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.name)
async def test_the_client_reads_the_documented_answer(example: Example, clock: ManualClock) -> None:
    seen: list[httpx.Request] = []
    client = client_on(documented(example, seen), clock)

    if example.status >= 400:
        with pytest.raises(AssistantNotFound) as caught:
            await CLIENT_CALLS[example.name](client)
        assert caught.value.upstream_message == example.answer["error"]
        assert caught.value.operation == f"{example.method} {seen[0].url.path}"
        return
    result = await CLIENT_CALLS[example.name](client)

    data = example.answer["data"]
    if isinstance(data, list):
        assert len(result) == len(data)
        first = result[0]
        expected = data[0]
    else:
        first, expected = result, data
    if "id" in expected:
        assert first.id == expected["id"]
        assert ID32.match(first.id)
    assert [r.method for r in seen] == [example.method]


async def test_the_client_returns_the_documented_run_result_typed(clock: ManualClock) -> None:
    example = BY_NAME["run-custom-tool"]
    client = client_on(documented(example, []), clock)

    run = await client.run_custom_tool(TOOL, {"room": "12"})

    assert run.success is True
    assert run.message == "room 12 is free"
    assert run.result is not None
    assert run.result.message == "room 12 is free"
    assert run.raw_data == {"room": "12", "free": True}
    assert run.error is None
    assert run.logs == []
    assert run.run_time_ms == 41


async def test_the_client_also_reads_bare_objects_and_the_flat_run_variant(
    clock: ManualClock,
) -> None:
    tool = BY_NAME["get-custom-tool"].answer["data"]
    answers = {
        f"/v1/custom-tools/{TOOL}": tool,
        f"/v1/custom-tools/{TOOL}/run": {"success": True, "message": "ok", "rawData": [1]},
    }
    transport = httpx.MockTransport(lambda r: httpx.Response(200, json=answers[r.url.path]))
    client = client_on(transport, clock)

    assert (await client.get_custom_tool(TOOL)).name == tool["name"]
    run = await client.run_custom_tool(TOOL)
    assert (run.success, run.raw_data, run.output_message) == (True, [1], "ok")


async def test_the_client_sends_the_documented_request_bodies(clock: ManualClock) -> None:
    example = BY_NAME["create-custom-tool"]
    seen: list[httpx.Request] = []
    client = client_on(documented(example, seen), clock)

    await client.create_custom_tool(new_tool())

    sent = json.loads(seen[0].content)
    assert sent == {**(example.body or {}), "workspace_id": WORKSPACE}


# --- the emulator answers the same shape ---------------------------------------------------------


@pytest.fixture
def store(clock: ManualClock) -> AssistantStore:
    return AssistantStore(seed=3, clock=clock)


@pytest.fixture
async def emulator(store: AssistantStore) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"Bearer {SANDBOX_ASSISTANT_TOKEN}"}
    async with asgi_client(
        create_assistant_app(store), "http://platform.test", headers=headers
    ) as http:
        yield http


def ids_in(store: AssistantStore) -> dict[str, str]:
    """A workspace with one tool, skill, agent and node, as the examples' placeholders need."""
    workspace = store.create_workspace("Contract", "contract")
    tool = store.create_tool(
        workspace.id,
        name="room-is-free",
        description="Says whether a room is free tonight.",
        language="python",
        code=TOOL_CODE,
        parameters={"room": {"type": "string", "required": True, "description": "The room."}},
    )
    skill = store.create_skill(
        workspace.id, name="existing", display_name="E", description="d", body="b"
    )
    agent = store.create_agent(
        workspace.id,
        name="Existing agent",
        guardrails=[{"title": "No discounts", "knowledge": "Never."}],
        triggers=[
            {
                "name": "Guest",
                "type": "message",
                "config": {"inboxTypeId": "guest", "channels": ["email"]},
                "enabled": True,
            }
        ],
    )
    node = store.create_node(workspace.id, title="Parking", body="Free.")
    return {
        "workspace_id": workspace.id,
        "tool_id": tool.id,
        "skill_id": skill.id,
        "agent_id": agent.id,
        "node_id": node.id,
        "missing_id": "m" * 32,
    }


def filled(value: Any, ids: dict[str, str]) -> Any:
    if isinstance(value, str):
        for name, real in ids.items():
            value = value.replace("{" + name + "}", real)
        return value
    if isinstance(value, list):
        return [filled(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: filled(v, ids) for k, v in value.items()}
    return value


def assert_same_shape(documented: Any, actual: Any, extras: frozenset[str], where: str) -> None:
    """Same keys (the emulator may add only ``extras``), same envelope, ids in the same format."""
    if isinstance(documented, dict):
        assert isinstance(actual, dict), where
        missing = set(documented) - set(actual)
        added = set(actual) - set(documented) - extras
        assert not missing, f"{where}: the emulator lacks {sorted(missing)}"
        assert not added, f"{where}: the emulator adds {sorted(added)}"
        for key, value in documented.items():
            assert_same_shape(value, actual[key], extras, f"{where}.{key}")
    elif isinstance(documented, list):
        assert isinstance(actual, list), where
        if documented and actual:
            assert_same_shape(documented[0], actual[0], extras, f"{where}[0]")
    elif isinstance(documented, str) and ID32.match(documented):
        assert isinstance(actual, str) and ID32.match(actual), f"{where}: {actual!r}"
    elif documented is not None and actual is not None:
        kinds = (bool, int | float, str)
        kind = next(k for k in kinds if isinstance(documented, k))
        assert isinstance(actual, kind), f"{where}: {actual!r} is not like {documented!r}"


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.name)
async def test_the_emulator_answers_the_documented_shape(
    example: Example, store: AssistantStore, emulator: httpx.AsyncClient
) -> None:
    ids = ids_in(store)
    if example.name == "create-custom-tool":
        store.delete_tool(ids["tool_id"])  # the example creates the same name

    answer = await emulator.request(
        example.method,
        filled(example.path, ids),
        params=filled(example.query, ids),
        json=filled(example.body, ids),
    )

    assert answer.status_code == example.status, answer.text
    assert_same_shape(example.answer, answer.json(), example.emulator_extras, example.name)


async def test_the_emulator_gives_24_hex_node_ids_when_switched_to_that_variant(
    store: AssistantStore, emulator: httpx.AsyncClient, clock: ManualClock
) -> None:
    ids = ids_in(store)
    await emulator.put("/_sandbox/config", json={"kb_node_id_format": "hex24"})

    created = await emulator.post(
        "/v1/kb/nodes", params={"workspace_id": ids["workspace_id"]}, json={"title": "T"}
    )

    assert re.match(r"^[0-9a-f]{24}$", created.json()["data"]["id"])
    # The client reads either format: an id is an opaque string.
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_assistant_app(store)))
    client = AssistantClient(
        http,
        base_url="http://platform.test",
        token=SecretStr(SANDBOX_ASSISTANT_TOKEN),
        clock=clock,
    )
    node = await client.get_node(created.json()["data"]["id"])
    assert node.title == "T"
