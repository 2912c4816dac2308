"""The service's own error family and the FastAPI handlers that render it.

Every error a caller sees has the shape ``{"error": {"code", "message", "hint"}}``
with a real HTTP status; nothing else (no stack trace, no bare 500) leaves the service.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = structlog.get_logger(__name__)

# Codes of the input rules every route applies (pmsgate.boundary); a pydantic error of one
# of these types is answered with that code rather than the generic ``invalid_input``.
INVALID_CHARACTERS = "invalid_characters"
INTEGER_OUT_OF_RANGE = "integer_out_of_range"
NUMBER_OUT_OF_RANGE = "number_out_of_range"
JSON_TOO_DEEP = "json_too_deep"
BOUNDARY_CODES = frozenset(
    {INVALID_CHARACTERS, INTEGER_OUT_OF_RANGE, NUMBER_OUT_OF_RANGE, JSON_TOO_DEEP}
)


class PmsgateError(Exception):
    """Base of every error the service reports to a caller."""

    code = "internal_error"
    status = 500
    hint = "Retry later; if it persists, contact the platform team with the request id."

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status: int | None = None,
        hint: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        if hint is not None:
            self.hint = hint
        self.headers = headers or {}

    def to_body(self) -> dict[str, Any]:
        """The JSON body a caller receives."""
        return {"error": {"code": self.code, "message": self.message, "hint": self.hint}}

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class InvalidInput(PmsgateError):
    """The request itself is wrong; the caller must change it."""

    code = "invalid_input"
    status = 422
    hint = "Correct the request and send it again."


class NotFound(PmsgateError):
    """The thing asked for does not exist (or is not the caller's)."""

    code = "not_found"
    status = 404
    hint = "Check the identifier."


class Conflict(PmsgateError):
    """The request conflicts with the current state."""

    code = "conflict"
    status = 409
    hint = "Read the current state and retry if still needed."


class Unauthorized(PmsgateError):
    """Missing or wrong credentials."""

    code = "unauthorized"
    status = 401
    hint = "Send `Authorization: Bearer <key>` with a valid key."


class Forbidden(PmsgateError):
    """Authenticated, but not allowed to do this."""

    code = "forbidden"
    status = 403
    hint = "This action needs a different role."


class ConfigurationError(PmsgateError):
    """The service is configured wrongly; an operator must fix it."""

    code = "configuration_error"
    status = 500
    hint = "Check the PMSGATE_* settings (see README, Configuration)."


def require_aware(when: datetime, field: str) -> datetime:
    """``when`` itself; ``invalid_<field>`` when it names no time zone."""
    if when.tzinfo is None:
        raise InvalidInput(
            f"{field} has no time zone.",
            code=f"invalid_{field}",
            hint="Give a timezone-aware time (UTC).",
        )
    return when


def exception_leaves(group: BaseExceptionGroup[Any]) -> list[BaseException]:
    """The exceptions inside a (nested) exception group, depth first, in order."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        current = pending.pop(0)
        if isinstance(current, BaseExceptionGroup):
            pending = list(current.exceptions) + pending
        else:
            leaves.append(current)
    return leaves


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        parts.append(f"{where or 'body'}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "The request is not valid."


ErrorRenderer = Callable[[Request, PmsgateError], Response | None]


def error_response(
    request: Request, error: PmsgateError, render: ErrorRenderer | None = None
) -> Response:
    """The error as ``render`` shows it (e.g. an HTML page), else the JSON error body."""
    if render is not None:
        shown = render(request, error)
        if shown is not None:
            return shown
    return JSONResponse(error.to_body(), status_code=error.status, headers=error.headers)


def unexpected_error() -> PmsgateError:
    """What a caller is told about a failure nobody foresaw (never its text)."""
    return PmsgateError("An unexpected error occurred.")


class UnexpectedErrorMiddleware:
    """Answers an unforeseen exception with the error body and logs only its type.

    Starlette's own last-resort handler re-raises the exception after answering, so the
    server would log its traceback and text — which may quote a secret from a payload.
    This middleware, just inside it, ends the exception here instead.
    """

    def __init__(self, app: ASGIApp, render: ErrorRenderer | None = None) -> None:
        self.app = app
        self.render = render

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as exc:
            log.error("unexpected_error", error_type=type(exc).__name__, path=scope.get("path"))
            if started:
                return  # the answer is under way: the connection just ends
            response = error_response(Request(scope), unexpected_error(), self.render)
            await response(scope, receive, send)


_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def allowed_methods(request: Request) -> str:
    """Every method some route answers at the request's path (the ``Allow`` of a 405).

    Asked of the routes themselves, one method at a time: included routers and mounts
    answer for their own routes, however the router nests them.
    """
    # Not mounts: a mounted app (static files) matches every method and answers for itself.
    routes = [r for r in getattr(request.app, "routes", ()) if not isinstance(r, Mount)]
    allowed = [
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes
        )
    ]
    return ", ".join(allowed)


def install_error_handlers(
    app: FastAPI, *, render: ErrorRenderer | None = None, guard: bool = True
) -> None:
    """Render every error, expected or not, as the service's JSON error body.

    ``render`` may answer some requests differently (the console's HTML pages); it
    returns None for the rest. ``guard=False`` leaves out :class:`UnexpectedErrorMiddleware`
    for an app that adds its own (``create_app``'s one HTTP layer,
    :class:`pmsgate.gateway.http_front.HttpFrontMiddleware`).
    """

    @app.exception_handler(PmsgateError)
    async def _pmsgate_error(request: Request, exc: PmsgateError) -> Response:
        return error_response(request, exc, render)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
        types = [err.get("type") for err in exc.errors()]
        code = next((t for t in types if t in BOUNDARY_CODES), InvalidInput.code)
        error = InvalidInput(
            _validation_message(exc),
            code=code,
            hint="Check the field names and types against the documented schema.",
        )
        return error_response(request, error, render)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            # Every method the path answers (RFC 9110 §15.5.6), not only the first route's.
            allow = allowed_methods(request) or headers.get("Allow")
            if allow:
                headers["Allow"] = allow
        error = PmsgateError(
            str(exc.detail),
            code=code,
            status=exc.status_code,
            hint="Check the URL and method.",
            headers=headers,
        )
        return error_response(request, error, render)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:
        # Log the type only: an exception message may carry secrets from a payload.
        log.error("unexpected_error", error_type=type(exc).__name__, path=request.url.path)
        return error_response(request, unexpected_error(), render)

    if guard:
        app.add_middleware(UnexpectedErrorMiddleware, render=render)
