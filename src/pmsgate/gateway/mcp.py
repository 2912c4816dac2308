"""The six gateway tools over MCP streamable HTTP (the official ``mcp`` SDK, 2.x).

:func:`create_mcp_app` returns an ASGI app for ``/mcp`` and the lifespan the
parent app must enter. Choices, and why:

- **Low-level server** (``mcp.server.lowlevel.Server``), not ``MCPServer``:
  ``MCPServer`` derives a tool's schema from a Python signature, while the
  catalogue already *is* the schema. Each tool's ``inputSchema`` is exactly
  ``ToolDefinition.input_schema()`` and its description the catalogue's, the
  same as ``GET /v1/tools``; arguments are checked by ``Tools.call``, so HTTP
  and MCP answer a bad argument with the same ``invalid_arguments`` error.
- **Stateless, JSON responses** (``stateless=True, json_response=True``): every
  POST is answered on its own with one JSON body — no ``Mcp-Session-Id``, no
  in-memory session a load balancer would have to pin to one replica, no SSE
  stream held open. The price is no server-to-client requests (sampling,
  elicitation) and no progress notifications, which these tools never need.
  Hence only POST is served: ``GET /mcp`` (the SSE stream for server-initiated
  messages) and ``DELETE /mcp`` (ending a session) answer 405 with
  ``Allow: POST``, as the streamable-HTTP transport specifies for a server that
  offers no such stream — before authentication, so no stream is ever opened.
  Both protocol eras work: the initialize handshake (2025 revisions) and the
  2026-07-28 single-exchange requests, which the SDK's manager routes itself.
- **Authentication** is the HTTP gateway's: every HTTP request (``initialize``
  and ``server/discover`` included) must carry ``Authorization: Bearer <gateway
  key>``; a missing or wrong key is refused before the SDK sees the request,
  with 401 and the service's ``{"error": {code, message, hint}}`` body. Every MCP
  tool is one of the six, so the key must hold the ``tools:read`` scope: ``authenticate``
  (``FacilityService.authenticate``, whose scope defaults to it) refuses any other key
  with 403 ``scope_missing`` before the SDK sees the request (docs/gateway.md, Scopes). The
  key's facility is put in the request's ASGI scope, which the SDK hands to the
  tool handler as ``ctx.request``; a tool call only ever runs for that facility.
  (Not a contextvar: the SDK serves a stateless handshake-era request in a task
  of the session manager's task group, which does not run in the request's
  context.) The key's display prefix travels the same way, for the tool-call log
  (:mod:`pmsgate.gateway.call_log`), where every tool call that reached a facility is logged.
- **Tool results**: the ``ToolAnswer`` as JSON text plus ``structuredContent``
  ``{"data", "meta"}``; a ``PmsgateError`` (unknown tool, bad arguments, an
  upstream failure, ...) becomes a result with ``isError: true`` whose text is
  the error body, so the model can read the hint and correct itself. Anything
  unexpected is logged by type only and answered as ``internal_error``: never a
  stack trace, never an exception message that might carry a payload.
- **DNS-rebinding protection** (the SDK's Host/Origin check) is off unless
  ``allowed_hosts`` is given: it protects unauthenticated local servers from
  web pages on a rebinding domain, but a browser never attaches our bearer key
  on its own, and the gateway is reached through proxies under host names it
  cannot know in advance. The SDK's Content-Type check of POSTs stays on.

Route it with ``app.add_route("/mcp", mcp_app, include_in_schema=False)`` and enter
the lifespan inside the app's own. Not ``app.mount("/mcp", ...)``: a mount answers
only under ``/mcp/`` and redirects ``POST /mcp`` there, and behind a TLS-terminating
proxy that redirect points at ``http://``, which the SDK's client refuses to follow.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import mcp_types as types
import structlog
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from pmsgate.errors import NotFound, PmsgateError, Unauthorized
from pmsgate.gateway.call_log import CallLog, CallStart, argument_shape
from pmsgate.gateway.facilities import FacilityView
from pmsgate.gateway.http import bearer_key
from pmsgate.gateway.keys import display_prefix
from pmsgate.version import build_info

if TYPE_CHECKING:
    # Typing only: the tools pull in the whole gateway stack, which the app wires, not this module.
    from pmsgate.gateway.tools import Tools

log = structlog.get_logger(__name__)

SERVER_NAME = "pmsgate"
INSTRUCTIONS = (
    "Read-only tools over one facility's booking system (the facility of the gateway key). "
    "Dates are year-month-day. Every answer has `data` and `meta`; `meta.stale` true means "
    "the booking system could not be asked just now and the answer is the last good one, "
    "`meta.age_s` seconds old. An error answer carries `error.code`, `error.message` and "
    "`error.hint`; follow the hint."
)

# The ASGI scope key the authenticated facility travels under (one request's scope only).
FACILITY_SCOPE_KEY = "pmsgate.facility"
# ... and the key's display prefix, which names the caller in the tool-call log.
KEY_PREFIX_SCOPE_KEY = "pmsgate.key_prefix"

Authenticate = Callable[[str], Awaitable[FacilityView]]
RecordCall = Callable[[str, str], None]
Lifespan = Callable[[], AbstractAsyncContextManager[None]]


def create_mcp_app(
    *,
    tools_provider: Callable[[], Tools],
    authenticate: Authenticate,
    record_call: RecordCall | None = None,
    call_log_provider: Callable[[], CallLog] | None = None,
    allowed_hosts: Sequence[str] | None = None,
) -> tuple[ASGIApp, Lifespan]:
    """The MCP ASGI app for ``/mcp`` and the lifespan the parent app must enter around it.

    ``call_log_provider`` gives the process's tool-call log (None: calls are not logged).
    """
    server = build_server(tools_provider, record_call, call_log_provider)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=allowed_hosts is not None,
        allowed_hosts=list(allowed_hosts or ()),
    )
    manager = StreamableHTTPSessionManager(
        app=server, stateless=True, json_response=True, security_settings=security
    )
    app = BearerKeyMiddleware(StreamableHTTPASGIApp(manager), authenticate)
    return app, manager.run


def build_server(
    tools_provider: Callable[[], Tools],
    record_call: RecordCall | None = None,
    call_log_provider: Callable[[], CallLog] | None = None,
) -> Server[Any]:
    """The MCP server answering ``tools/list`` and ``tools/call`` from the gateway's tools."""

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=describe_tools(tools_provider()))

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tools = tools_provider()
        if params.name not in tools.definitions:
            # Refused before counting: a metric label per made-up name would grow without bound.
            return error_result(
                NotFound(
                    f"There is no tool named {params.name!r}.",
                    code="unknown_tool",
                    hint=f"Available tools: {', '.join(tools.definitions)}.",
                )
            )
        outcome = "error"
        call_log = call_log_provider() if call_log_provider is not None else None
        call: CallStart | None = None
        try:
            facility = facility_of(ctx.request)
            arguments = params.arguments or {}
            if call_log is not None:
                # Logged from here on, as over HTTP (pmsgate.gateway.call_log).
                call = call_log.start(
                    facility.id,
                    kind="tool",
                    name=params.name,
                    transport="mcp",
                    key_prefix=key_prefix_of(ctx.request),
                )
                call.arguments = argument_shape(tools.definitions[params.name], arguments)
            answer = await tools.call(facility, params.name, arguments)
        except PmsgateError as error:
            if call_log is not None and call is not None:
                call_log.failed(call, error)
            return error_result(error)
        except Exception as error:
            # Type only: an exception message may carry secrets or guest data from a payload.
            log.error(
                "mcp_tool_unexpected_error", tool=params.name, error_type=type(error).__name__
            )
            if call_log is not None and call is not None:
                call_log.failed(call, error)
            return error_result(PmsgateError("An unexpected error occurred."))
        except BaseException as error:
            if call_log is not None and call is not None:
                call_log.failed(call, error)  # cancelled: the caller went away
            raise
        else:
            outcome = "stale" if answer.meta.get("stale") else "ok"
            if call_log is not None and call is not None:
                call_log.answered(call, answer.meta)
            body = answer.model_dump(mode="json")
            return types.CallToolResult(content=[_text(body)], structured_content=body)
        finally:
            if record_call is not None:
                # Same labels as the HTTP API: the metric counts tool calls whatever the transport.
                record_call(params.name, outcome)

    def input_schema(name: str) -> dict[str, Any] | None:
        # Lets the SDK check 2026-07-28 `Mcp-Param-*` headers without listing every tool.
        tool = tools_provider().definitions.get(name)
        return None if tool is None else tool.input_schema()

    return Server(
        SERVER_NAME,
        version=build_info().version,
        title="pmsgate booking-system tools",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def describe_tools(tools: Tools) -> list[types.Tool]:
    """The catalogue's tools as MCP tool definitions (schemas and descriptions unchanged)."""
    return [
        types.Tool(
            name=tool.name,
            description=tool.description,
            input_schema=tool.input_schema(),
            annotations=types.ToolAnnotations(
                read_only_hint=tool.kind == "read", open_world_hint=True
            ),
        )
        for tool in tools.definitions.values()
    ]


def facility_of(request: Any) -> FacilityView:
    """The facility the request's gateway key was authenticated for."""
    facility = request.scope.get(FACILITY_SCOPE_KEY) if isinstance(request, Request) else None
    if not isinstance(facility, FacilityView):
        # Only reachable if the app were wired without BearerKeyMiddleware: refuse, never guess.
        raise Unauthorized(
            "This MCP request was not authenticated.",
            code="missing_gateway_key",
            hint="Send `Authorization: Bearer <gateway key>` on every MCP HTTP request.",
        )
    return facility


def key_prefix_of(request: Any) -> str | None:
    """The display prefix of the gateway key the request was authenticated with."""
    prefix = request.scope.get(KEY_PREFIX_SCOPE_KEY) if isinstance(request, Request) else None
    return prefix if isinstance(prefix, str) else None


def error_result(error: PmsgateError) -> types.CallToolResult:
    """A tool error as MCP reports it: ``isError`` with the service's error body."""
    body = error.to_body()
    retry_after = error.headers.get("Retry-After")
    if retry_after is not None and retry_after.isdigit():
        # HTTP callers read Retry-After from the header; an MCP caller only sees the body.
        body["error"]["retry_after_s"] = int(retry_after)
    return types.CallToolResult(content=[_text(body)], structured_content=body, is_error=True)


def _text(body: dict[str, Any]) -> types.TextContent:
    return types.TextContent(text=json.dumps(body, ensure_ascii=False, separators=(",", ":")))


class BearerKeyMiddleware:
    """Admits an HTTP request only with a valid gateway key and tags it with the key's facility."""

    def __init__(self, app: ASGIApp, authenticate: Authenticate) -> None:
        self.app = app
        self.authenticate = authenticate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Authenticate, then pass the request on with its facility in the scope."""
        if scope["type"] != "http":
            # Streamable HTTP is plain HTTP; a WebSocket upgrade here is refused outright.
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            return
        if scope.get("method") != "POST":
            # Stateless: no session to resume or end (DELETE) and no server-initiated
            # messages, so no SSE stream on GET — the spec's answer to that GET is 405.
            await _method_not_allowed(scope, receive, send)
            return
        authorization = Headers(scope=scope).get("authorization")
        try:
            raw_key = bearer_key(authorization)
            facility = await self.authenticate(raw_key)
        except PmsgateError as error:
            headers = dict(error.headers)
            if error.status == 401:
                headers["WWW-Authenticate"] = 'Bearer realm="pmsgate"'
            response = JSONResponse(error.to_body(), status_code=error.status, headers=headers)
            await response(scope, receive, send)
            return
        # A copy of the scope: the facility belongs to this request only.
        await self.app(
            {**scope, FACILITY_SCOPE_KEY: facility, KEY_PREFIX_SCOPE_KEY: display_prefix(raw_key)},
            receive,
            send,
        )


async def _method_not_allowed(scope: Scope, receive: Receive, send: Send) -> None:
    error = PmsgateError(
        f"{scope.get('method')} is not served on /mcp: every MCP message is a POST.",
        code="method_not_allowed",
        status=405,
        hint="POST each JSON-RPC message; this server opens no SSE stream and keeps no session.",
    )
    response = JSONResponse(error.to_body(), status_code=405, headers={"Allow": "POST"})
    await response(scope, receive, send)
