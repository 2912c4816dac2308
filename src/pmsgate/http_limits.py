"""Request-body size limits, enforced as bytes arrive (never an unbounded body in memory).

The limit is enforced by the app's one HTTP layer
(:class:`pmsgate.gateway.http_front.HttpFrontMiddleware`), plain ASGI, outside every route
(HTTP API, admin API, MCP, console): a request whose ``Content-Length`` already exceeds its
route's limit is answered 413 before the app sees it; a body sent without one (chunked) is
counted as it is read, and the moment it passes the limit the layer answers 413 itself and
the app's read fails. Whatever the app then tries to answer is dropped: the caller gets one
response, the service's ``{"error": {code, message, hint}}`` body. This module holds the
limits and the 413.

Limits (docs/gateway.md, "Request size"): ``PMSGATE_MAX_BODY_BYTES`` (1 MiB) for every
route, except the routes in ``upload_paths`` — ``POST /v1/operations/save-guest-pictures``,
whose largest legitimate body is 10 pictures of 5 MiB each, base64-encoded — which get
``PMSGATE_MAX_UPLOAD_BODY_BYTES``.
"""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

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


async def refuse_too_large(limit: int, scope: Scope, receive: Receive, send: Send) -> None:
    """Answer the 413 for a body over ``limit`` bytes, closing the connection."""
    error = too_large(limit)
    # Close the connection: the rest of the body is never read.
    response = JSONResponse(
        error.to_body(), status_code=error.status, headers={"Connection": "close"}
    )
    await response(scope, receive, send)
