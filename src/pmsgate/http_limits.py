"""Request-body size limits, enforced as bytes arrive (never an unbounded body in memory).

:class:`BodyLimitMiddleware` is plain ASGI, outside every route (HTTP API, admin API,
MCP, console): a request whose ``Content-Length`` already exceeds its route's limit is
answered 413 before the app sees it; a body sent without one (chunked) is counted as
it is read, and the moment it passes the limit the middleware answers 413 itself and
the app's read fails. Whatever the app then tries to answer is dropped: the caller
gets one response, the service's ``{"error": {code, message, hint}}`` body.

Limits (docs/gateway.md, "Request size"): ``PMSGATE_MAX_BODY_BYTES`` (1 MiB) for every
route, except the routes in ``upload_paths`` — ``POST /v1/operations/save-guest-pictures``,
whose largest legitimate body is 10 pictures of 5 MiB each, base64-encoded — which get
``PMSGATE_MAX_UPLOAD_BODY_BYTES``.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pmsgate.errors import PmsgateError

MIB = 1024 * 1024
DEFAULT_MAX_BODY_BYTES = MIB
# 10 pictures of at most 5 MiB, base64 (4 characters per 3 bytes): 66.7 MiB, plus room
# for the JSON around them (file names, content types, ids).
DEFAULT_MAX_UPLOAD_BODY_BYTES = 72 * MIB
UPLOAD_PATHS = ("/v1/operations/save-guest-pictures",)


class PayloadTooLarge(PmsgateError):
    """The request body is larger than its route accepts."""

    code = "payload_too_large"
    status = 413
    hint = "Send a smaller request body."


def too_large(limit: int) -> PayloadTooLarge:
    """The error for a body over ``limit`` bytes."""
    return PayloadTooLarge(
        f"The request body is larger than {limit} bytes, the most this route accepts.",
        hint="Send a smaller body (see docs/gateway.md, Request size).",
    )


class BodyLimitMiddleware:
    """Answers 413 to a request body over its route's limit, counting bytes as they arrive."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_upload_body_bytes: int = DEFAULT_MAX_UPLOAD_BODY_BYTES,
        upload_paths: Iterable[str] = UPLOAD_PATHS,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_upload_body_bytes = max_upload_body_bytes
        self.upload_paths = frozenset(upload_paths)

    def limit_for(self, scope: Scope) -> int:
        """The most bytes the body of this request may have."""
        if scope.get("method") == "POST" and scope.get("path") in self.upload_paths:
            return self.max_upload_body_bytes
        return self.max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope)
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > limit:
            await refuse_too_large(limit, scope, receive, send)  # the body is never read
            return

        received = 0
        started = False
        answered = False  # the 413 went out: whatever the app sends after it is dropped

        async def counting_receive() -> Message:
            nonlocal received, answered
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    if not started and not answered:
                        answered = True
                        await refuse_too_large(limit, scope, receive, send)
                    raise too_large(limit)
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if answered:
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except Exception:
            # The app's read failed because of the limit (a route may wrap that failure in
            # its own error); the caller already has the 413.
            if not answered:
                raise


async def refuse_too_large(limit: int, scope: Scope, receive: Receive, send: Send) -> None:
    """Answer the 413 for a body over ``limit`` bytes, closing the connection."""
    error = too_large(limit)
    # Close the connection: the rest of the body is never read.
    response = JSONResponse(
        error.to_body(), status_code=error.status, headers={"Connection": "close"}
    )
    await response(scope, receive, send)
