"""The emulator's ``/_sandbox/`` controls: tokens, workspaces' connection and traffic, switches.

Beyond the controls every emulator has (reset, stats, the clock), a test can issue
tokens, see each workspace at a glance, set or break its booking-system connection,
add guest traffic to its usage, read the recorded tool runs and test conversations,
turn the switches (``/config``) and arm faults.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from pmsgate.sandbox.assistant import wire
from pmsgate.sandbox.assistant.bodies import (
    ConfigControl,
    ConnectionControl,
    FaultsControl,
    TokenControl,
    TrafficControl,
)
from pmsgate.sandbox.assistant.store import AssistantStore
from pmsgate.sandbox.emulator_app import common_controls

WORKSPACE = "/workspaces/{workspace_id}"


def control_router(store: AssistantStore) -> APIRouter:
    """Every ``/_sandbox/`` control of the emulator."""
    router = common_controls(store)
    router.include_router(_workspace_controls(store))
    router.include_router(_switch_controls(store))
    return router


def _workspace_controls(store: AssistantStore) -> APIRouter:
    router = APIRouter()

    @router.post("/tokens", status_code=201)
    async def create_token(body: TokenControl) -> dict[str, Any]:
        token = store.issue_token(body.name, body.workspace_ids)
        scope = sorted(token.workspace_ids) if token.workspace_ids is not None else None
        return {"token": token.value, "name": token.name, "workspace_ids": scope}

    @router.get("/workspaces")
    async def workspaces() -> list[dict[str, Any]]:
        return [
            {
                **wire.workspace(workspace),
                "pms_connection": wire.connection(*store.pms_connection(workspace.id)),
                "custom_tools": len(store.tools(workspace.id)),
                "listings": len(store.listings(workspace.id)),
                "kb_nodes": len(store.nodes(workspace.id)),
            }
            for workspace in store.workspaces()
        ]

    @router.get(f"{WORKSPACE}/pms-connection")
    async def get_connection(workspace_id: str) -> dict[str, Any]:
        return wire.connection(*store.pms_connection(workspace_id))

    @router.put(f"{WORKSPACE}/pms-connection")
    async def set_connection(workspace_id: str, body: ConnectionControl) -> dict[str, Any]:
        store.set_kross_connection(workspace_id, body.hotel_id, body.username, body.password)
        return wire.connection(*store.pms_connection(workspace_id))

    @router.delete(f"{WORKSPACE}/pms-connection")
    async def clear_connection(workspace_id: str) -> dict[str, Any]:
        store.clear_kross_connection(workspace_id)
        return wire.connection(None, False)

    @router.post(f"{WORKSPACE}/traffic")
    async def add_traffic(workspace_id: str, body: TrafficControl) -> dict[str, Any]:
        store.add_traffic(workspace_id, body.messages, body.tool_calls)
        return wire.usage(store.usage(workspace_id))

    @router.get(f"{WORKSPACE}/tool-runs")
    async def tool_runs(workspace_id: str) -> list[dict[str, Any]]:
        return [wire.run(run) for run in store.tool_runs(workspace_id)]

    @router.get(f"{WORKSPACE}/test-conversations")
    async def test_conversations(workspace_id: str) -> list[dict[str, Any]]:
        return [wire.conversation(c) for c in store.test_conversations(workspace_id)]

    return router


def _switch_controls(store: AssistantStore) -> APIRouter:
    router = APIRouter()

    @router.get("/config")
    async def config() -> dict[str, Any]:
        return dict(vars(store.config))

    @router.put("/config")
    async def set_config(body: ConfigControl) -> dict[str, Any]:
        config = store.configure(
            body.requests_per_minute,
            body.tool_timeout_s,
            undocumented_endpoints=body.undocumented_endpoints,
            kb_node_id_format=body.kb_node_id_format,
        )
        return dict(vars(config))

    @router.get("/faults")
    async def faults() -> dict[str, Any]:
        return dict(vars(store.faults))

    @router.post("/faults")
    async def set_faults(body: FaultsControl) -> dict[str, Any]:
        return dict(vars(store.set_faults(body.fail_next, body.fail_status)))

    @router.delete("/faults")
    async def clear_faults() -> dict[str, Any]:
        store.clear_faults()
        return dict(vars(store.faults))

    return router
