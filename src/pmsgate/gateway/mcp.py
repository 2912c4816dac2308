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
  key or OAuth access token>``; a missing or wrong one is refused before the SDK sees
  the request, with 401, the OAuth challenge (``WWW-Authenticate: Bearer
  resource_metadata=…``, docs/oauth.md) and the service's ``{"error": {code, message,
  hint}}`` body. Every MCP tool is one of the six, so the caller must hold the
  ``tools:read`` scope: ``authenticate`` (``BearerAuth.authenticate``,
  :mod:`pmsgate.gateway.oauth_tokens`) refuses any other with 403 ``scope_missing``
  before the SDK sees the request (docs/gateway.md, Scopes). The
  key's facility is put in the request's ASGI scope, which the SDK hands to the
  tool handler as ``ctx.request``; a tool call only ever runs for that facility.
  (Not a contextvar: the SDK serves a stateless handshake-era request in a task
  of the session manager's task group, which does not run in the request's
  context.) The key's display prefix travels the same way, for the tool-call log
  (:mod:`pmsgate.gateway.call_log`), where every tool call that reached a facility is logged.
- **Tool results**: the ``ToolAnswer`` as JSON text plus ``structuredContent``
  ``{"data", "meta"}``. Each tool lists its answer's declared model
  (``ToolDefinition.answer_model``, pmsgate.catalogue.tools) as its ``outputSchema``, the
  low-level server's way (the SDK's client checks ``structuredContent`` against it); every
  answer is checked against that model before it is sent, so a caller never gets one the
  listing does not describe (one that is not is logged, ``mcp_answer_off_schema``, and
  answered as ``internal_error``). A ``PmsgateError`` (unknown tool, bad arguments, an
  upstream failure, ...) becomes a result with ``isError: true`` whose text is
  the error body, so the model can read the hint and correct itself. Anything
  unexpected is logged by type only and answered as ``internal_error``: never a
  stack trace, never an exception message that might carry a payload.
- **Origin** (the transport specification's defence against DNS rebinding): a request
  without an ``Origin`` header (a server, the SDK's client) is served; one with an
  ``Origin`` is served only when it is one of ``allowed_origins``
  (``PMSGATE_ALLOWED_ORIGINS``, none by default), otherwise 403 ``origin_not_allowed``,
  before the key is looked at. The SDK's own Host/Origin check stays off: the gateway is
  reached through proxies under host names it cannot know in advance, and the SDK would
  answer it in plain text.
- **Every error is JSON**: before the protocol starts (method, Origin, key, Content-Type,
  Accept) the service's ``{"error": {code, message, hint}}`` body with its HTTP status
  (405, 403, 401, 415, 406); from the JSON-RPC message on (unreadable JSON, not a
  request, an unsupported ``Mcp-Protocol-Version``) the SDK's JSON-RPC error. Anything
  the SDK would still answer as text is turned into the error body with the same status
  (:class:`JsonErrorsOnly`).
- **Protocol versions**: the SDK's own negotiation, every version it supports
  (``mcp_types.version``): ``initialize`` with a handshake-era version is answered in that
  version, an unknown one with the newest handshake version (the client then decides);
  the 2026-07-28 single-exchange requests are answered as that version.

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
from pydantic import ValidationError
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pmsgate.catalogue.tools import answer_schema
from pmsgate.errors import Forbidden, NotFound, PmsgateError, Unauthorized
from pmsgate.gateway.call_log import CallLog, CallStart, argument_shape
from pmsgate.gateway.facilities import FacilityView
from pmsgate.gateway.oauth_tokens import Caller
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

# The bearer check: the ``Authorization`` header and the request's ASGI scope → the caller
# (a gateway key's or an OAuth access token's facility; pmsgate.gateway.oauth_tokens).
Authenticate = Callable[[str | None, Scope], Awaitable[Caller]]
RecordCall = Callable[[str, str], None]
Lifespan = Callable[[], AbstractAsyncContextManager[None]]


def create_mcp_app(
    *,
    tools_provider: Callable[[], Tools],
    authenticate: Authenticate,
    record_call: RecordCall | None = None,
    call_log_provider: Callable[[], CallLog] | None = None,
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] = (),
) -> tuple[ASGIApp, Lifespan]:
    """The MCP ASGI app for ``/mcp`` and the lifespan the parent app must enter around it.

    ``call_log_provider`` gives the process's tool-call log (None: calls are not logged);
    ``allowed_origins`` the ``Origin`` values a request may carry (none: only requests
    without one are served).
    """
    server = build_server(tools_provider, record_call, call_log_provider)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=allowed_hosts is not None,
        allowed_hosts=list(allowed_hosts or ()),
    )
    manager = StreamableHTTPSessionManager(
        app=server, stateless=True, json_response=True, security_settings=security
    )
    app = BearerKeyMiddleware(
        JsonErrorsOnly(StreamableHTTPASGIApp(manager)), authenticate, allowed_origins
    )
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
            body = structured(tools, params.name, answer.model_dump(mode="json"))
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
            return types.CallToolResult(content=[_text(body)], structured_content=body)
        finally:
            if record_call is not None:
                # Same labels as the HTTP API: the metric counts tool calls whatever the transport.
                record_call(params.name, outcome)

    def input_schema(name: str) -> dict[str, Any] | None:
        # Lets the SDK check 2026-07-28 `Mcp-Param-*` headers without listing every tool.
        tools = tools_provider()
        return tools.input_schema(name) if name in tools.definitions else None

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
    """The catalogue's tools as MCP tool definitions (schemas and descriptions unchanged),
    each with its answer's declared schema as ``outputSchema``."""
    described = []
    for tool in tools.definitions.values():
        model = tools.answer_model(tool.name)
        described.append(
            types.Tool(
                name=tool.name,
                description=tool.description,
                input_schema=tools.input_schema(tool.name),
                output_schema=None if model is None else answer_schema(model),
                annotations=types.ToolAnnotations(
                    read_only_hint=tool.kind == "read", open_world_hint=True
                ),
            )
        )
    return described


def structured(tools: Tools, name: str, body: dict[str, Any]) -> dict[str, Any]:
    """``body``, an answer of tool ``name``, once it is checked against the tool's declared
    answer model (its ``outputSchema``); an internal error when it is not what the listing
    says (logged with the fields' locations, never their values)."""
    model = tools.answer_model(name)
    if model is None:
        return body
    try:
        model.model_validate(body)
    except ValidationError as error:
        locations = {".".join(str(part) for part in e["loc"]) for e in error.errors()}
        log.error("mcp_answer_off_schema", tool=name, fields=sorted(locations)[:5])
        raise PmsgateError("The tool's answer could not be given in its declared form.") from None
    return body


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


def normalise_origin(origin: str) -> str:
    """An ``Origin`` as compared: trimmed, lower case, without a trailing slash."""
    return origin.strip().rstrip("/").lower()


class BearerKeyMiddleware:
    """Admits an HTTP request only from an allowed Origin (or none), with a valid gateway key,
    with a JSON body and accepting a JSON answer; tags it with the key's facility."""

    def __init__(
        self, app: ASGIApp, authenticate: Authenticate, allowed_origins: Sequence[str] = ()
    ) -> None:
        self.app = app
        self.authenticate = authenticate
        self.allowed_origins = frozenset(normalise_origin(o) for o in allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the request's transport, then pass it on with its facility in the scope."""
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
        headers = Headers(scope=scope)
        try:
            self._check_origin(headers.get("origin"))
            caller = await self.authenticate(headers.get("authorization"), scope)
            _check_media_types(headers)
        except PmsgateError as error:
            extra = dict(error.headers)
            if error.status == 401:
                # The OAuth challenge (resource_metadata: pmsgate.gateway.oauth_tokens).
                extra.setdefault("WWW-Authenticate", 'Bearer realm="pmsgate"')
            response = JSONResponse(error.to_body(), status_code=error.status, headers=extra)
            await response(scope, receive, send)
            return
        # A copy of the scope: the facility belongs to this request only.
        await self.app(
            {**scope, FACILITY_SCOPE_KEY: caller.facility, KEY_PREFIX_SCOPE_KEY: caller.prefix},
            receive,
            send,
        )

    def _check_origin(self, origin: str | None) -> None:
        """Refuse a request from a web page of a site not allowed (DNS rebinding)."""
        if origin is None or normalise_origin(origin) in self.allowed_origins:
            return
        raise Forbidden(
            "Requests from this Origin are not served on /mcp.",
            code="origin_not_allowed",
            hint="Call /mcp from a server (no Origin header), or ask the operator to add the "
            "site to PMSGATE_ALLOWED_ORIGINS.",
        )


def _check_media_types(headers: Headers) -> None:
    """A JSON-RPC message in a JSON body, and a caller that accepts a JSON answer."""
    content_type = headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise PmsgateError(
            "An MCP message is sent as application/json.",
            code="unsupported_media_type",
            status=415,
            hint="Send the JSON-RPC message with `Content-Type: application/json`.",
        )
    accepted = [part.split(";")[0].strip().lower() for part in headers.get("accept", "").split(",")]
    if not {"application/json", "application/*", "*/*"} & set(accepted):
        raise PmsgateError(
            "This server answers MCP messages as application/json only.",
            code="not_acceptable",
            status=406,
            hint="Send `Accept: application/json, text/event-stream`.",
        )


# What an error answer the SDK gives in plain text (or none) means, as the error body.
_TRANSPORT_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_mcp_request", "Send one JSON-RPC request or notification as a JSON object."),
    403: ("forbidden", "Call /mcp from a server, with a gateway key."),
    404: ("not_found", "POST each JSON-RPC message to /mcp; no session is kept."),
    405: ("method_not_allowed", "POST each JSON-RPC message; no SSE stream is opened."),
    406: ("not_acceptable", "Send `Accept: application/json, text/event-stream`."),
    413: ("payload_too_large", "Send a smaller request body."),
    415: ("unsupported_media_type", "Send `Content-Type: application/json`."),
    421: ("misdirected_request", "Send the request to the gateway's own host name."),
}


class JsonErrorsOnly:
    """Turns an error the SDK answers as text (or with an empty body) into the error body.

    The SDK answers most refusals as JSON-RPC errors, a few (its header checks) as plain text
    or an empty body; a caller of /mcp always gets JSON. A JSON answer passes unchanged.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; replace a non-JSON error answer as it starts."""
        replaced = False

        async def json_send(message: Message) -> None:
            nonlocal replaced
            if replaced:
                return  # the replaced answer's body
            if message["type"] == "http.response.start" and message["status"] >= 400:
                answered = Headers(raw=message.get("headers", []))
                if not answered.get("content-type", "").startswith("application/json"):
                    replaced = True
                    await _error_answer(message["status"], answered, scope, receive, send)
                    return
            await send(message)

        await self.app(scope, receive, json_send)


async def _error_answer(
    status: int, answered: Headers, scope: Scope, receive: Receive, send: Send
) -> None:
    code, hint = _TRANSPORT_ERRORS.get(
        status, ("mcp_request_refused", "Check the request against the MCP transport.")
    )
    error = PmsgateError("The MCP request was refused.", code=code, status=status, hint=hint)
    headers = {"Allow": answered["allow"]} if "allow" in answered else {}
    await JSONResponse(error.to_body(), status_code=status, headers=headers)(scope, receive, send)


async def _method_not_allowed(scope: Scope, receive: Receive, send: Send) -> None:
    error = PmsgateError(
        f"{scope.get('method')} is not served on /mcp: every MCP message is a POST.",
        code="method_not_allowed",
        status=405,
        hint="POST each JSON-RPC message; this server opens no SSE stream and keeps no session.",
    )
    response = JSONResponse(error.to_body(), status_code=405, headers={"Allow": "POST"})
    await response(scope, receive, send)
