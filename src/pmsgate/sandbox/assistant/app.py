"""The platform emulator's HTTP face: the ``/v1`` API and the ``/_sandbox/`` controls.

Every ``/v1`` request goes through the same steps (docs/platform-api.md):

1. bearer-token authentication (401 ``{"error"}``);
2. attribution: the workspace named by the query or body, or owning the object in
   the path (404 if unknown, 403 when a scoped token does not cover it); requests
   that name no workspace (listing and creating workspaces) count for the token;
3. the 120 requests/minute sliding window of that workspace (429 + ``Retry-After``);
4. injected failures (``/_sandbox/faults``);
5. for writes carrying ``Idempotency-Key``, the replay of an earlier answer;
6. body parsing (422), the store's operation, serialisation.

Answers follow the public reference's envelopes: a single object is ``{"data": {...}}``,
a list ``{"data": [...], "next_cursor", "has_more"}``, an error ``{"error": "..."}``.
With ``undocumented_endpoints = "absent"`` (``PUT /_sandbox/config``) every endpoint the
reference does not document answers 404 first, like a platform that lacks it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from pmsgate.sandbox.assistant import errors
from pmsgate.sandbox.assistant.errors import PlatformApiError
from pmsgate.sandbox.assistant.store import (
    Agent,
    AgentConversation,
    ApiToken,
    CustomTool,
    KbNode,
    Listing,
    Member,
    Page,
    PlatformStore,
    Secret,
    Skill,
    ToolRun,
    Workspace,
    WorkspaceUsage,
    paginate,
)
from pmsgate.sandbox.core import bearer_token, json_object

_Model = TypeVar("_Model", bound=BaseModel)
_Item = TypeVar(
    "_Item",
    Workspace,
    Member,
    Secret,
    CustomTool,
    Skill,
    Agent,
    Listing,
    KbNode,
    AgentConversation,
)


# --- request bodies (unknown fields are refused: a client typo fails loudly) ------------------


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class WorkspaceBody(_Body):
    """POST /v1/workspaces (this project's assumption)."""

    name: str
    slug: str


class MemberBody(_Body):
    """POST /v1/workspaces/{id}/members."""

    email: str
    role: str
    name: str = ""


class RoleBody(_Body):
    """PATCH /v1/workspaces/{id}/members/{member_id}."""

    role: str


class SecretBody(_Body):
    """PUT /v1/workspaces/{id}/secrets/{name}."""

    value: str


class ToolBody(_Body):
    """POST /v1/custom-tools."""

    workspace_id: str
    name: str
    description: str
    language: str = "python"
    code: str
    parameters: dict[str, Any] = Field(default_factory=dict)
    execution_message_description: str | None = None
    enable_globally: bool = False


class ToolPatch(_Body):
    """PATCH /v1/custom-tools/{id}: only the fields sent change."""

    name: str | None = None
    description: str | None = None
    language: str | None = None
    code: str | None = None
    parameters: dict[str, Any] | None = None
    execution_message_description: str | None = None
    enable_globally: bool | None = None


class RunBody(_Body):
    """POST /v1/custom-tools/{id}/run (``workspace_id`` is an optional override)."""

    workspace_id: str | None = None
    parameters: dict[str, Any] = Field(default_factory=dict)


class SkillBody(_Body):
    """POST /v1/skills."""

    workspace_id: str
    name: str
    display_name: str | None = None
    description: str
    body: str
    allowed_tools: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    enabled: bool = True
    # Documented; the emulator has no other agents to assign the skill to.
    auto_assign_to_existing_v2_agents: bool = False


class AgentBody(_Body):
    """POST /v1/agents."""

    workspace_id: str
    name: str
    description: str = ""
    instructions: str = ""
    guardrails: list[dict[str, Any]] = Field(default_factory=list)
    skill_ids: list[str] = Field(default_factory=list)
    operation_mode: str = "copilot"
    response_language: str = "Original"
    triggers: list[dict[str, Any]] = Field(default_factory=list)
    enabled: bool = True
    # Documented agent settings the emulator accepts and does not model (not stored).
    responseflow: bool | None = None
    custom_response_delay_ms: int | None = None
    auto_mark_as_done: bool | None = None
    output_schema: list[dict[str, Any]] | None = None
    autopilot_schedule: dict[str, Any] | None = None


_AGENT_UNMODELLED = {
    "responseflow",
    "custom_response_delay_ms",
    "auto_mark_as_done",
    "output_schema",
    "autopilot_schedule",
}


class AgentPatch(_Body):
    """PATCH /v1/agents/{id}: only the fields sent change."""

    name: str | None = None
    description: str | None = None
    instructions: str | None = None
    guardrails: list[dict[str, Any]] | None = None
    skill_ids: list[str] | None = None
    operation_mode: str | None = None
    response_language: str | None = None
    triggers: list[dict[str, Any]] | None = None
    enabled: bool | None = None


class PmsConnectionBody(_Body):
    """PUT /v1/workspaces/{id}/pms-connection (this project's assumption)."""

    provider: str
    hotel_id: str = Field(min_length=1)
    username: str = Field(min_length=1)
    password: str = Field(min_length=1)
    # Accepted for own facilities; the emulator checks hotel_id, username and password only.
    api_key: str | None = None


class ConversationBody(_Body):
    """POST /v1/agents/{id}/test-conversations (emulator-only: the real API is not public)."""

    message: str


class NodeBody(_Body):
    """POST /v1/kb/nodes?workspace_id=."""

    title: str
    body: str = ""
    parent_id: str | None = None
    entity_ids: list[str] = Field(default_factory=list)
    is_directory: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)
    enabled: bool = True


class NodePatch(_Body):
    """PATCH /v1/kb/nodes/{id}: only the fields sent change."""

    title: str | None = None
    body: str | None = None
    parent_id: str | None = None
    entity_ids: list[str] | None = None
    metadata: dict[str, Any] | None = None
    enabled: bool | None = None


# --- control bodies --------------------------------------------------------------------------


class TokenControl(BaseModel):
    """POST /_sandbox/tokens: workspace_ids None = an account-wide token."""

    name: str = "sandbox token"
    workspace_ids: list[str] | None = None


class ConnectionControl(BaseModel):
    """PUT /_sandbox/workspaces/{id}/pms-connection."""

    hotel_id: str = Field(min_length=1)
    username: str = Field(min_length=1)
    password: str = Field(min_length=1)


class TrafficControl(BaseModel):
    """POST /_sandbox/workspaces/{id}/traffic: guest traffic added to the usage read."""

    messages: int = Field(default=0, ge=0)
    tool_calls: int = Field(default=0, ge=0)


class ConfigControl(BaseModel):
    """PUT /_sandbox/config."""

    requests_per_minute: int | None = Field(default=None, ge=1)
    tool_timeout_s: float | None = Field(default=None, gt=0)
    undocumented_endpoints: str | None = None  # "present" | "absent"
    kb_node_id_format: str | None = None  # "convex32" | "hex24"


class FaultsControl(BaseModel):
    """POST /_sandbox/faults."""

    fail_next: int | None = Field(default=None, ge=0)
    fail_status: int | None = Field(default=None, ge=500, le=599)


class AdvanceControl(BaseModel):
    """POST /_sandbox/clock/advance."""

    seconds: float = Field(ge=0)


# --- the app ---------------------------------------------------------------------------------


def create_platform_app(store: PlatformStore) -> FastAPI:
    """The emulator as an ASGI app over ``store``."""
    app = FastAPI(
        title="Assistant platform /v1 emulator", docs_url=None, redoc_url=None, openapi_url=None
    )
    _install_error_handlers(app)
    app.include_router(_api_router(store))
    app.include_router(_control_router(store), prefix="/_sandbox")
    return app


@dataclass(frozen=True)
class _Call:
    """An authenticated, admitted request and the scope it was counted against."""

    token: ApiToken
    scope: str


def _api_router(store: PlatformStore) -> APIRouter:
    router = APIRouter(prefix="/v1")

    # --- workspaces ---

    @router.get("/workspaces")
    async def list_workspaces(request: Request) -> JSONResponse:
        call = _enter(store, request)
        return _page(request, store.workspaces(call.token), _workspace)

    @router.post("/workspaces")
    async def create_workspace(request: Request) -> JSONResponse:
        call = _enter(store, request)
        if call.token.workspace_ids is not None:
            raise PlatformApiError(errors.FORBIDDEN, "a workspace token cannot create workspaces")
        body = await _json_body(request)

        async def act() -> tuple[int, Any]:
            req = _parse(WorkspaceBody, body)
            workspace = store.create_workspace(req.name, req.slug)
            return 201, _workspace(workspace)

        return await _write(store, request, call, body, act)

    @router.get("/workspaces/{workspace_id}")
    async def get_workspace(workspace_id: str, request: Request) -> JSONResponse:
        _enter(store, request, workspace_id=workspace_id)
        return JSONResponse({"data": _workspace(store.workspace(workspace_id))})

    @router.get("/workspaces/{workspace_id}/usage")
    async def workspace_usage(workspace_id: str, request: Request) -> JSONResponse:
        # Assumed API (docs/platform-api.md): the platform's usage read is not public.
        _enter(store, request, workspace_id=workspace_id)
        return JSONResponse({"data": _usage(store.usage(workspace_id))})

    # --- members and roles ---

    @router.get("/workspaces/{workspace_id}/members")
    async def list_members(workspace_id: str, request: Request) -> JSONResponse:
        _enter(store, request, workspace_id=workspace_id)
        return _page(request, store.members(workspace_id), _member)

    @router.post("/workspaces/{workspace_id}/members")
    async def add_member(workspace_id: str, request: Request) -> JSONResponse:
        call = _enter(store, request, workspace_id=workspace_id)
        body = await _json_body(request)

        async def act() -> tuple[int, Any]:
            req = _parse(MemberBody, body)
            return 201, _member(store.add_member(workspace_id, req.email, req.role, req.name))

        return await _write(store, request, call, body, act)

    @router.patch("/workspaces/{workspace_id}/members/{member_id}")
    async def set_member_role(workspace_id: str, member_id: str, request: Request) -> JSONResponse:
        call = _enter(store, request, workspace_id=workspace_id)
        body = await _json_body(request)

        async def act() -> tuple[int, Any]:
            req = _parse(RoleBody, body)
            return 200, _member(store.set_member_role(workspace_id, member_id, req.role))

        return await _write(store, request, call, body, act)

    @router.get("/workspaces/{workspace_id}/roles")
    async def list_roles(workspace_id: str, request: Request) -> JSONResponse:
        _enter(store, request, workspace_id=workspace_id)
        roles = [{"name": name, "description": text} for name, text in store.roles()]
        return JSONResponse({"data": roles, "next_cursor": None, "has_more": False})

    # --- secrets (write-only values) ---

    @router.get("/workspaces/{workspace_id}/secrets")
    async def list_secrets(workspace_id: str, request: Request) -> JSONResponse:
        _enter(store, request, workspace_id=workspace_id)
        return _page(request, store.secrets(workspace_id), _secret)

    @router.put("/workspaces/{workspace_id}/secrets/{name}")
    async def set_secret(workspace_id: str, name: str, request: Request) -> JSONResponse:
        call = _enter(store, request, workspace_id=workspace_id)
        body = await _json_body(request)

        async def act() -> tuple[int, Any]:
            req = _parse(SecretBody, body)
            secret, created = store.set_secret(workspace_id, name, req.value)
            return (201 if created else 200), _secret(secret)

        return await _write(store, request, call, body, act)

    @router.delete("/workspaces/{workspace_id}/secrets/{name}")
    async def delete_secret(workspace_id: str, name: str, request: Request) -> JSONResponse:
        call = _enter(store, request, workspace_id=workspace_id)

        async def act() -> tuple[int, Any]:
            store.delete_secret(workspace_id, name)
            return 200, {"name": name, "deleted": True}

        return await _write(store, request, call, {}, act)

    # --- the booking-system connection (assumed; docs/platform-api.md "Listings") ---

    @router.get("/workspaces/{workspace_id}/pms-connection")
    async def get_pms_connection(workspace_id: str, request: Request) -> JSONResponse:
        _enter(store, request, workspace_id=workspace_id)
        connection, healthy = store.pms_connection(workspace_id)
        if connection is None:
            raise PlatformApiError(
                errors.NOT_FOUND, "the workspace has no booking-system connection"
            )
        return JSONResponse({"data": _api_connection(connection, healthy)})

    @router.put("/workspaces/{workspace_id}/pms-connection")
    async def set_pms_connection(workspace_id: str, request: Request) -> JSONResponse:
        call = _enter(store, request, workspace_id=workspace_id)
        body = await _json_body(request)

        async def act() -> tuple[int, Any]:
            req = _parse(PmsConnectionBody, body)
            if req.provider != "kross":
                raise PlatformApiError(errors.VALIDATION, "provider: only kross is supported")
            store.set_pms_connection(workspace_id, req.hotel_id, req.username, req.password)
            connection, healthy = store.pms_connection(workspace_id)
            return 200, _api_connection(connection, healthy)

        return await _write(store, request, call, body, act)

    # --- custom tools ---

    @router.get("/custom-tools")
    async def list_tools(request: Request) -> JSONResponse:
        workspace_id = _required_query(request, "workspace_id")
        _enter(store, request, workspace_id=workspace_id)
        return _page(request, store.tools(workspace_id), _tool)

    @router.post("/custom-tools")
    async def create_tool(request: Request) -> JSONResponse:
        body = await _json_body(request)
        call = _enter(store, request, body=body)

        async def act() -> tuple[int, Any]:
            req = _parse(ToolBody, body)
            fields = req.model_dump(exclude={"workspace_id"})
            return 201, _tool(store.create_tool(req.workspace_id, **fields))

        return await _write(store, request, call, body, act)

    @router.get("/custom-tools/runtimes")
    async def runtimes(request: Request) -> JSONResponse:
        _enter(store, request)
        return JSONResponse({"data": store.runtimes()})

    @router.get("/custom-tools/{tool_id}")
    async def get_tool(tool_id: str, request: Request) -> JSONResponse:
        _enter(store, request, resource_id=tool_id)
        return JSONResponse({"data": _tool(store.tool(tool_id))})

    @router.patch("/custom-tools/{tool_id}")
    async def update_tool(tool_id: str, request: Request) -> JSONResponse:
        call = _enter(store, request, resource_id=tool_id)
        body = await _json_body(request)

        async def act() -> tuple[int, Any]:
            changes = _parse(ToolPatch, body).model_dump(exclude_unset=True)
            return 200, _tool(store.update_tool(tool_id, changes))

        return await _write(store, request, call, body, act)

    @router.delete("/custom-tools/{tool_id}")
    async def delete_tool(tool_id: str, request: Request) -> JSONResponse:
        call = _enter(store, request, resource_id=tool_id)

        async def act() -> tuple[int, Any]:
            store.delete_tool(tool_id)
            return 200, {"id": tool_id, "deleted": True}

        return await _write(store, request, call, {}, act)

    @router.post("/custom-tools/{tool_id}/run")
    async def run_tool(tool_id: str, request: Request) -> JSONResponse:
        call = _enter(store, request, resource_id=tool_id)
        body = await _json_body(request)

        async def act() -> tuple[int, Any]:
            req = _parse(RunBody, body)
            run = await store.run_tool(tool_id, req.parameters)
            return 200, _run_result(run)

        return await _write(store, request, call, body, act)

    # --- skills ---

    @router.get("/skills")
    async def list_skills(request: Request) -> JSONResponse:
        workspace_id = _required_query(request, "workspace_id")
        _enter(store, request, workspace_id=workspace_id)
        return _page(request, store.skills(workspace_id), _skill)

    @router.post("/skills")
    async def create_skill(request: Request) -> JSONResponse:
        body = await _json_body(request)
        call = _enter(store, request, body=body)

        async def act() -> tuple[int, Any]:
            req = _parse(SkillBody, body)
            fields = req.model_dump(exclude={"workspace_id", "auto_assign_to_existing_v2_agents"})
            fields["display_name"] = fields["display_name"] or req.name
            return 201, _skill(store.create_skill(req.workspace_id, **fields))

        return await _write(store, request, call, body, act)

    @router.get("/skills/{skill_id}")
    async def get_skill(skill_id: str, request: Request) -> JSONResponse:
        _enter(store, request, resource_id=skill_id)
        return JSONResponse({"data": _skill(store.skill(skill_id))})

    # --- agents ---

    @router.get("/agents")
    async def list_agents(request: Request) -> JSONResponse:
        workspace_id = _required_query(request, "workspace_id")
        _enter(store, request, workspace_id=workspace_id)
        return _page(request, store.agents(workspace_id), _agent)

    @router.post("/agents")
    async def create_agent(request: Request) -> JSONResponse:
        body = await _json_body(request)
        call = _enter(store, request, body=body)

        async def act() -> tuple[int, Any]:
            req = _parse(AgentBody, body)
            fields = req.model_dump(exclude={"workspace_id", *_AGENT_UNMODELLED})
            return 201, _agent(store.create_agent(req.workspace_id, **fields))

        return await _write(store, request, call, body, act)

    @router.get("/agents/{agent_id}")
    async def get_agent(agent_id: str, request: Request) -> JSONResponse:
        _enter(store, request, resource_id=agent_id)
        return JSONResponse({"data": _agent(store.agent(agent_id))})

    @router.patch("/agents/{agent_id}")
    async def update_agent(agent_id: str, request: Request) -> JSONResponse:
        call = _enter(store, request, resource_id=agent_id)
        body = await _json_body(request)

        async def act() -> tuple[int, Any]:
            changes = _parse(AgentPatch, body).model_dump(exclude_unset=True)
            return 200, _agent(store.update_agent(agent_id, changes))

        return await _write(store, request, call, body, act)

    # --- test conversations (emulator-only, docs/platform-api.md) ---

    @router.post("/agents/{agent_id}/test-conversations")
    async def run_test_conversation(agent_id: str, request: Request) -> JSONResponse:
        call = _enter(store, request, resource_id=agent_id)
        body = await _json_body(request)

        async def act() -> tuple[int, Any]:
            req = _parse(ConversationBody, body)
            conversation = await store.run_test_conversation(agent_id, req.message)
            return 201, _conversation(conversation)

        return await _write(store, request, call, body, act)

    @router.get("/agents/{agent_id}/test-conversations")
    async def list_test_conversations(agent_id: str, request: Request) -> JSONResponse:
        _enter(store, request, resource_id=agent_id)
        agent = store.agent(agent_id)
        return _page(request, store.test_conversations(agent.workspace_id, agent_id), _conversation)

    # --- listings (derived from the booking-system emulator) ---

    @router.get("/listings")
    async def list_listings(request: Request) -> JSONResponse:
        workspace_id = _required_query(request, "workspace_id")
        _enter(store, request, workspace_id=workspace_id)
        return _page(request, store.listings(workspace_id), _listing)

    # --- knowledge nodes ---

    @router.get("/kb/nodes")
    async def list_nodes(request: Request) -> JSONResponse:
        workspace_id = _required_query(request, "workspace_id")
        _enter(store, request, workspace_id=workspace_id)
        is_directory = request.query_params.get("is_directory")
        if is_directory not in (None, "true", "false"):
            raise PlatformApiError(errors.BAD_REQUEST, "is_directory must be true or false")
        nodes = store.nodes(
            workspace_id,
            listing_id=request.query_params.get("listing_id") or None,
            parent_id=request.query_params.get("parent_id") or None,
            is_directory=None if is_directory is None else is_directory == "true",
        )
        return _page(request, nodes, _node)

    @router.post("/kb/nodes")
    async def create_node(request: Request) -> JSONResponse:
        workspace_id = _required_query(request, "workspace_id")
        call = _enter(store, request, workspace_id=workspace_id)
        body = await _json_body(request)

        async def act() -> tuple[int, Any]:
            req = _parse(NodeBody, body)
            return 201, _node(store.create_node(workspace_id, **req.model_dump()))

        return await _write(store, request, call, body, act)

    @router.get("/kb/nodes/{node_id}")
    async def get_node(node_id: str, request: Request) -> JSONResponse:
        _enter(store, request, resource_id=node_id)
        return JSONResponse({"data": _node(store.node(node_id))})

    @router.patch("/kb/nodes/{node_id}")
    async def update_node(node_id: str, request: Request) -> JSONResponse:
        call = _enter(store, request, resource_id=node_id)
        body = await _json_body(request)

        async def act() -> tuple[int, Any]:
            changes = _parse(NodePatch, body).model_dump(exclude_unset=True)
            return 200, _node(store.update_node(node_id, changes))

        return await _write(store, request, call, body, act)

    @router.delete("/kb/nodes/{node_id}")
    async def delete_node(node_id: str, request: Request) -> JSONResponse:
        call = _enter(store, request, resource_id=node_id)

        async def act() -> tuple[int, Any]:
            store.delete_node(node_id)
            return 200, {"id": node_id, "deleted": True}

        return await _write(store, request, call, {}, act)

    return router


def _control_router(store: PlatformStore) -> APIRouter:
    router = APIRouter()

    @router.post("/reset")
    async def reset() -> dict[str, Any]:
        store.reset()
        return {"ok": True}

    @router.get("/stats")
    async def stats() -> dict[str, Any]:
        return store.stats.as_dict()

    @router.post("/tokens", status_code=201)
    async def create_token(body: TokenControl) -> dict[str, Any]:
        token = store.issue_token(body.name, body.workspace_ids)
        scope = sorted(token.workspace_ids) if token.workspace_ids is not None else None
        return {"token": token.value, "name": token.name, "workspace_ids": scope}

    @router.get("/workspaces")
    async def workspaces() -> list[dict[str, Any]]:
        summaries = []
        for workspace in store.workspaces():
            connection, healthy = store.pms_connection(workspace.id)
            summaries.append(
                {
                    **_workspace(workspace),
                    "pms_connection": _connection(connection, healthy),
                    "custom_tools": len(store.tools(workspace.id)),
                    "listings": len(store.listings(workspace.id)),
                    "kb_nodes": len(store.nodes(workspace.id)),
                }
            )
        return summaries

    @router.get("/workspaces/{workspace_id}/pms-connection")
    async def get_connection(workspace_id: str) -> dict[str, Any]:
        connection, healthy = store.pms_connection(workspace_id)
        return _connection(connection, healthy)

    @router.put("/workspaces/{workspace_id}/pms-connection")
    async def set_connection(workspace_id: str, body: ConnectionControl) -> dict[str, Any]:
        store.set_pms_connection(workspace_id, body.hotel_id, body.username, body.password)
        connection, healthy = store.pms_connection(workspace_id)
        return _connection(connection, healthy)

    @router.delete("/workspaces/{workspace_id}/pms-connection")
    async def clear_connection(workspace_id: str) -> dict[str, Any]:
        store.clear_pms_connection(workspace_id)
        return _connection(None, False)

    @router.post("/workspaces/{workspace_id}/traffic")
    async def add_traffic(workspace_id: str, body: TrafficControl) -> dict[str, Any]:
        store.add_traffic(workspace_id, body.messages, body.tool_calls)
        return _usage(store.usage(workspace_id))

    @router.get("/workspaces/{workspace_id}/tool-runs")
    async def tool_runs(workspace_id: str) -> list[dict[str, Any]]:
        return [_run(run) for run in store.tool_runs(workspace_id)]

    @router.get("/workspaces/{workspace_id}/test-conversations")
    async def test_conversations(workspace_id: str) -> list[dict[str, Any]]:
        return [_conversation(c) for c in store.test_conversations(workspace_id)]

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

    @router.get("/clock")
    async def clock() -> dict[str, Any]:
        return {"now": store.now().isoformat()}

    @router.post("/clock/advance")
    async def advance_clock(body: AdvanceControl) -> dict[str, Any]:
        return {"now": store.advance_clock(body.seconds).isoformat()}

    return router


# --- request handling ------------------------------------------------------------------------


def _enter(
    store: PlatformStore,
    request: Request,
    *,
    workspace_id: str | None = None,
    resource_id: str | None = None,
    body: dict[str, Any] | None = None,
) -> _Call:
    """Authenticate, attribute to a workspace (or the token), count, and apply faults."""
    if (
        store.config.undocumented_endpoints == "absent"
        and _route_name(request) in UNDOCUMENTED_ROUTES
    ):
        # Like a platform without this endpoint: nothing is counted, nothing is checked.
        raise PlatformApiError(errors.NOT_FOUND, "no such endpoint")
    token = store.authenticate(bearer_token(request))
    if body is not None:
        workspace_id = _body_workspace(body)
    if resource_id is not None:
        workspace_id = store.owner_of(resource_id)
    if workspace_id is not None:
        store.workspace(workspace_id)
        store.authorize(token, workspace_id)
    scope = workspace_id if workspace_id is not None else token.key
    store.admit(scope, _route_name(request))
    store.draw_fault()
    return _Call(token, scope)


async def _write(
    store: PlatformStore,
    request: Request,
    call: _Call,
    body: dict[str, Any],
    act: Callable[[], Awaitable[tuple[int, Any]]],
) -> JSONResponse:
    """Run a write once per Idempotency-Key: a repeat gets the first answer back."""
    key = request.headers.get("idempotency-key")
    fingerprint = ""
    if key:
        canonical = json.dumps(
            [request.method, request.url.path, str(request.url.query), body], sort_keys=True
        )
        fingerprint = hashlib.sha256(canonical.encode()).hexdigest()
        stored = store.replay(call.scope, key, fingerprint)
        if stored is not None:
            return JSONResponse(
                stored.body, status_code=stored.status, headers={"Idempotent-Replayed": "true"}
            )
    status, answer = await act()
    answer = {"data": answer}  # documented: a single object always comes wrapped
    if key:
        store.remember(call.scope, key, fingerprint, status, answer)
    return JSONResponse(answer, status_code=status)


def _page(
    request: Request, items: list[_Item], render: Callable[[_Item], dict[str, Any]]
) -> JSONResponse:
    raw_limit = request.query_params.get("limit")
    try:
        limit = int(raw_limit) if raw_limit is not None else None
    except ValueError:
        raise PlatformApiError(errors.BAD_REQUEST, "limit must be an integer") from None
    page: Page[_Item] = paginate(items, limit, request.query_params.get("cursor") or None)
    return JSONResponse(
        {
            "data": [render(item) for item in page.items],
            "next_cursor": page.next_cursor,
            "has_more": page.has_more,
        }
    )


# Endpoints this project assumes (docs/platform-api.md "Assumed endpoints"): not in the
# public reference. GET /v1/workspaces (the list) is documented and not among them.
UNDOCUMENTED_ROUTES = frozenset(
    {
        "POST /v1/workspaces",
        "GET /v1/workspaces/{workspace_id}",
        "GET /v1/workspaces/{workspace_id}/usage",
        "GET /v1/workspaces/{workspace_id}/members",
        "POST /v1/workspaces/{workspace_id}/members",
        "PATCH /v1/workspaces/{workspace_id}/members/{member_id}",
        "GET /v1/workspaces/{workspace_id}/roles",
        "GET /v1/workspaces/{workspace_id}/secrets",
        "PUT /v1/workspaces/{workspace_id}/secrets/{name}",
        "DELETE /v1/workspaces/{workspace_id}/secrets/{name}",
        "GET /v1/workspaces/{workspace_id}/pms-connection",
        "PUT /v1/workspaces/{workspace_id}/pms-connection",
        "GET /v1/listings",
        "POST /v1/agents/{agent_id}/test-conversations",
        "GET /v1/agents/{agent_id}/test-conversations",
    }
)


def _route_name(request: Request) -> str:
    route = request.scope.get("route")
    path = getattr(route, "path", request.url.path)
    return f"{request.method} {path}"


def _required_query(request: Request, name: str) -> str:
    value = request.query_params.get(name)
    if not value:
        raise PlatformApiError(errors.BAD_REQUEST, f"{name} required")
    return value


def _body_workspace(body: dict[str, Any]) -> str:
    workspace_id = body.get("workspace_id")
    if not isinstance(workspace_id, str) or not workspace_id:
        raise PlatformApiError(errors.VALIDATION, "workspace_id required")
    return workspace_id


async def _json_body(request: Request) -> dict[str, Any]:
    return json_object(
        await request.body(),
        not_json=lambda: PlatformApiError(errors.BAD_REQUEST, "the body is not valid JSON"),
        not_object=lambda: PlatformApiError(errors.BAD_REQUEST, "the body must be a JSON object"),
    )


def _parse(model: type[_Model], body: dict[str, Any]) -> _Model:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        message = "unknown field" if first["type"] == "extra_forbidden" else first["msg"]
        raise PlatformApiError(errors.VALIDATION, f"{where}: {message}") from None


# --- serialisation ---------------------------------------------------------------------------


def _workspace(w: Workspace) -> dict[str, Any]:
    return {"id": w.id, "name": w.name, "slug": w.slug, "created_at": w.created_at.isoformat()}


def _usage(u: WorkspaceUsage) -> dict[str, Any]:
    return {
        "workspace_id": u.workspace_id,
        "usd_spent": str(u.usd_spent),  # a decimal string: money is never a float
        "messages": u.messages,
        "tool_calls": u.tool_calls,
        "as_of": u.as_of.isoformat(),
    }


def _member(m: Member) -> dict[str, Any]:
    return {
        "id": m.id,
        "workspace_id": m.workspace_id,
        "email": m.email,
        "name": m.name,
        "role": m.role,
        "created_at": m.created_at.isoformat(),
    }


def _secret(s: Secret) -> dict[str, Any]:
    # Never the value: secrets are write-only over the API.
    return {
        "name": s.name,
        "created_at": s.created_at.isoformat(),
        "updated_at": s.updated_at.isoformat(),
    }


def _tool(t: CustomTool) -> dict[str, Any]:
    return {
        "id": t.id,
        "workspace_id": t.workspace_id,
        "name": t.name,
        "description": t.description,
        "language": t.language,
        "code": t.code,
        "parameters": t.parameters,
        "execution_message_description": t.execution_message_description,
        "enable_globally": t.enable_globally,
        # The emulator refuses code it cannot store, so what it holds is validated.
        "validated": True,
        "version": t.version,
        "created_at": t.created_at.isoformat(),
    }


def _skill(s: Skill) -> dict[str, Any]:
    return {
        "id": s.id,
        "workspace_id": s.workspace_id,
        "name": s.name,
        "display_name": s.display_name,
        "description": s.description,
        "body": s.body,
        "allowed_tools": s.allowed_tools,
        "tags": s.tags,
        "enabled": s.enabled,
        "created_at": s.created_at.isoformat(),
        "updated_at": s.updated_at.isoformat(),
    }


def _agent(a: Agent) -> dict[str, Any]:
    return {
        "id": a.id,
        "workspace_id": a.workspace_id,
        "name": a.name,
        "description": a.description,
        "version": "v2",
        "instructions": a.instructions,
        "guardrails": [{"id": f"guardrail_{n}", **g} for n, g in enumerate(a.guardrails, start=1)],
        "operation_mode": a.operation_mode,
        "autopilot_schedule": None,
        "custom_response_delay_ms": None,
        "auto_mark_as_done": False,
        "response_language": a.response_language,
        "responseflow": False,
        "output_schema": [],
        "skill_ids": a.skill_ids,
        "enabled": a.enabled,
        "triggers": [_trigger(a, n, t) for n, t in enumerate(a.triggers)],
        "created_at": a.created_at.isoformat(),
        "updated_at": a.updated_at.isoformat(),
    }


def _trigger(a: Agent, index: int, t: dict[str, Any]) -> dict[str, Any]:
    # A stable 32-character id per agent and position (the store keeps triggers as given).
    trigger_id = "tr" + hashlib.sha256(f"{a.id}:{index}".encode()).hexdigest()[:30]
    return {
        "id": trigger_id,
        "workspace_id": a.workspace_id,
        "description": "",
        **t,
        "created_at": a.created_at.isoformat(),
        "updated_at": a.updated_at.isoformat(),
    }


def _listing(li: Listing) -> dict[str, Any]:
    return {
        "id": li.id,
        "workspace_id": li.workspace_id,
        "name": li.name,
        "external_id": li.external_id,
        "pms": {"provider": "kross", "hotel_id": li.hotel_id, "id_room_type": li.id_room_type},
        "status": "active",
    }


def _node(n: KbNode, ancestors: list[str] | None = None) -> dict[str, Any]:
    chain = ancestors or []
    return {
        "id": n.id,
        "workspace_id": n.workspace_id,
        "title": n.title,
        "body": n.body,
        "chunk_body": not n.is_directory,
        "entity_ids": n.entity_ids,
        "parent_id": n.parent_id,
        "ancestors": chain,
        "depth": len(chain),
        "source": "api",
        "source_type": None,
        "source_id": None,
        "is_directory": n.is_directory,
        "metadata": n.metadata,
        "enabled": n.enabled,
        "created_by": None,
        "embed_status": "embedded",
        "chunk_count": 0 if n.is_directory else 1,
        "version": n.index_version,
        "tags": [],
        "created_at": n.created_at.isoformat(),
        "updated_at": n.updated_at.isoformat(),
        # Not in the reference: the emulator's own proof of re-indexing (docs/platform-api.md).
        "indexed_at": n.indexed_at.isoformat(),
    }


def _run_result(r: ToolRun) -> dict[str, Any]:
    # The documented run result; a failing tool is success false with the reason in error.
    return {
        "success": r.success,
        "message": r.message,
        "result": {"message": r.output_message, "rawData": r.raw_data} if r.success else None,
        "error": None if r.success else r.message,
        "logs": [],
        "run_time_ms": r.duration_ms,
    }


def _run(r: ToolRun) -> dict[str, Any]:
    return {
        "id": r.id,
        "tool_id": r.tool_id,
        "tool_name": r.tool_name,
        "parameters": r.parameters,
        "at": r.at.isoformat(),
        "success": r.success,
        "message": r.message,
        "rawData": r.raw_data,
        "duration_ms": r.duration_ms,
    }


def _conversation(c: AgentConversation) -> dict[str, Any]:
    return {
        "id": c.id,
        "workspace_id": c.workspace_id,
        "agent_id": c.agent_id,
        "message": c.message,
        "reply": c.reply,
        "tool_calls": [
            {
                "name": call.name,
                "parameters": call.parameters,
                "success": call.success,
                "message": call.message,
            }
            for call in c.tool_calls
        ],
        "created_at": c.at.isoformat(),
    }


def _connection(connection: Any, healthy: bool) -> dict[str, Any]:
    # The password is never echoed back, not even by a control.
    if connection is None:
        return {"connected": False, "healthy": False, "hotel_id": None, "username": None}
    return {
        "connected": True,
        "healthy": healthy,
        "hotel_id": connection.hotel_id,
        "username": connection.username,
    }


def _api_connection(connection: Any, healthy: bool) -> dict[str, Any]:
    # The /v1 shape: never the password (nor an api key).
    return {
        "provider": "kross",
        "hotel_id": connection.hotel_id,
        "username": connection.username,
        "healthy": healthy,
    }


def _install_error_handlers(app: FastAPI) -> None:
    def render(spec: errors.ErrorSpec, message: str | None = None) -> JSONResponse:
        return JSONResponse(PlatformApiError(spec, message).body(), status_code=spec.status)

    @app.exception_handler(PlatformApiError)
    async def platform_error(request: Request, exc: PlatformApiError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.spec.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(part) for part in first.get("loc", ())) or "body"
        return render(errors.VALIDATION, f"{where}: {first.get('msg', 'invalid')}")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            return render(errors.NOT_FOUND, "no such endpoint")
        if exc.status_code == 405:
            return render(errors.METHOD_NOT_ALLOWED)
        return render(errors.ErrorSpec("http", exc.status_code, str(exc.detail)))

    # An emulator bug still answers with the error body, never a bare traceback page.
    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        return render(errors.INTERNAL)
