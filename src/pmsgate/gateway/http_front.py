"""The service's HTTP middlewares as one pure-ASGI layer (:class:`HttpFrontMiddleware`).

One layer does, in this order (outermost first):

1. a trace's ``SERVER`` span, when traces are configured
   (:class:`~pmsgate.gateway.tracing.TracingMiddleware`, around the rest);
2. the request's latency into ``pmsgate_http_request_duration_seconds`` by route template,
   method and status class, a request that raised counted as a 500
   (:meth:`~pmsgate.gateway.metrics.GatewayMetrics.observe_request`);
3. the request id (the caller's ``X-Request-ID`` when acceptable, the last one sent) and
   the client address, in the context variables and structlog's context, and in the
   answer's ``X-Request-ID`` (:mod:`pmsgate.request_context`);
4. the body limit: 413 for a declared ``Content-Length`` over the route's limit, and for a
   body counted over it as it arrives (:mod:`pmsgate.http_limits`);
5. the last-resort guard: an unforeseen exception answered with the error body, only its
   type logged (as :class:`~pmsgate.errors.UnexpectedErrorMiddleware` does for other apps);
6. the **front routes**: a ``POST`` to one of the exact paths given (the documented tool
   and operation routes, :func:`pmsgate.gateway.http.front_routes`) is answered here, by
   public means, ahead of FastAPI's router: ``scope["route"]`` set to the declared route
   (so metrics and traces name it as before), its handler called, an exception answered by
   the app's own exception handler for it, as Starlette's ``ExceptionMiddleware`` would.
   Every other request goes on to the app.

Per request this layer allocates one :class:`_Exchange` (``__slots__``), not a closure per
concern. Its behaviour is pinned by tests/e2e/test_http_front.py.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pmsgate.errors import ErrorRenderer, error_response, unexpected_error
from pmsgate.gateway.metrics import HTTP_METHODS, UNMATCHED_ROUTE, GatewayMetrics
from pmsgate.gateway.tracing import Tracing, TracingMiddleware
from pmsgate.http_limits import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_UPLOAD_BODY_BYTES,
    UPLOAD_PATHS,
    refuse_too_large,
    too_large,
)
from pmsgate.request_context import (
    MAX_CLIENT_ADDRESS,
    accepted_request_id,
    bind_request,
    new_request_id,
    unbind_request,
)

log = structlog.get_logger("pmsgate.errors")


class FrontRoute:
    """A route answered by exact path ahead of the app's router: the declared ``route``
    (``scope["route"]`` while it answers) and the ``handler`` that answers it."""

    __slots__ = ("handler", "path", "route")

    def __init__(self, route: BaseRoute, handler: Callable[[Request], Awaitable[Response]]):
        self.route = route
        self.handler = handler
        self.path: str = getattr(route, "path", "")


def route_path(scope: Scope) -> str:
    """The path a router matches: ``scope["path"]`` without the ``root_path`` it starts with
    (what Starlette's routing does)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if not root or not path.startswith(root):
        return path
    if path == root:
        return ""
    return path[len(root) :] if path[len(root)] == "/" else path


def exception_handler(app: Any, exc: Exception) -> Callable[..., Any] | None:
    """The app's handler for ``exc`` (``app.exception_handlers``: by status for an
    ``HTTPException``, else by class along its MRO), as Starlette's ``ExceptionMiddleware``
    chooses it; None when it has none (the ``Exception`` handler is the server error's)."""
    handlers: Mapping[Any, Callable[..., Any]] = getattr(app, "exception_handlers", {})
    if isinstance(exc, HTTPException) and exc.status_code in handlers:
        return handlers[exc.status_code]
    for cls in type(exc).__mro__:
        if cls is Exception:
            return None
        if cls in handlers:
            return handlers[cls]
    return None


@dataclass(slots=True, eq=False)
class _Exchange:
    """One request's state between the app and the server: the ``receive`` and ``send``
    the app is given, as bound methods of one object."""

    scope: Scope
    raw_receive: Receive
    raw_send: Send
    limit: int
    request_id: bytes
    received: int = 0
    started: bool = False  # the app began its answer
    answered: bool = False  # the 413 went out: whatever the app sends after it is dropped
    status: int = 500  # the status answered; 500 when the app raised before answering

    async def receive(self) -> Message:
        message = await self.raw_receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.limit:
                if not self.started and not self.answered:
                    self.answered = True
                    await refuse_too_large(self.limit, self.scope, self.raw_receive, self.reply)
                raise too_large(self.limit)
        return message

    async def send(self, message: Message) -> None:
        """What the app sends: dropped after a 413 of the body limit, else replied."""
        if message["type"] == "http.response.start":
            self.started = True
        if self.answered:
            return
        await self.reply(message)

    async def reply(self, message: Message) -> None:
        """To the caller; the request id added to a start, its status kept."""
        if message["type"] == "http.response.start":
            message.setdefault("headers", []).append((b"x-request-id", self.request_id))
            self.status = message["status"]
        await self.raw_send(message)


class HttpFrontMiddleware:
    """Traces, latency histogram, request id, body limit and the last-resort error guard.

    ``metrics`` and ``tracing`` are read per request: the app's container may be opened
    after the middleware is built (``pmsgate serve``); without them nothing is recorded.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        metrics: Callable[[], GatewayMetrics | None],
        tracing: Callable[[], Tracing | None],
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_upload_body_bytes: int = DEFAULT_MAX_UPLOAD_BODY_BYTES,
        upload_paths: Iterable[str] = UPLOAD_PATHS,
        render: ErrorRenderer | None = None,
        timer: Callable[[], float] = time.perf_counter,
        routes: Mapping[str, FrontRoute] | None = None,
    ) -> None:
        self.app = app
        self.routes = dict(routes or {})
        self.metrics = metrics
        self.tracing = tracing
        self.max_body_bytes = max_body_bytes
        self.max_upload_body_bytes = max_upload_body_bytes
        self.upload_paths = frozenset(upload_paths)
        self.render = render
        self.timer = timer
        self._traced = TracingMiddleware(self._serve, tracing)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
        elif self.tracing() is not None:
            await self._traced(scope, receive, send)  # the span around everything below
        else:
            await self._serve(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = self.timer()
        sent_id = b""
        declared: bytes | None = None
        for name, value in scope.get("headers") or ():
            if name == b"x-request-id":
                sent_id = value  # the last one, as before
            elif name == b"content-length" and declared is None:
                declared = value  # the first one, as before
        request_id = accepted_request_id(sent_id.decode("latin-1")) or new_request_id()
        client = scope.get("client")
        address = str(client[0])[:MAX_CLIENT_ADDRESS] if client else None
        if scope.get("method") == "POST" and scope.get("path") in self.upload_paths:
            limit = self.max_upload_body_bytes
        else:
            limit = self.max_body_bytes
        exchange = _Exchange(scope, receive, send, limit, request_id.encode())
        tokens = bind_request(request_id, address)
        try:
            length = None if declared is None else declared.decode("latin-1").strip()
            if length is not None and length.isdigit() and int(length) > limit:
                await refuse_too_large(limit, scope, receive, exchange.reply)  # body never read
            else:
                await self._guarded(scope, exchange)
        finally:
            unbind_request(tokens)
            metrics = self.metrics()
            if metrics is not None:
                template = getattr(scope.get("route"), "path", None) or UNMATCHED_ROUTE
                method = scope["method"]
                metrics.observe_request(
                    template,
                    method if method in HTTP_METHODS else "OTHER",
                    exchange.status,
                    self.timer() - started,
                )

    async def _guarded(self, scope: Scope, exchange: _Exchange) -> None:
        front = None
        if self.routes and scope["method"] == "POST":
            front = self.routes.get(route_path(scope))
        try:
            try:
                if front is None:
                    await self.app(scope, exchange.receive, exchange.send)
                else:
                    await self._front(front, scope, exchange)
            except Exception as exc:
                log.error("unexpected_error", error_type=type(exc).__name__, path=scope.get("path"))
                if exchange.started:
                    return  # the answer is under way: the connection just ends
                response = error_response(Request(scope), unexpected_error(), self.render)
                await response(scope, exchange.receive, exchange.send)
        except Exception:
            # The app's read failed because of the limit; the caller already has the 413.
            if not exchange.answered:
                raise

    async def _front(self, front: FrontRoute, scope: Scope, exchange: _Exchange) -> None:
        """``front`` answers, as the router and ``ExceptionMiddleware`` would have it."""
        scope["route"] = front.route
        scope["endpoint"] = getattr(front.route, "endpoint", None)
        scope["path_params"] = {}
        request = Request(scope, exchange.receive, exchange.send)
        try:
            response = await front.handler(request)
        except Exception as exc:
            handler = exception_handler(scope.get("app"), exc)
            if handler is None:
                raise
            answered = handler(request, exc)
            response = await answered if inspect.isawaitable(answered) else answered
        await response(scope, exchange.receive, exchange.send)
