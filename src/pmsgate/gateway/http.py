"""The gateway's HTTP API: ``/v1/tools`` and ``/v1/operations`` for callers with a gateway key.

The tool and operation routes read the gateway's services from the request
(:func:`~pmsgate.gateway.context.gateway_services`: a dependency FastAPI resolves costs
more than a cached tool's own work); the others take them as :data:`GatewayServicesDep`.
Each route checks the key's scope (:mod:`pmsgate.gateway.scopes`) right after the name
and before the body: a call outside the key's scopes is a 403 that never reaches the
limiter, the idempotency records or the booking system.

Writes are recorded in the audit trail by :class:`~pmsgate.gateway.operations.Operations`,
named by the calling key's display prefix. That prefix is the presented key's first
characters (:func:`~pmsgate.gateway.keys.display_prefix`, the same function that made the
stored one), so naming the caller costs no database read. A write refused for want of
its scope is recorded here, as ``refused`` (reads, cached or not, are never recorded).

The documented tool and operation routes are answered by exact path ahead of FastAPI's
router (:func:`front_routes`, served by :mod:`pmsgate.gateway.http_front`); they stay
declared here, so /openapi.json is FastAPI's. A tool's answer is sent as the bytes kept from
the last call with the same body while the reads it was made from stand
(:mod:`pmsgate.gateway.rendered`).

Every tool and operation call that reached a facility (its key authenticated) is logged in
the facility's tool-call log (:mod:`pmsgate.gateway.call_log`): outcome, error code, cache
or upstream, answer age, latency, the key's display prefix; an operation's payload never.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from fastapi import APIRouter, Header, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import ClientDisconnect

from pmsgate.audit.actions import Actor
from pmsgate.boundary import bounded_schema, loads_json, refuse_control_characters
from pmsgate.catalogue.loader import load_tools
from pmsgate.catalogue.tools import ToolDefinition
from pmsgate.errors import Forbidden, InvalidInput
from pmsgate.gateway.call_log import CallLog, CallStart, argument_shape
from pmsgate.gateway.context import GatewayServicesDep, gateway_services
from pmsgate.gateway.http_front import FrontRoute
from pmsgate.gateway.keys import display_prefix, hash_key
from pmsgate.gateway.oauth_tokens import bearer_credential
from pmsgate.gateway.operations import (
    MAX_KEY_LENGTH,
    OperationAnswer,
    OperationReadAnswer,
    OperationWriteAnswer,
    payload_schema,
)
from pmsgate.gateway.scopes import TOOLS_READ, operation_scope
from pmsgate.gateway.tools import stay_date_years
from pmsgate.integrations.kross.client import TOKEN_OPERATION
from pmsgate.integrations.kross.operations import load_operations
from pmsgate.openapi import json_body, register_body_bounds

router = APIRouter(prefix="/v1", tags=["gateway"])


def bearer_key(authorization: str | None) -> str:
    """The gateway key (or OAuth access token) from an ``Authorization: Bearer`` header, or a
    401 (:func:`~pmsgate.gateway.oauth_tokens.bearer_credential`)."""
    return bearer_credential(authorization)


async def _json_object(request: Request) -> dict[str, Any]:
    """The body as a JSON object, checked by the input rules (pmsgate.boundary)."""
    return _json_object_of(await request.body())


async def _read_body(request: Request) -> bytes:
    """The whole body, read straight from ``receive`` (what ``request.body()`` reads, without
    its stream generator: a tool call's body is one message of a few bytes)."""
    chunks: list[bytes] = []
    while True:
        message = await request.receive()
        if message["type"] == "http.request":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)
        elif message["type"] == "http.disconnect":
            raise ClientDisconnect()


def _json_object_of(raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        return {}
    body = loads_json(raw)
    if not isinstance(body, dict):
        raise InvalidInput(
            "The body must be a JSON object.", code="invalid_json", hint="Wrap arguments in {…}."
        )
    return body


class ListedTool(BaseModel):
    """A tool as GET /v1/tools lists it."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str
    input_schema: dict[str, Any] = Field(description="The JSON Schema of its arguments.")


class ToolListing(BaseModel):
    """Every tool of the catalogue, with the schema of its arguments."""

    model_config = ConfigDict(extra="forbid")

    tools: list[ListedTool]


@router.get(
    "/tools",
    response_model=None,
    responses={200: {"model": ToolListing, "description": "The tools."}},
)
async def list_tools(services: GatewayServicesDep) -> dict[str, Any]:
    """The six tools with their JSON Schemas."""
    tools = services.tools
    return {
        "tools": [
            {"name": t.name, "description": t.description, "input_schema": tools.input_schema(name)}
            for name, t in tools.definitions.items()
        ]
    }


async def call_tool(
    name: str,
    request: Request,
    services: GatewayServicesDep,
    authorization: str | None = Header(default=None),
) -> JSONResponse:
    """Call one tool for the key's facility."""
    tool = services.tools.definition(name)
    # A gateway key, or an OAuth access token for this server (pmsgate.gateway.oauth_tokens).
    caller = await services.bearer.authenticate(authorization, TOOLS_READ, request.scope)
    facility = caller.facility
    # Logged from here on: the call reached a facility (pmsgate.gateway.call_log).
    call = services.gateway.call_log.start(
        facility.id, kind="tool", name=name, transport="http", key_prefix=caller.prefix
    )
    outcome = "error"
    try:
        body = await _read_body(request)
        # The answer kept from an earlier call with this body, while its reads stand
        # (pmsgate.gateway.rendered); else made, rendered and kept.
        rendered = await services.tools.kept(facility, name, body)
        if rendered is None:
            arguments = _json_object_of(body)
            call.arguments = argument_shape(tool, arguments)
            rendered = await services.tools.render(facility, name, arguments, body)
        else:
            call.arguments = argument_shape(tool, rendered.arguments)
        outcome = "stale" if rendered.meta.get("stale") else "ok"
        services.gateway.call_log.answered(call, rendered.meta)
        return RenderedJSON(rendered.body)
    except BaseException as error:
        services.gateway.call_log.failed(call, error)
        raise
    finally:
        services.metrics.tool_called(name, outcome)


class RenderedJSON(JSONResponse):
    """A JSON answer whose body is already rendered (the bytes ``JSONResponse`` would make)."""

    def render(self, content: Any) -> bytes:
        assert isinstance(content, bytes)
        return content


async def call_operation(
    path: str,
    request: Request,
    services: GatewayServicesDep,
    authorization: str | None = Header(default=None),
    idempotency_key: str | None = Header(default=None),
) -> JSONResponse:
    """Call one allowed booking-system operation (writes need an Idempotency-Key)."""
    # Unknown and out-of-scope operations are refused before anything else, then a key
    # without this operation's scope.
    operation = services.gateway.operation(path)
    if operation.name == TOKEN_OPERATION:
        # No scope grants it, so it is refused as what it is (as Operations.call would),
        # before the key: no key of any scope may call it.
        raise Forbidden(
            "Tokens are handled by the gateway; auth/get-token cannot be called.",
            code="operation_not_allowed",
            hint="Call the operation you need; the gateway authenticates for you.",
        )
    try:
        caller = await services.bearer.authenticate(
            authorization, operation_scope(operation), request.scope
        )
    except Forbidden as refusal:
        if operation.is_write and refusal.code == "scope_missing":
            raw_key = bearer_key(authorization)
            await services.operations.refused_write(
                key_prefix=display_prefix(raw_key),
                key_hash=hash_key(raw_key),
                name=operation.name,
                idempotency_key=idempotency_key,
                error=refusal,
            )
        raise
    facility, prefix = caller.facility, caller.prefix
    call_log = services.gateway.call_log
    # An operation's payload is never logged: only its name, outcome and freshness.
    call = call_log.start(
        facility.id, kind="operation", name=operation.name, transport="http", key_prefix=prefix
    )
    outcome = "error"
    try:
        payload = await _json_object(request)
        answer = await services.operations.call(
            facility,
            path,
            payload,
            idempotency_key,
            caller=Actor.gateway_key(prefix),
        )
        outcome = "replayed" if answer.replayed else "ok"
        _log_operation_answer(call_log, call, operation.is_write, answer)
        headers = {"Idempotent-Replayed": "true"} if answer.replayed else {}
        return JSONResponse(answer.body, status_code=answer.status, headers=headers)
    except BaseException as error:
        call_log.failed(call, error)
        raise
    finally:
        services.metrics.tool_called(f"op:{path}"[:80], outcome)


def _log_operation_answer(
    call_log: CallLog, call: CallStart, write: bool, answer: OperationAnswer
) -> None:
    """An operation's answer in the call log: a read's freshness, a write's status."""
    error = answer.body.get("error") if answer.status >= 400 else None
    code = error.get("code") if isinstance(error, dict) else None
    if answer.replayed:
        call_log.replayed(call, status=answer.status, error_code=code)
    elif write:
        call_log.written(call, status=answer.status, error_code=code)
    else:
        meta = answer.body.get("meta")
        call_log.answered(call, meta if isinstance(meta, dict) else None, status=answer.status)


# --- routes answered ahead of FastAPI's router ------------------------------------------------

# Each documented tool and operation route's path -> the route and the same call with the
# headers read straight from the request (what FastAPI's Header parameters would give: the
# first value). Served by pmsgate.gateway.http_front.HttpFrontMiddleware (front_routes).
_FRONT: dict[str, FrontRoute] = {}


def front_routes(app_dependencies: Sequence[Any]) -> dict[str, FrontRoute]:
    """The documented tool and operation routes, for the app's HTTP layer to answer by exact
    path ahead of FastAPI's router (route matching and dependency resolution cost a cached
    tool call about a third of its CPU: bench/README.md).

    Each is answered as FastAPI would: the app-wide control-character check
    (:func:`~pmsgate.boundary.refuse_control_characters`), then the endpoint with its headers.
    So only when that check is the app's one dependency (``app_dependencies``, e.g.
    ``app.router.dependencies``) and this router adds none; otherwise none (FastAPI answers).
    The routes stay declared on :data:`router`: /openapi.json is FastAPI's, unchanged.
    """
    declared = [getattr(depends, "dependency", None) for depends in app_dependencies]
    if declared != [refuse_control_characters] or router.dependencies:
        return {}
    return dict(_FRONT)


def _front(handler: Callable[[Request], Awaitable[Response]]) -> FrontRoute:
    """The route :data:`router` declared last, answered by ``handler`` after the check."""
    route = router.routes[-1]

    async def answer(request: Request) -> Response:
        await refuse_control_characters(request)
        return await handler(request)

    front = FrontRoute(route=route, handler=answer)
    _FRONT[front.path] = front
    return front


# --- routes: one documented route per tool and per allowed operation ---------------------------
# The bodies are read as raw JSON (above), so FastAPI cannot see their schemas: each tool's
# argument schema (the catalogue's) and each operation's payload model are documented with
# ``openapi_extra``. The routes with a path parameter stay, out of the schema, to answer an
# unknown name (404) exactly as before.


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    """``openapi_extra`` for a JSON body of ``schema``: required when ``{}`` would not do (an
    empty body is read as ``{}``)."""
    needs_something = bool(schema.get("required")) or any(
        key in schema for key in ("anyOf", "oneOf", "minProperties")
    )
    return json_body(schema, required=needs_something)


def _answer(model: type[BaseModel] | None, description: str) -> dict[int | str, Any]:
    """``responses`` documenting a 200 answer of ``model`` (docs/gateway.md, Typed answers).

    Documentation only: these routes answer with bytes already rendered (a tool's kept answer,
    pmsgate.gateway.rendered), which FastAPI does not validate, and the hot path does not
    reach FastAPI at all (pmsgate.gateway.http_front); the test suite checks every answer
    against its model.
    """
    if model is None:
        return {}
    return {200: {"model": model, "description": description}}


def _add_tool_route(tool: ToolDefinition) -> None:
    # The services are read from the request, not declared as a dependency: each dependency
    # FastAPI resolves costs a tool call more than the tool's own work (bench/README.md).
    async def endpoint(
        request: Request,
        authorization: str | None = Header(default=None),
    ) -> JSONResponse:
        return await call_tool(tool.name, request, gateway_services(request), authorization)

    async def direct(request: Request) -> Response:
        authorization = request.headers.get("authorization")
        return await call_tool(tool.name, request, gateway_services(request), authorization)

    router.add_api_route(
        f"/tools/{tool.name}",
        endpoint,
        methods=["POST"],
        summary=f"Tool {tool.name}",
        description=tool.description,
        operation_id=f"tool_{tool.name}",
        openapi_extra=_body(tool.openapi_schema()),
        responses=_answer(tool.answer_model(), "The tool's answer: data, and where it came from."),
    )
    _front(direct)


# A write's Idempotency-Key as the OpenAPI states it: printable ASCII, no space at either end
# (the server takes any printable text of up to MAX_KEY_LENGTH characters; a UUID is the norm).
_KEY_PATTERN = "^[!-~](?:[ -~]*[!-~])?$"


def _add_operation_route(name: str, write: bool) -> None:
    async def read_endpoint(
        request: Request,
        authorization: str | None = Header(default=None),
    ) -> JSONResponse:
        services = gateway_services(request)  # as for the tools (above)
        return await call_operation(name, request, services, authorization, None)

    async def write_endpoint(
        request: Request,
        authorization: str | None = Header(default=None),
        idempotency_key: str = Header(
            description="The same key replays the first answer; a new write, a new key.",
            max_length=MAX_KEY_LENGTH,
            pattern=_KEY_PATTERN,
        ),
    ) -> JSONResponse:
        services = gateway_services(request)
        return await call_operation(name, request, services, authorization, idempotency_key)

    endpoint = write_endpoint if write else read_endpoint

    async def direct(request: Request) -> Response:
        headers = request.headers
        return await call_operation(
            name,
            request,
            gateway_services(request),
            headers.get("authorization"),
            headers.get("idempotency-key"),
        )

    schema = payload_schema(name)
    answer = (
        _answer(OperationWriteAnswer, "The write's answer (a replay: the first one again).")
        if write
        else _answer(OperationReadAnswer, "The booking system's answer, and where it came from.")
    )
    router.add_api_route(
        f"/operations/{name}",
        endpoint,
        methods=["POST"],
        summary=f"{'Write' if write else 'Read'} operation {name}",
        description=call_operation.__doc__,
        operation_id=f"operation_{name.replace('/', '_')}",
        openapi_extra=_body(schema if schema is not None else {"type": "object"}),
        responses=answer,
    )
    _front(direct)


def _bounds_of_today(schema: dict[str, Any], today: dt.date) -> dict[str, Any]:
    """A body schema with what the gateway enforces on ``today`` (pmsgate.boundary)."""
    bounded: dict[str, Any] = bounded_schema(schema, stay_date_years(today))
    return bounded


# Every tool and operation body states its bounds (dates, integers, text), as of the day the
# OpenAPI document is made.
register_body_bounds("/v1/", _bounds_of_today)
for _tool in load_tools().values():
    _add_tool_route(_tool)
for _operation in load_operations():
    if _operation.name != TOKEN_OPERATION:
        _add_operation_route(_operation.name, _operation.is_write)
router.add_api_route("/tools/{name}", call_tool, methods=["POST"], include_in_schema=False)
router.add_api_route(
    "/operations/{path:path}", call_operation, methods=["POST"], include_in_schema=False
)
