"""The emulator's error table: every ``{"error": "..."}`` answer it can give.

Statuses are this project's assumption (docs/assistant-api.md); the public reference
only fixes the body shape and 429 + ``Retry-After``.
"""

from __future__ import annotations

from typing import Any

from pmsgate.sandbox.core import EmulatedError
from pmsgate.sandbox.core import ErrorRow as ErrorSpec

# Rows: a name (for the stats; the wire has no code), the HTTP status, a default message.
BAD_REQUEST = ErrorSpec("bad_request", 400, "malformed request")
UNAUTHORIZED = ErrorSpec("unauthorized", 401, "missing or invalid bearer token")
FORBIDDEN = ErrorSpec("forbidden", 403, "this token has no access to the workspace")
NOT_FOUND = ErrorSpec("not_found", 404, "not found")
NO_ENDPOINT = ErrorSpec("not_found", 404, "no such endpoint")
METHOD_NOT_ALLOWED = ErrorSpec("method_not_allowed", 405, "method not allowed")
CONFLICT = ErrorSpec("conflict", 409, "conflict")
VALIDATION = ErrorSpec("validation", 422, "invalid request body")
RATE_LIMITED = ErrorSpec(
    "rate_limited", 429, "rate limit exceeded: too many requests for this workspace"
)
INTERNAL = ErrorSpec("internal", 500, "internal error")
UNAVAILABLE = ErrorSpec("unavailable", 503, "service temporarily unavailable")


class AssistantApiError(EmulatedError):
    """An error answer: raised anywhere in the emulator, rendered by the app's handler."""

    def body(self) -> dict[str, Any]:
        """The JSON error body."""
        return {"error": self.message}
