"""The assistant platform's documented request/response examples, in our own words and values.

Each example restates one endpoint of the public API reference (docs.conduit.ai, section
"API reference"; the page of each is named in ``source``): the method and path, a request
body, the documented status and the documented answer's *shape* — its envelope, its keys
and an id in the reference's format (32 lowercase letters and digits). The values are ours.

``tests/integrations/assistant/test_assistant_contract.py`` plays every example against both
sides: the client (an ``httpx.MockTransport`` answering the example) must read it, and the emulator
must answer the same request with the same shape. ``emulator_extras`` lists the keys the
emulator may add beyond the reference (written down in docs/assistant-api.md).

Path placeholders (``{workspace_id}``, ``{tool_id}``, …) are filled with real ids on the
emulator side.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

WORKSPACE = "w0rkspace0example0000000000000ab"
TOOL = "t00l0example000000000000000000cd"
SKILL = "sk1ll0example0000000000000000000"
AGENT = "ag3nt0example0000000000000000000"
TRIGGER = "tr1gger0example00000000000000000"
NODE = "n0de0example00000000000000000000"

TOOL_CODE = (
    "def main(**params):\n"
    "    room = params['room']\n"
    "    return {'message': f'room {room} is free', 'rawData': {'room': room, 'free': True}}\n"
)


@dataclass(frozen=True)
class Example:
    """One documented exchange: what is sent, what comes back."""

    name: str
    source: str  # the reference page it restates
    method: str
    path: str  # with {placeholders}
    status: int
    answer: Any
    body: dict[str, Any] | None = None
    query: dict[str, str] = field(default_factory=dict)
    emulator_extras: frozenset[str] = frozenset()


def _tool() -> dict[str, Any]:
    return {
        "id": TOOL,
        "workspace_id": WORKSPACE,
        "name": "room-is-free",
        "description": "Says whether a room is free tonight.",
        "language": "python",
        "code": TOOL_CODE,
        "parameters": {
            "room": {"type": "string", "required": True, "description": "The room's number."}
        },
        "execution_message_description": "Checking the room",
        "enable_globally": False,
        "validated": True,
        "version": 1,
        "created_at": "2030-01-02T10:00:00.000Z",
    }


def _sent(answer: dict[str, Any], fields: str, **extra: Any) -> dict[str, Any]:
    """The create request of an example answer: its workspace, the named fields, ``extra``."""
    picked = {k: answer[k] for k in fields.split()}
    return {"workspace_id": "{workspace_id}", **picked, **extra}


def _tool_body() -> dict[str, Any]:
    fields = "name description language code parameters execution_message_description"
    return _sent(_tool(), fields, enable_globally=False)


def _skill() -> dict[str, Any]:
    return {
        "id": SKILL,
        "workspace_id": WORKSPACE,
        "name": "late-arrivals",
        "display_name": "Late arrivals",
        "description": "For guests arriving after the desk closes.",
        "body": "Send the self check-in steps.",
        "allowed_tools": ["room-is-free"],
        "tags": ["arrivals"],
        "enabled": True,
        "created_at": "2030-01-02T10:00:00.000Z",
        "updated_at": "2030-01-02T10:00:00.000Z",
    }


def _skill_body() -> dict[str, Any]:
    fields = "name display_name description body allowed_tools tags enabled"
    return _sent(_skill(), fields, auto_assign_to_existing_v2_agents=False)


def _agent() -> dict[str, Any]:
    return {
        "id": AGENT,
        "workspace_id": WORKSPACE,
        "name": "Front desk",
        "description": "Answers guests.",
        "version": "v2",
        "instructions": "Be brief and kind.",
        "guardrails": [
            {"id": "guardrail_1", "title": "No discounts", "knowledge": "Never offer one."}
        ],
        "operation_mode": "copilot",
        "autopilot_schedule": None,
        "custom_response_delay_ms": None,
        "auto_mark_as_done": False,
        "response_language": "Original",
        "responseflow": False,
        "output_schema": [],
        "skill_ids": [SKILL],
        "enabled": True,
        "triggers": [
            {
                "id": TRIGGER,
                "workspace_id": WORKSPACE,
                "name": "Guest messages",
                "description": "",
                "type": "message",
                "config": {"inboxTypeId": "guest", "channels": ["whatsapp"]},
                "enabled": True,
                "created_at": "2030-01-02T10:00:00.000Z",
                "updated_at": "2030-01-02T10:00:00.000Z",
            }
        ],
        "created_at": "2030-01-02T10:00:00.000Z",
        "updated_at": "2030-01-02T10:00:00.000Z",
    }


def _node(**overrides: Any) -> dict[str, Any]:
    node = {
        "id": NODE,
        "workspace_id": WORKSPACE,
        "title": "Parking",
        "body": "Free parking behind the building.",
        "chunk_body": True,
        "entity_ids": [],
        "parent_id": None,
        "ancestors": [],
        "depth": 0,
        "source": "api",
        "source_type": None,
        "source_id": None,
        "is_directory": False,
        "metadata": {},
        "enabled": True,
        "created_by": None,
        "embed_status": "embedded",
        "chunk_count": 1,
        "version": 1,
        "tags": [],
        "created_at": "2030-01-02T10:00:00.000Z",
        "updated_at": "2030-01-02T10:00:00.000Z",
    }
    node.update(overrides)
    return node


def _list(item: dict[str, Any]) -> dict[str, Any]:
    return {"data": [item], "next_cursor": None, "has_more": False}


NODE_EXTRAS = frozenset({"indexed_at"})  # the emulator's proof of re-indexing

EXAMPLES: tuple[Example, ...] = (
    Example(
        "create-custom-tool",
        "api-reference/custom-tools/create",
        "POST",
        "/v1/custom-tools",
        201,
        {"data": _tool()},
        body=_tool_body(),
    ),
    Example(
        "get-custom-tool",
        "api-reference/custom-tools/get",
        "GET",
        "/v1/custom-tools/{tool_id}",
        200,
        {"data": _tool()},
    ),
    Example(
        "update-custom-tool",
        "api-reference/custom-tools/update",
        "PATCH",
        "/v1/custom-tools/{tool_id}",
        200,
        {"data": {**_tool(), "description": "Says whether a room is free.", "version": 1}},
        body={"description": "Says whether a room is free."},
    ),
    Example(
        "list-custom-tools",
        "api-reference/custom-tools/list",
        "GET",
        "/v1/custom-tools",
        200,
        _list(_tool()),
        query={"workspace_id": "{workspace_id}"},
    ),
    Example(
        "run-custom-tool",
        "api-reference/custom-tools/run",
        "POST",
        "/v1/custom-tools/{tool_id}/run",
        200,
        {
            "data": {
                "success": True,
                "message": "room 12 is free",
                "result": {"message": "room 12 is free", "rawData": {"room": "12", "free": True}},
                "error": None,
                "logs": [],
                "run_time_ms": 41,
            }
        },
        body={"parameters": {"room": "12"}},
    ),
    Example(
        "list-custom-tool-runtimes",
        "api-reference/custom-tools/runtimes",
        "GET",
        "/v1/custom-tools/runtimes",
        200,
        {
            "data": [
                {
                    "language": "python",
                    "entrypoint": "def main(**params):",
                    "return_contract": {"message": "string", "rawData": "any"},
                    "template": "def main(**params):\n    return {'message': 'ok'}\n",
                    "builtin_modules": ["json", "os", "urllib"],
                    "packages": ["httpx"],
                }
            ]
        },
    ),
    Example(
        "create-skill",
        "api-reference/skills/create",
        "POST",
        "/v1/skills",
        201,
        {"data": _skill()},
        body=_skill_body(),
    ),
    Example(
        "list-skills",
        "api-reference/skills/list",
        "GET",
        "/v1/skills",
        200,
        _list(_skill()),
        query={"workspace_id": "{workspace_id}"},
    ),
    Example(
        "create-agent",
        "api-reference/agents/create",
        "POST",
        "/v1/agents",
        201,
        {"data": _agent()},
        body={
            "workspace_id": "{workspace_id}",
            "name": "Front desk",
            "description": "Answers guests.",
            "instructions": "Be brief and kind.",
            "guardrails": [{"title": "No discounts", "knowledge": "Never offer one."}],
            "skill_ids": ["{skill_id}"],
            "operation_mode": "copilot",
            "response_language": "Original",
            "triggers": [
                {
                    "name": "Guest messages",
                    "type": "message",
                    "config": {"inboxTypeId": "guest", "channels": ["whatsapp"]},
                    "enabled": True,
                }
            ],
        },
    ),
    Example(
        "get-agent",
        "api-reference/agents/get",
        "GET",
        "/v1/agents/{agent_id}",
        200,
        {"data": _agent()},
    ),
    Example(
        "list-agents",
        "api-reference/agents/list",
        "GET",
        "/v1/agents",
        200,
        _list(_agent()),
        query={"workspace_id": "{workspace_id}"},
    ),
    Example(
        "create-knowledge-node",
        "api-reference/knowledge/create-node",
        "POST",
        "/v1/kb/nodes",
        201,
        {"data": _node()},
        body={"title": "Parking", "body": "Free parking behind the building.", "enabled": True},
        query={"workspace_id": "{workspace_id}"},
        emulator_extras=NODE_EXTRAS,
    ),
    Example(
        "update-knowledge-node",
        "api-reference/knowledge (PATCH /v1/kb/nodes/{id})",
        "PATCH",
        "/v1/kb/nodes/{node_id}",
        200,
        {"data": _node(body="Paid parking behind the building.", version=2)},
        body={"body": "Paid parking behind the building."},
        emulator_extras=NODE_EXTRAS,
    ),
    Example(
        "unknown-custom-tool",
        "api-reference/introduction (Errors)",
        "GET",
        "/v1/custom-tools/{missing_id}",
        404,
        {"error": "Custom tool not found"},
    ),
)
