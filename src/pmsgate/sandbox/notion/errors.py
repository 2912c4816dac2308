"""The notes emulator's error table, in the Notion API's shape.

Every refusal is ``{"object": "error", "status", "code", "message", "request_id"}``
with the HTTP status in ``status``; codes and default messages follow the public
Notion API reference (docs/knowledge-sync.md).
"""

from __future__ import annotations

import uuid
from typing import Any

from pmsgate.sandbox.core import EmulatedError
from pmsgate.sandbox.core import ErrorRow as ErrorSpec

MISSING_VERSION = ErrorSpec(
    "missing_version",
    400,
    "Notion-Version header failed validation: Notion-Version header should be defined, "
    "instead was `undefined`.",
)
INVALID_VERSION = ErrorSpec(
    "validation_error", 400, "Notion-Version header failed validation: unknown version."
)
UNAUTHORIZED = ErrorSpec("unauthorized", 401, "API token is invalid.")
OBJECT_NOT_FOUND = ErrorSpec(
    "object_not_found",
    404,
    "Could not find object. Make sure the relevant pages and databases are shared with your "
    "integration.",
)
VALIDATION_ERROR = ErrorSpec("validation_error", 400, "body failed validation.")
INVALID_JSON = ErrorSpec("invalid_json", 400, "Error parsing JSON body.")
INVALID_REQUEST_URL = ErrorSpec("invalid_request_url", 400, "Invalid request URL.")
INVALID_REQUEST = ErrorSpec("invalid_request", 400, "This request is not supported.")
RATE_LIMITED = ErrorSpec(
    "rate_limited", 429, "You have been rate limited. Please try again in a few minutes."
)
INTERNAL_SERVER_ERROR = ErrorSpec(
    "internal_server_error", 500, "Unexpected error occurred. Please try again later."
)
SERVICE_UNAVAILABLE = ErrorSpec(
    "service_unavailable", 503, "Notion is unavailable, please try again later."
)


class NotionApiError(EmulatedError):
    """An error answer: raised anywhere in the emulator, rendered by the app's handler."""

    def body(self) -> dict[str, Any]:
        """The JSON error object."""
        return {
            "object": "error",
            "status": self.spec.status,
            "code": self.spec.code,
            "message": self.message,
            "request_id": new_request_id(),
        }


def new_request_id() -> str:
    """A request id for one answer, as Notion's (a UUID)."""
    return str(uuid.uuid4())


def validation(message: str) -> NotionApiError:
    """A 400 ``validation_error`` with a message in Notion's ``body failed validation`` style."""
    return NotionApiError(VALIDATION_ERROR, message)


def not_found(kind: str, object_id: str) -> NotionApiError:
    """A 404 ``object_not_found`` naming the object, as Notion words it."""
    return NotionApiError(
        OBJECT_NOT_FOUND,
        f"Could not find {kind} with ID: {object_id}. Make sure the relevant pages and "
        "databases are shared with your integration.",
    )
