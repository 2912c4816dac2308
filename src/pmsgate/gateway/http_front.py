"""The service's HTTP middlewares as one pure-ASGI layer (:class:`HttpFrontMiddleware`).

``create_app`` used to stack five middlewares of ours, each wrapping ``send`` (and one
``receive``) in closures of its own on every request. They are one layer here, doing what
each did, in the same order (outermost first):

1. a trace's ``SERVER`` span, when traces are configured
   (:class:`~pmsgate.gateway.tracing.TracingMiddleware`, around the rest);
2. the request's latency into ``pmsgate_http_request_duration_seconds`` by route template,
   method and status class, a request that raised counted as a 500
   (:class:`~pmsgate.gateway.metrics.HttpMetricsMiddleware`);
3. the request id (the caller's ``X-Request-ID`` when acceptable, the last one sent) and
   the client address, in the context variables and structlog's context, and in the
   answer's ``X-Request-ID`` (:class:`~pmsgate.request_context.RequestContextMiddleware`);
4. the body limit: 413 for a declared ``Content-Length`` over the route's limit, and for a
   body counted over it as it arrives (:class:`~pmsgate.http_limits.BodyLimitMiddleware`);
5. the last-resort guard: an unforeseen exception answered with the error body, only its
   type logged (:class:`~pmsgate.errors.UnexpectedErrorMiddleware`).

The classes named stay, for apps that want one of them alone; their tests and this
layer's (tests/e2e/test_http_front.py) pin the same behaviour. Per request this layer
allocates one :class:`_Exchange` (``__slots__``) instead of five closures.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import structlog
from starlette.requests import Request
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


class _Exchange:
    """One request's state between the app and the server: the ``receive`` and ``send``
    the app is given, as bound methods of one object."""

    __slots__ = (
        "answered",
        "limit",
        "raw_receive",
        "raw_send",
        "received",
        "request_id",
        "scope",
        "started",
        "status",
    )

    def __init__(
        self, scope: Scope, receive: Receive, send: Send, limit: int, request_id: bytes
    ) -> None:
        self.scope = scope
        self.raw_receive = receive
        self.raw_send = send
        self.limit = limit
        self.request_id = request_id
        self.received = 0
        self.started = False  # the app began its answer
        self.answered = False  # the 413 went out: whatever the app sends after it is dropped
        self.status = 500  # the status answered; 500 when the app raised before answering

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
    ) -> None:
        self.app = app
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
        try:
            try:
                await self.app(scope, exchange.receive, exchange.send)
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
