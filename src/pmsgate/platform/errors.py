"""What went wrong talking to the assistant platform's ``/v1`` API.

Like ``pms.errors``, these describe the upstream and are deliberately not
:class:`pmsgate.errors.PmsgateError` subclasses: callers (onboarding, the knowledge
sync) decide what to tell their own users. Each class has a stable ``code`` and
says whether sending the same request again may succeed (``retryable``).

The platform answers errors as ``{"error": "<text>"}``; that text is kept in
``upstream_message`` (scrubbed of our token and secret values, cut short) and, for
validation errors, also in the message, because it names the field at fault
(e.g. ``parameters[].description required``).
"""

from __future__ import annotations

from typing import Any


class PlatformError(Exception):
    """Base of every failure talking to the assistant platform."""

    code = "platform_error"
    retryable = False
    hint = "See docs/platform-api.md for the assistant-platform contract."

    def __init__(
        self,
        message: str,
        *,
        method: str | None = None,
        path: str | None = None,
        status: int | None = None,
        upstream_message: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.method = method
        self.path = path
        self.status = status
        self.upstream_message = upstream_message
        if hint is not None:
            self.hint = hint

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, method={self.method!r}, "
            f"path={self.path!r}, status={self.status!r})"
        )


class PlatformUnauthorized(PlatformError):
    """The platform refused the bearer token (401)."""

    code = "platform_unauthorized"
    hint = "Check PMSGATE_PLATFORM_API_TOKEN: it is missing, wrong or revoked."


class PlatformForbidden(PlatformUnauthorized):
    """The token is valid but does not cover this workspace or action (403)."""

    code = "platform_forbidden"
    hint = "Use a token scoped to this workspace (or an account-wide token to create workspaces)."


class PlatformNotFound(PlatformError):
    """The workspace, tool, skill, agent or node does not exist (404)."""

    code = "platform_not_found"
    hint = "Read the object's id again from the matching list call."


class PlatformValidationError(PlatformError):
    """The platform refused the request's content (400/422); the message names the field."""

    code = "platform_validation_failed"
    hint = "Correct the field named in the message and send the request again."


class PlatformConflict(PlatformError):
    """The object already exists, e.g. a tool with the same name in the workspace (409)."""

    code = "platform_conflict"
    hint = "Read the existing object and update it instead of creating it again."


class PlatformRateLimited(PlatformError):
    """The workspace's 120 requests/minute are spent; ``retry_after`` says when one fits."""

    code = "platform_rate_limited"
    retryable = True
    hint = "Wait for retry_after seconds; the limit is shared with the agent's tool calls."

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class PlatformUnavailable(PlatformError):
    """The platform could not be reached or failed transiently (5xx); safe to retry later."""

    code = "platform_unavailable"
    retryable = True
    hint = "The assistant platform is temporarily unavailable; retry later."


class PlatformWriteOutcomeUnknown(PlatformError):
    """A write without an idempotency key was sent and no answer came: it may have been applied."""

    code = "platform_write_outcome_unknown"
    hint = "List the objects to see whether the write was applied before sending it again."


class PlatformUnexpectedResponse(PlatformError):
    """The answer does not have the documented shape."""

    code = "platform_unexpected_response"
    hint = "The platform answered in an undocumented shape; compare with docs/platform-api.md."
