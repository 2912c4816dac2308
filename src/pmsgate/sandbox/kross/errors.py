"""The emulator's error table: every ``{error_code, error_message, ruid}`` answer it can give.

Codes and statuses follow ``docs/kross-api.md`` (they are assumptions about the real system).
"""

from __future__ import annotations

import uuid
from typing import Any

from pmsgate.sandbox.core import EmulatedError
from pmsgate.sandbox.core import ErrorRow as ErrorSpec

INVALID_REQUEST = ErrorSpec("INVALID_REQUEST", 400, "Missing or malformed field in the request.")
AUTH_FAILED = ErrorSpec("AUTH_FAILED", 401, "Wrong hotel_id, username, password or api_key.")
INVALID_TOKEN = ErrorSpec("INVALID_TOKEN", 401, "Missing, unknown, revoked or expired token.")
OPERATION_NOT_FOUND = ErrorSpec("OPERATION_NOT_FOUND", 404, "This operation does not exist.")
NOT_FOUND = ErrorSpec("NOT_FOUND", 404, "No such object in this facility.")
METHOD_NOT_ALLOWED = ErrorSpec("INVALID_REQUEST", 405, "Operations are called with POST.")
NOT_AVAILABLE = ErrorSpec("NOT_AVAILABLE", 409, "The requested nights are not available.")
PAYLOAD_TOO_LARGE = ErrorSpec("PAYLOAD_TOO_LARGE", 413, "A picture is larger than 5 MiB.")
UNSUPPORTED_MEDIA_TYPE = ErrorSpec(
    "UNSUPPORTED_MEDIA_TYPE", 415, "Pictures must be image/jpeg, image/png or application/pdf."
)
TOO_MANY_SESSIONS = ErrorSpec(
    "TOO_MANY_SESSIONS", 429, "Too many active tokens for this hotel_id (at most 50)."
)
RATE_LIMITED = ErrorSpec("RATE_LIMITED", 429, "Rate limit exceeded for this facility.")
SERVER_ERROR = ErrorSpec("SERVER_ERROR", 503, "Temporary server error; retry later.")
INTERNAL_ERROR = ErrorSpec("SERVER_ERROR", 500, "Unexpected server error.")

# How a refused login is answered, by SandboxConfig.login_refusal. Public sources show 401, 400
# or 403 with an error_code, and 200 with an error_code; the other spellings differ from ours on
# purpose, so that a client cannot depend on AUTH_FAILED. The 403 one is JSON, unlike the edge's
# plain-text "error code: 1010".
LOGIN_REFUSALS: dict[str, ErrorSpec] = {
    "401": AUTH_FAILED,
    "400": ErrorSpec(1001, 400, "Invalid credentials."),
    "403": ErrorSpec("INVALID_CREDENTIALS", 403, "Access denied: invalid username or password."),
    "200": ErrorSpec("LOGIN_FAILED", 200, "Login failed: check hotel, user and password."),
}

# How an unknown or expired bearer token is answered, by SandboxConfig.token_rejection. "200-401"
# is the {error_code, error_message, ruid} family of public clients: HTTP 200, the status as a
# number in error_code.
TOKEN_REJECTIONS: dict[str, ErrorSpec] = {
    "401": INVALID_TOKEN,
    "200": ErrorSpec("TOKEN_EXPIRED", 200, "The token is expired or unknown; request a new one."),
    "200-401": ErrorSpec(401, 200, "Unauthorized: the token is expired or unknown."),
}

# How a path that names no operation is answered, by SandboxConfig.unknown_operation: our named
# code, the status repeated as a number in error_code, or a bare "Not Found" page (not JSON).
UNKNOWN_OPERATIONS: dict[str, ErrorSpec | None] = {
    "named": OPERATION_NOT_FOUND,
    "404": ErrorSpec(404, 404, "No such operation."),
    "plain": None,
}


class KrossError(EmulatedError):
    """An error answer: raised anywhere in the emulator, rendered by the app's handler."""

    def body(self) -> dict[str, Any]:
        """The JSON error envelope."""
        return {"error_code": self.spec.code, "error_message": self.message, "ruid": new_ruid()}


def new_ruid() -> str:
    """A request id for one answer, in the booking system's ``ruid`` style."""
    return f"r-{uuid.uuid4().hex[:16]}"
