"""The ``/v1`` routes, resource by resource, made of the endpoint shapes of ``handlers.py``.

Custom tools, skills, agents and knowledge nodes share one shape (list by
``?workspace_id=``, create, read, change, delete by id): each is a row of
:data:`RESOURCES` that :func:`mount` turns into routes. What a workspace carries (members, roles,
secrets, usage, the booking-system connection) is addressed through the workspace's
path and declared in :func:`workspace_routes`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from pmsgate.sandbox.assistant import errors, wire
from pmsgate.sandbox.assistant.bodies import (
    AgentBody,
    AgentPatch,
    Body,
    ConversationBody,
    KrossConnectionBody,
    MemberBody,
    NodeBody,
    NodePatch,
    RoleBody,
    RunBody,
    SecretBody,
    SkillBody,
    ToolBody,
    ToolPatch,
    WorkspaceBody,
)
from pmsgate.sandbox.assistant.errors import AssistantApiError
from pmsgate.sandbox.assistant.handlers import (
    ACCOUNT,
    IN_BODY,
    IN_PATH,
    IN_QUERY,
    Endpoint,
    Render,
    Target,
    by_id,
    create,
    delete,
    enter,
    json_body,
    page,
    parse,
    read_one,
    read_page,
    run_write,
    update,
    write,
)
from pmsgate.sandbox.assistant.store import AssistantStore

WORKSPACE = "/workspaces/{workspace_id}"


def api_router(store: AssistantStore) -> APIRouter:
    """Every ``/v1`` route of the emulator."""
    router = APIRouter(prefix="/v1")
    add = _adder(router)
    workspace_routes(router, store)
    # Before the tools' own paths, which would take "runtimes" for an id.
    add("GET", "/custom-tools/runtimes", read_one(store, ACCOUNT, lambda _: store.runtimes(), list))
    for resource in RESOURCES:
        mount(router, store, resource)
    run_routes(router, store)
    add("GET", "/kb/nodes", _list_nodes(store))
    return router


@dataclass(frozen=True)
class Resource:
    """A resource of the common shape, named by its noun (``tool``, ``skill`` …).

    The store's ``<noun>s`` lists it by ``?workspace_id=``, ``create_<noun>``,
    ``<noun>``, ``update_<noun>`` and ``delete_<noun>`` create, read, change and
    delete one; ``wire.<noun>`` renders it; one object's path parameter is ``<noun>_id``.
    """

    path: str
    noun: str
    new: type[Body]
    patch: type[Body] | None = None
    deletable: bool = False
    listed: bool = True  # False: the list has its own route
    created_in: Target = IN_BODY


RESOURCES = (
    Resource("/custom-tools", "tool", ToolBody, ToolPatch, deletable=True),
    Resource("/skills", "skill", SkillBody),
    Resource("/agents", "agent", AgentBody, AgentPatch),
    # Nodes are created under ?workspace_id= and listed with filters (_list_nodes).
    Resource(
        "/kb/nodes", "node", NodeBody, NodePatch, deletable=True, listed=False, created_in=IN_QUERY
    ),
)


def mount(router: APIRouter, store: AssistantStore, resource: Resource) -> None:
    """The routes ``resource`` allows, in the public reference's paths."""
    add, noun, path = _adder(router), resource.noun, resource.path
    render: Render = getattr(wire, noun)
    item, target = f"{path}/{{{noun}_id}}", by_id(f"{noun}_id")
    if resource.listed:
        add("GET", path, read_page(store, IN_QUERY, getattr(store, f"{noun}s"), render))
    made = create(resource.new, getattr(store, f"create_{noun}"), render)
    add("POST", path, write(store, resource.created_in, made))
    add("GET", item, read_one(store, target, getattr(store, noun), render))
    if resource.patch is not None:
        changed = update(resource.patch, getattr(store, f"update_{noun}"), render)
        add("PATCH", item, write(store, target, changed))
    if resource.deletable:
        removed = delete(getattr(store, f"delete_{noun}"))
        add("DELETE", item, write(store, target, removed, with_body=False))


def workspace_routes(router: APIRouter, store: AssistantStore) -> None:
    """Workspaces and what hangs on one: usage, members, roles, secrets, the connection."""
    add = _adder(router)
    add("GET", "/workspaces", _list_workspaces(store))
    add("POST", "/workspaces", _create_workspace(store))
    add("GET", WORKSPACE, read_one(store, IN_PATH, store.workspace, wire.workspace))
    # Assumed API (docs/assistant-api.md): the platform's usage read is not public.
    add("GET", f"{WORKSPACE}/usage", read_one(store, IN_PATH, store.usage, wire.usage))
    add("GET", f"{WORKSPACE}/members", read_page(store, IN_PATH, store.members, wire.member))

    async def add_member(
        request: Request, workspace_id: str, body: dict[str, Any]
    ) -> tuple[int, Any]:
        req = parse(MemberBody, body)
        return 201, wire.member(store.add_member(workspace_id, req.email, req.role, req.name))

    async def set_role(
        request: Request, workspace_id: str, body: dict[str, Any]
    ) -> tuple[int, Any]:
        member_id, role = request.path_params["member_id"], parse(RoleBody, body).role
        return 200, wire.member(store.set_member_role(workspace_id, member_id, role))

    add("POST", f"{WORKSPACE}/members", write(store, IN_PATH, add_member))
    add("PATCH", f"{WORKSPACE}/members/{{member_id}}", write(store, IN_PATH, set_role))
    add("GET", f"{WORKSPACE}/roles", _list_roles(store))
    secret_routes(router, store)
    connection_routes(router, store)


def secret_routes(router: APIRouter, store: AssistantStore) -> None:
    """A workspace's secrets: names listed, values written and never read back."""
    add = _adder(router)

    async def set_secret(
        request: Request, workspace_id: str, body: dict[str, Any]
    ) -> tuple[int, Any]:
        name, value = request.path_params["name"], parse(SecretBody, body).value
        secret, created = store.set_secret(workspace_id, name, value)
        return (201 if created else 200), wire.secret(secret)

    async def delete_secret(
        request: Request, workspace_id: str, body: dict[str, Any]
    ) -> tuple[int, Any]:
        name = request.path_params["name"]
        store.delete_secret(workspace_id, name)
        return 200, {"name": name, "deleted": True}

    add("GET", f"{WORKSPACE}/secrets", read_page(store, IN_PATH, store.secrets, wire.secret))
    add("PUT", f"{WORKSPACE}/secrets/{{name}}", write(store, IN_PATH, set_secret))
    secret_delete = write(store, IN_PATH, delete_secret, with_body=False)
    add("DELETE", f"{WORKSPACE}/secrets/{{name}}", secret_delete)


def connection_routes(router: APIRouter, store: AssistantStore) -> None:
    """The booking-system connection (assumed; docs/assistant-api.md "Listings") and listings."""
    add = _adder(router)

    def connection(workspace_id: str) -> dict[str, Any]:
        held, healthy = store.pms_connection(workspace_id)
        if held is None:
            raise AssistantApiError(
                errors.NOT_FOUND, "the workspace has no booking-system connection"
            )
        return wire.api_connection(held, healthy)

    async def set_connection(
        request: Request, workspace_id: str, body: dict[str, Any]
    ) -> tuple[int, Any]:
        req = parse(KrossConnectionBody, body)
        if req.provider != "kross":
            raise AssistantApiError(errors.VALIDATION, "provider: only kross is supported")
        store.set_kross_connection(workspace_id, req.hotel_id, req.username, req.password)
        return 200, connection(workspace_id)

    add("GET", f"{WORKSPACE}/pms-connection", read_one(store, IN_PATH, connection, dict))
    add("PUT", f"{WORKSPACE}/pms-connection", write(store, IN_PATH, set_connection))
    # Derived from the booking-system emulator through the connection.
    add("GET", "/listings", read_page(store, IN_QUERY, store.listings, wire.listing))


def run_routes(router: APIRouter, store: AssistantStore) -> None:
    """What runs: a custom tool, and an agent's test conversation (emulator-only)."""
    add = _adder(router)

    async def run(request: Request, tool_id: str, body: dict[str, Any]) -> tuple[int, Any]:
        outcome = await store.run_tool(tool_id, parse(RunBody, body).parameters)
        return 200, wire.run_result(outcome)

    async def talk(request: Request, agent_id: str, body: dict[str, Any]) -> tuple[int, Any]:
        message = parse(ConversationBody, body).message
        return 201, wire.conversation(await store.run_test_conversation(agent_id, message))

    def conversations(agent_id: str) -> Sequence[Any]:
        return store.test_conversations(store.agent(agent_id).workspace_id, agent_id)

    add("POST", "/custom-tools/{tool_id}/run", write(store, by_id("tool_id"), run))
    talks, agent = "/agents/{agent_id}/test-conversations", by_id("agent_id")
    add("POST", talks, write(store, agent, talk))
    add("GET", talks, read_page(store, agent, conversations, wire.conversation))


def _list_nodes(store: AssistantStore) -> Endpoint:
    """Knowledge nodes of a workspace, of a listing, under a parent, of one kind."""

    async def endpoint(request: Request) -> JSONResponse:
        _, workspace_id = IN_QUERY.enter(store, request)
        query = request.query_params
        is_directory = query.get("is_directory")
        if is_directory not in (None, "true", "false"):
            raise AssistantApiError(errors.BAD_REQUEST, "is_directory must be true or false")
        nodes = store.nodes(
            workspace_id,
            listing_id=query.get("listing_id") or None,
            parent_id=query.get("parent_id") or None,
            is_directory=None if is_directory is None else is_directory == "true",
        )
        return page(request, nodes, wire.node)

    return endpoint


def _list_workspaces(store: AssistantStore) -> Endpoint:
    async def endpoint(request: Request) -> JSONResponse:
        call = enter(store, request)
        return page(request, store.workspaces(call.token), wire.workspace)

    return endpoint


def _create_workspace(store: AssistantStore) -> Endpoint:
    async def endpoint(request: Request) -> JSONResponse:
        call = enter(store, request)
        if call.token.workspace_ids is not None:
            raise AssistantApiError(errors.FORBIDDEN, "a workspace token cannot create workspaces")
        body = await json_body(request)

        async def act() -> tuple[int, Any]:
            req = parse(WorkspaceBody, body)
            return 201, wire.workspace(store.create_workspace(req.name, req.slug))

        return await run_write(store, request, call, body, act)

    return endpoint


def _list_roles(store: AssistantStore) -> Endpoint:
    async def endpoint(request: Request) -> JSONResponse:
        IN_PATH.enter(store, request)
        roles = [{"name": name, "description": text} for name, text in store.roles()]
        return JSONResponse({"data": roles, "next_cursor": None, "has_more": False})

    return endpoint


def _adder(router: APIRouter) -> Callable[[str, str, Endpoint], None]:
    def add(method: str, path: str, endpoint: Endpoint) -> None:
        router.add_api_route(path, endpoint, methods=[method])

    return add
