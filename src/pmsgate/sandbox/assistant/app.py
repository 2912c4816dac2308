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

from fastapi import FastAPI

from pmsgate.sandbox.assistant import errors
from pmsgate.sandbox.assistant.controls import control_router
from pmsgate.sandbox.assistant.errors import AssistantApiError
from pmsgate.sandbox.assistant.routes import api_router
from pmsgate.sandbox.assistant.store import AssistantStore
from pmsgate.sandbox.emulator_app import ErrorAnswers, emulator_app

# The app's title (it serves no API docs).
TITLE = "Assistant platform /v1 emulator"


def create_assistant_app(store: AssistantStore) -> FastAPI:
    """The emulator as an ASGI app over ``store``."""
    return emulator_app(TITLE, api_router(store), control_router(store), _ERROR_ANSWERS)


_ERROR_ANSWERS = ErrorAnswers(
    AssistantApiError,
    invalid=errors.VALIDATION,
    internal=errors.INTERNAL,
    no_route={404: errors.NO_ENDPOINT, 405: errors.METHOD_NOT_ALLOWED},
)
