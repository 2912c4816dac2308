"""How every ``/v1`` request is handled, and the endpoint shapes the routes are made of.

The pipeline (docs/assistant-api.md): :func:`enter` authenticates, attributes the
request to a workspace (or to the token), counts it against the 120/min window and
applies injected faults; :func:`run_write` replays a write's answer for a repeated
``Idempotency-Key``; :func:`page` cuts a list into ``{data, next_cursor, has_more}``.

A route names where its workspace comes from (a :class:`Target`) and what it does;
:func:`read_one`, :func:`read_page` and :func:`write` make the endpoint, so each
resource's routes are a table (``routes.py``) rather than copies of one handler.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from pmsgate.sandbox import core
from pmsgate.sandbox.assistant import errors
from pmsgate.sandbox.assistant.bodies import Body
from pmsgate.sandbox.assistant.errors import AssistantApiError
from pmsgate.sandbox.assistant.store import ApiToken, AssistantStore, Page, paginate
from pmsgate.sandbox.core import bearer_token, validated

_Model = TypeVar("_Model", bound=BaseModel)

Endpoint = Callable[[Request], Awaitable[JSONResponse]]
# A write's work: (request, the key its target names, the JSON body) -> (status, answer).
Act = Callable[[Request, str, dict[str, Any]], Awaitable[tuple[int, Any]]]
Render = Callable[[Any], Any]

# Endpoints this project assumes (docs/assistant-api.md "Assumed endpoints"): not in the
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


@dataclass(frozen=True)
class Call:
    """An authenticated, admitted request and the scope it was counted against."""

    token: ApiToken
    scope: str


@dataclass(frozen=True)
class Target:
    """Where a request names what it acts on, and so the workspace it is counted for.

    ``account``: nothing (the token's own budget); ``workspace``: the workspace id in
    the path parameter ``param``; ``query``: ``?workspace_id=``; ``body``: the body's
    ``workspace_id``; ``object``: the id of a tool, skill, agent or node in the path
    parameter ``param`` (its workspace is the one that owns it).
    """

    where: Literal["account", "workspace", "query", "body", "object"]
    param: str = ""

    def enter(self, store: AssistantStore, request: Request, body: Any = None) -> tuple[Call, str]:
        """:func:`enter` for this target; the key it names ("" for the account)."""
        if self.where == "body":
            return enter(store, request, body=body), _body_workspace(body)
        if self.where == "query":
            workspace_id = required_query(request, "workspace_id")
            return enter(store, request, workspace_id=workspace_id), workspace_id
        if self.where == "account":
            return enter(store, request), ""
        key = request.path_params[self.param]
        if self.where == "object":
            return enter(store, request, resource_id=key), key
        return enter(store, request, workspace_id=key), key


ACCOUNT = Target("account")
IN_QUERY = Target("query")
IN_BODY = Target("body")
IN_PATH = Target("workspace", "workspace_id")


def by_id(param: str) -> Target:
    """The target of a route on one object: its id is the path parameter ``param``."""
    return Target("object", param)


# --- the endpoint shapes -----------------------------------------------------------------------


def read_one(
    store: AssistantStore, target: Target, get: Callable[[str], Any], render: Render
) -> Endpoint:
    """``GET``: one object, ``{"data": {...}}``."""

    async def endpoint(request: Request) -> JSONResponse:
        _, key = target.enter(store, request)
        return JSONResponse({"data": render(get(key))})

    return endpoint


def read_page(
    store: AssistantStore, target: Target, items: Callable[[str], Sequence[Any]], render: Render
) -> Endpoint:
    """``GET``: a list, one page at a time."""

    async def endpoint(request: Request) -> JSONResponse:
        _, key = target.enter(store, request)
        return page(request, items(key), render)

    return endpoint


def write(store: AssistantStore, target: Target, act: Act, *, with_body: bool = True) -> Endpoint:
    """A write, once per ``Idempotency-Key``; its answer wrapped as ``{"data": {...}}``.

    A target in the body reads the body first; any other is entered before the body is
    read (so a refused token is refused before a malformed body is noticed).
    """

    async def endpoint(request: Request) -> JSONResponse:
        if target.where == "body":
            body = await json_body(request)
            call, key = target.enter(store, request, body)
        else:
            call, key = target.enter(store, request)
            body = await json_body(request) if with_body else {}
        return await run_write(store, request, call, body, lambda: act(request, key, body))

    return endpoint


def create(model: type[Body], make: Callable[..., Any], render: Render) -> Act:
    """The act of a ``POST`` that creates an object in the key's workspace (201)."""

    async def act(request: Request, key: str, body: dict[str, Any]) -> tuple[int, Any]:
        return 201, render(make(key, **parse(model, body).fields()))

    return act


def update(
    model: type[BaseModel], change: Callable[[str, dict[str, Any]], Any], render: Render
) -> Act:
    """The act of a ``PATCH``: only the fields sent change."""

    async def act(request: Request, key: str, body: dict[str, Any]) -> tuple[int, Any]:
        return 200, render(change(key, parse(model, body).model_dump(exclude_unset=True)))

    return act


def delete(remove: Callable[[str], None]) -> Act:
    """The act of a ``DELETE`` of one object."""

    async def act(request: Request, key: str, body: dict[str, Any]) -> tuple[int, Any]:
        remove(key)
        return 200, {"id": key, "deleted": True}

    return act


# --- the pipeline ------------------------------------------------------------------------------


def enter(
    store: AssistantStore,
    request: Request,
    *,
    workspace_id: str | None = None,
    resource_id: str | None = None,
    body: dict[str, Any] | None = None,
) -> Call:
    """Authenticate, attribute to a workspace (or the token), count, and apply faults."""
    if (
        store.config.undocumented_endpoints == "absent"
        and route_name(request) in UNDOCUMENTED_ROUTES
    ):
        # Like a platform without this endpoint: nothing is counted, nothing is checked.
        raise AssistantApiError(errors.NO_ENDPOINT)
    token = store.authenticate(bearer_token(request))
    if body is not None:
        workspace_id = _body_workspace(body)
    if resource_id is not None:
        workspace_id = store.owner_of(resource_id)
    if workspace_id is not None:
        store.workspace(workspace_id)
        store.authorize(token, workspace_id)
    scope = workspace_id if workspace_id is not None else token.key
    store.admit(scope, route_name(request))
    store.draw_fault()
    return Call(token, scope)


async def run_write(
    store: AssistantStore,
    request: Request,
    call: Call,
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


def page(request: Request, items: Sequence[Any], render: Render) -> JSONResponse:
    """The page of ``items`` the query's ``limit`` and ``cursor`` ask for."""
    raw_limit = request.query_params.get("limit")
    try:
        limit = int(raw_limit) if raw_limit is not None else None
    except ValueError:
        raise AssistantApiError(errors.BAD_REQUEST, "limit must be an integer") from None
    chosen: Page[Any] = paginate(items, limit, request.query_params.get("cursor") or None)
    return JSONResponse(
        {
            "data": [render(item) for item in chosen.items],
            "next_cursor": chosen.next_cursor,
            "has_more": chosen.has_more,
        }
    )


def route_name(request: Request) -> str:
    """``METHOD /template`` of the route that matched (what the stats count)."""
    route = request.scope.get("route")
    path = getattr(route, "path", request.url.path)
    return f"{request.method} {path}"


def required_query(request: Request, name: str) -> str:
    """A query parameter that must be there, or 400."""
    value = request.query_params.get(name)
    if not value:
        raise AssistantApiError(errors.BAD_REQUEST, f"{name} required")
    return value


def _body_workspace(body: dict[str, Any]) -> str:
    workspace_id = body.get("workspace_id")
    if not isinstance(workspace_id, str) or not workspace_id:
        raise AssistantApiError(errors.VALIDATION, "workspace_id required")
    return workspace_id


async def json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object, or 400."""
    return await core.json_body(
        request, lambda message: AssistantApiError(errors.BAD_REQUEST, message)
    )


def parse(model: type[_Model], body: dict[str, Any]) -> _Model:
    """The body as ``model``, or 422 naming the first field at fault."""
    return validated(
        model,
        body,
        lambda message: AssistantApiError(errors.VALIDATION, message),
        unknown_field="unknown field",
    )
