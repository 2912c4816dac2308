"""The service's own error family and the FastAPI handlers that render it.

Every error a caller sees has the shape ``{"error": {"code", "message", "hint"}}``
with a real HTTP status; nothing else (no stack trace, no bare 500) leaves the service.
"""

from __future__ import annotations

from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

log = structlog.get_logger(__name__)


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


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        parts.append(f"{where or 'body'}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "The request is not valid."


def install_error_handlers(app: FastAPI) -> None:
    """Render every error, expected or not, as the service's JSON error body."""

    @app.exception_handler(PmsgateError)
    async def _pmsgate_error(request: Request, exc: PmsgateError) -> JSONResponse:
        return JSONResponse(exc.to_body(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        error = InvalidInput(
            _validation_message(exc),
            hint="Check the field names and types against the documented schema.",
        )
        return JSONResponse(error.to_body(), status_code=error.status)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        error = PmsgateError(
            str(exc.detail), code=code, status=exc.status_code, hint="Check the URL and method."
        )
        return JSONResponse(error.to_body(), status_code=error.status)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        # Log the type only: an exception message may carry secrets from a payload.
        log.error("unexpected_error", error_type=type(exc).__name__, path=request.url.path)
        error = PmsgateError("An unexpected error occurred.")
        return JSONResponse(error.to_body(), status_code=500)
