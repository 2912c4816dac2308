"""The emulator's answers in the public reference's shapes, one function per resource.

``/v1`` answers wrap these (``{"data": ...}``); the ``/_sandbox/`` controls return
some of them bare. Secrets and passwords are never part of an answer.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from pmsgate.sandbox.assistant.store import (
    Agent,
    AgentConversation,
    CustomTool,
    KbNode,
    KrossConnection,
    Listing,
    Member,
    Secret,
    Skill,
    ToolRun,
    Workspace,
    WorkspaceUsage,
)


def fields(record: Any, names: str) -> dict[str, Any]:
    """The record's attributes named in ``names`` (space-separated); times as ISO 8601."""
    return {name: _plain(getattr(record, name)) for name in names.split()}


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def workspace(w: Workspace) -> dict[str, Any]:
    return fields(w, "id name slug created_at")


def usage(u: WorkspaceUsage) -> dict[str, Any]:
    # usd_spent as a decimal string: money is never a float.
    spent = str(u.usd_spent)
    return {
        **fields(u, "workspace_id"),
        "usd_spent": spent,
        **fields(u, "messages tool_calls as_of"),
    }


def member(m: Member) -> dict[str, Any]:
    return fields(m, "id workspace_id email name role created_at")


def secret(s: Secret) -> dict[str, Any]:
    # Never the value: secrets are write-only over the API.
    return fields(s, "name created_at updated_at")


def tool(t: CustomTool) -> dict[str, Any]:
    shown = fields(
        t,
        "id workspace_id name description language code parameters "
        "execution_message_description enable_globally",
    )
    # The emulator refuses code it cannot store, so what it holds is validated.
    return {**shown, "validated": True, **fields(t, "version created_at")}


def skill(s: Skill) -> dict[str, Any]:
    return fields(
        s,
        "id workspace_id name display_name description body allowed_tools tags enabled "
        "created_at updated_at",
    )


def agent(a: Agent) -> dict[str, Any]:
    guardrails = [{"id": f"guardrail_{n}", **g} for n, g in enumerate(a.guardrails, start=1)]
    return {
        **fields(a, "id workspace_id name description"),
        "version": "v2",
        "instructions": a.instructions,
        "guardrails": guardrails,
        "operation_mode": a.operation_mode,
        # Documented settings the emulator does not model: their defaults.
        "autopilot_schedule": None,
        "custom_response_delay_ms": None,
        "auto_mark_as_done": False,
        "response_language": a.response_language,
        "responseflow": False,
        "output_schema": [],
        **fields(a, "skill_ids enabled"),
        "triggers": [_trigger(a, n, t) for n, t in enumerate(a.triggers)],
        **fields(a, "created_at updated_at"),
    }


def _trigger(a: Agent, index: int, t: dict[str, Any]) -> dict[str, Any]:
    # A stable 32-character id per agent and position (the store keeps triggers as given).
    trigger_id = "tr" + hashlib.sha256(f"{a.id}:{index}".encode()).hexdigest()[:30]
    stamps = fields(a, "created_at updated_at")
    return {"id": trigger_id, "workspace_id": a.workspace_id, "description": "", **t, **stamps}


def listing(li: Listing) -> dict[str, Any]:
    kross = {"provider": "kross", "hotel_id": li.hotel_id, "id_room_type": li.id_room_type}
    return {**fields(li, "id workspace_id name external_id"), "pms": kross, "status": "active"}


def node(n: KbNode) -> dict[str, Any]:
    return {
        **fields(n, "id workspace_id title body"),
        "chunk_body": not n.is_directory,
        **fields(n, "entity_ids parent_id"),
        "ancestors": [],
        "depth": 0,
        "source": "api",
        "source_type": None,
        "source_id": None,
        **fields(n, "is_directory metadata enabled"),
        "created_by": None,
        "embed_status": "embedded",
        "chunk_count": 0 if n.is_directory else 1,
        "version": n.index_version,
        "tags": [],
        # indexed_at is not in the reference: the emulator's own proof of re-indexing
        # (docs/assistant-api.md).
        **fields(n, "created_at updated_at indexed_at"),
    }


def run_result(r: ToolRun) -> dict[str, Any]:
    # The documented run result; a failing tool is success false with the reason in error.
    return {
        "success": r.success,
        "message": r.message,
        "result": {"message": r.output_message, "rawData": r.raw_data} if r.success else None,
        "error": None if r.success else r.message,
        "logs": [],
        "run_time_ms": r.duration_ms,
    }


def run(r: ToolRun) -> dict[str, Any]:
    shown = fields(r, "id tool_id tool_name parameters at success message")
    return {**shown, "rawData": r.raw_data, "duration_ms": r.duration_ms}


def conversation(c: AgentConversation) -> dict[str, Any]:
    calls = [fields(call, "name parameters success message") for call in c.tool_calls]
    shown = fields(c, "id workspace_id agent_id message reply")
    return {**shown, "tool_calls": calls, "created_at": c.at.isoformat()}


def connection(held: KrossConnection | None, healthy: bool) -> dict[str, Any]:
    """A control's view of the connection: the password is never echoed back."""
    if held is None:
        return {"connected": False, "healthy": False, "hotel_id": None, "username": None}
    return {"connected": True, "healthy": healthy, **fields(held, "hotel_id username")}


def api_connection(held: KrossConnection, healthy: bool) -> dict[str, Any]:
    """The /v1 shape: never the password (nor an api key)."""
    return {"provider": "kross", **fields(held, "hotel_id username"), "healthy": healthy}
