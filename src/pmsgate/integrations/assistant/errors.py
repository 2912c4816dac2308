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
failure, and each class's code, hint and retryability, is data: ``errors.yaml`` next to
this module.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pmsgate.integrations.kit import ClassificationTable, UpstreamError

CLASSIFICATION = ClassificationTable.load("pmsgate.integrations.assistant", "errors.yaml")

# Statuses with which a platform refuses an endpoint it does not serve (or not to us).
ENDPOINT_REFUSED_STATUSES = frozenset({403, 404, 405, 501})


class AssistantError(UpstreamError, table=CLASSIFICATION):
    """Base of every failure talking to the assistant platform."""

    upstream: ClassVar[str] = "assistant"
    repr_fields: ClassVar[tuple[str, ...]] = ("code", "method", "path", "status")

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


# Each class's code, hint and retryability: ``classes:`` in errors.yaml.


class AssistantUnauthorized(AssistantError):
    """The platform refused the bearer token (401)."""


class AssistantForbidden(AssistantUnauthorized):
    """The token is valid but does not cover this workspace or action (403)."""


class AssistantNotFound(AssistantError):
    """The workspace, tool, skill, agent or node does not exist (404)."""


class AssistantValidationError(AssistantError):
    """The platform refused the request's content (400/422); the message names the field."""


class AssistantConflict(AssistantError):
    """The object already exists, e.g. a tool with the same name in the workspace (409)."""


class AssistantRateLimited(AssistantError):
    """The workspace's 120 requests/minute are spent; ``retry_after`` says when one fits."""


class AssistantUnavailable(AssistantError):
    """The platform could not be reached or failed transiently (5xx); safe to retry later."""


class AssistantWriteOutcomeUnknown(AssistantError):
    """A write without an idempotency key was sent and no answer came: it may have been applied."""


class AssistantUnexpectedResponse(AssistantError):
    """The answer does not have the documented shape."""


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

    def __init__(self, message: str, *, endpoint: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.endpoint = endpoint

    def as_dict(self) -> dict[str, Any]:
        """The failure's fields, with the refused endpoint."""
        return {**super().as_dict(), "endpoint": self.endpoint}
