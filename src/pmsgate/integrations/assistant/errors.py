"""What went wrong talking to the assistant platform's ``/v1`` API.

Like ``pms.errors``, these describe the upstream and are deliberately not
:class:`pmsgate.errors.PmsgateError` subclasses: callers (onboarding, the knowledge
sync) decide what to tell their own users. They derive from the upstream kit's
:class:`~pmsgate.integrations.kit.UpstreamError` (``operation`` = ``"METHOD /path"``,
``request_id`` from the answer's header); each class has a stable ``code`` and says
whether sending the same request again may succeed (``retryable``).

The platform answers errors as ``{"error": "<text>"}``; that text is kept in
``upstream_message`` (scrubbed of our token and secret values, cut short) and, for
validation errors, also in the message, because it names the field at fault
(e.g. ``parameters[].description required``). Which HTTP status means which kind of
failure is data: ``errors.yaml`` next to this module.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pmsgate.integrations.kit import ClassificationTable, UpstreamError

CLASSIFICATION = ClassificationTable.load("pmsgate.integrations.assistant", "errors.yaml")

# Statuses with which a platform refuses an endpoint it does not serve (or not to us).
ENDPOINT_REFUSED_STATUSES = frozenset({403, 404, 405, 501})


class AssistantError(UpstreamError):
    """Base of every failure talking to the assistant platform."""

    upstream: ClassVar[str] = "assistant"
    code: ClassVar[str] = "platform_error"
    hint = "See docs/assistant-api.md for the assistant-platform contract."

    def __init__(
        self,
        message: str,
        *,
        method: str | None = None,
        path: str | None = None,
        **kwargs: Any,
    ) -> None:
        if kwargs.get("operation") is None and method is not None and path is not None:
            kwargs["operation"] = f"{method} {path}"
        super().__init__(message, **kwargs)
        self.method = method
        self.path = path

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, method={self.method!r}, "
            f"path={self.path!r}, status={self.status!r})"
        )


class AssistantUnauthorized(AssistantError):
    """The platform refused the bearer token (401)."""

    code: ClassVar[str] = "platform_unauthorized"
    hint = "Check PMSGATE_ASSISTANT_API_TOKEN: it is missing, wrong or revoked."


class AssistantForbidden(AssistantUnauthorized):
    """The token is valid but does not cover this workspace or action (403)."""

    code: ClassVar[str] = "platform_forbidden"
    hint = "Use a token scoped to this workspace (or an account-wide token to create workspaces)."


class AssistantNotFound(AssistantError):
    """The workspace, tool, skill, agent or node does not exist (404)."""

    code: ClassVar[str] = "platform_not_found"
    hint = "Read the object's id again from the matching list call."


class AssistantValidationError(AssistantError):
    """The platform refused the request's content (400/422); the message names the field."""

    code: ClassVar[str] = "platform_validation_failed"
    hint = "Correct the field named in the message and send the request again."


class AssistantConflict(AssistantError):
    """The object already exists, e.g. a tool with the same name in the workspace (409)."""

    code: ClassVar[str] = "platform_conflict"
    hint = "Read the existing object and update it instead of creating it again."


class AssistantRateLimited(AssistantError):
    """The workspace's 120 requests/minute are spent; ``retry_after`` says when one fits."""

    code: ClassVar[str] = "platform_rate_limited"
    retryable: ClassVar[bool] = True
    hint = "Wait for retry_after seconds; the limit is shared with the agent's tool calls."


class AssistantUnavailable(AssistantError):
    """The platform could not be reached or failed transiently (5xx); safe to retry later."""

    code: ClassVar[str] = "platform_unavailable"
    retryable: ClassVar[bool] = True
    hint = "The assistant platform is temporarily unavailable; retry later."


class AssistantWriteOutcomeUnknown(AssistantError):
    """A write without an idempotency key was sent and no answer came: it may have been applied."""

    code: ClassVar[str] = "platform_write_outcome_unknown"
    hint = "List the objects to see whether the write was applied before sending it again."


class AssistantUnexpectedResponse(AssistantError):
    """The answer does not have the documented shape."""

    code: ClassVar[str] = "platform_unexpected_response"
    hint = "The platform answered in an undocumented shape; compare with docs/assistant-api.md."


class AssistantEndpointUnavailable(AssistantNotFound):
    """An endpoint this project only ASSUMES (not in the public reference) was refused.

    Raised instead of the status's own class when an assumed endpoint (workspace
    creation, secrets, members, usage, listings, the PMS connection, test
    conversations) answers 403, 404, 405 or 501: the real platform does not offer it
    to us, so what it would do is a person's task (docs/assistant-api.md "Assumed
    endpoints"). A subclass of :class:`AssistantNotFound`: on an assumed endpoint a 404
    cannot tell "no such endpoint" from "no such workspace". ``endpoint`` is the route
    template, e.g.
    ``PUT /v1/workspaces/{id}/secrets/{name}``.
    """

    code: ClassVar[str] = "platform_endpoint_unavailable"
    hint = "The platform does not offer this (assumed) endpoint: do it in the platform dashboard."

    def __init__(self, message: str, *, endpoint: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.endpoint = endpoint

    def as_dict(self) -> dict[str, Any]:
        """The failure's fields, with the refused endpoint."""
        return {**super().as_dict(), "endpoint": self.endpoint}
