"""The platform emulator's HTTP face: the ``/v1`` API and the ``/_sandbox/`` controls.

Every ``/v1`` request goes through the same steps (docs/assistant-api.md):

1. bearer-token authentication (401 ``{"error"}``);
2. attribution: the workspace named by the query or body, or owning the object in
   the path (404 if unknown, 403 when a scoped token does not cover it); requests
   that name no workspace (listing and creating workspaces) count for the token;
3. the 120 requests/minute sliding window of that workspace (429 + ``Retry-After``);
4. injected failures (``/_sandbox/faults``);
5. for writes carrying ``Idempotency-Key``, the replay of an earlier answer;
6. body parsing (422), the store's operation, serialisation.

Answers follow the public reference's envelopes: a single object is ``{"data": {...}}``,
a list ``{"data": [...], "next_cursor", "has_more"}``, an error ``{"error": "..."}``.
With ``undocumented_endpoints = "absent"`` (``PUT /_sandbox/config``) every endpoint the
reference does not document answers 404 first, like a platform that lacks it.

The pieces: ``bodies.py`` (what a request may carry), ``handlers.py`` (the steps
above and the endpoint shapes), ``routes.py`` (the ``/v1`` routes, resource by
resource), ``wire.py`` (the answers' shapes), ``controls.py`` (``/_sandbox/``).
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from pmsgate.sandbox.assistant import errors
from pmsgate.sandbox.assistant.controls import control_router
from pmsgate.sandbox.assistant.errors import AssistantApiError
from pmsgate.sandbox.assistant.routes import api_router
from pmsgate.sandbox.assistant.store import AssistantStore
from pmsgate.sandbox.emulator_app import emulator_app, request_error_text


def create_assistant_app(store: AssistantStore) -> FastAPI:
    """The emulator as an ASGI app over ``store``."""
    return emulator_app(
        "Assistant platform /v1 emulator",
        api_router(store),
        control_router(store),
        _install_error_handlers,
    )


def _install_error_handlers(app: FastAPI) -> None:
    def render(spec: errors.ErrorSpec, message: str | None = None) -> JSONResponse:
        return JSONResponse(AssistantApiError(spec, message).body(), status_code=spec.status)

    @app.exception_handler(AssistantApiError)
    async def platform_error(request: Request, exc: AssistantApiError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.spec.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        return render(errors.VALIDATION, request_error_text(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            return render(errors.NOT_FOUND, "no such endpoint")
        if exc.status_code == 405:
            return render(errors.METHOD_NOT_ALLOWED)
        return render(errors.ErrorSpec("http", exc.status_code, str(exc.detail)))

    # An emulator bug still answers with the error body, never a bare traceback page.
    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        return render(errors.INTERNAL)
