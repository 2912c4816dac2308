"""What went wrong talking to the notes workspace (the Notion API), and how it is told.

Like the booking system's and the assistant platform's errors, these describe the
upstream and are deliberately not :class:`pmsgate.errors.PmsgateError` subclasses:
callers (onboarding, the knowledge sync) decide what to tell their own users. They
derive from the upstream kit's :class:`~pmsgate.integrations.kit.UpstreamError`; each
class has a stable ``code`` and says whether sending the same request again may
succeed (``retryable``).

Which answer means which failure is data: ``errors.yaml`` next to this module (status
and Notion code → kind, each kind's class, and each class's code, hint and retryability);
:func:`translate` turns the SDK's or httpx's exception into one of them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx
from notion_client.errors import (
    HTTPResponseError,
    InvalidPathParameterError,
    RequestTimeoutError,
)

from pmsgate.clock import Clock
from pmsgate.errors import exception_leaves
from pmsgate.integrations.kit import (
    NOT_SENT,
    ClassificationTable,
    Scrubber,
    UpstreamError,
    parse_retry_after,
)

ERROR_TABLE = ClassificationTable.load("pmsgate.integrations.notion", "errors.yaml")


class NotionError(UpstreamError, table=ERROR_TABLE):
    """Base of every failure talking to the notes workspace (fields: see ``UpstreamError``)."""

    upstream = "notion"


# Each class's code, hint and retryability: ``classes:`` in errors.yaml.


class NotionUnauthorized(NotionError):
    """The integration token is missing, wrong or revoked (401)."""


class NotionForbidden(NotionError):
    """The token is valid but lacks a capability for this object (403)."""


class NotionNotFound(NotionError):
    """No such page, block or database, or it is not shared with the integration (404)."""


class NotionInvalidRequest(NotionError):
    """The API refused the request's content or headers (400: validation, version, JSON)."""


class NotionConflict(NotionError):
    """The API could not apply the change because of a concurrent one (409)."""


class NotionRateLimited(NotionError):
    """The API answered 429; ``retry_after`` (seconds) says when to try again."""


class NotionUnavailable(NotionError):
    """The API failed (5xx, 529 overload), timed out or could not be reached."""


class NotionUnexpectedResponse(NotionError):
    """An answer in a shape the client does not understand."""


# What the client catches around one SDK request and hands to :func:`translate`.
TRANSLATED = (
    HTTPResponseError,
    RequestTimeoutError,
    InvalidPathParameterError,
    httpx.TransportError,
    TimeoutError,
)


def translate(exc: Exception, *, scrub: Scrubber, clock: Clock) -> NotionError:
    """The SDK's or httpx's exception (one of :data:`TRANSLATED`) as this error family.

    ``scrub`` removes secrets from the upstream's message; ``clock`` dates a 429's
    ``Retry-After``.
    """
    if isinstance(exc, RequestTimeoutError | TimeoutError):
        return NotionUnavailable("the notes API did not answer in time")
    if isinstance(exc, InvalidPathParameterError):
        return NotionInvalidRequest(
            "an id would change the request path; it was not sent", may_have_been_sent=False
        )
    if isinstance(exc, httpx.TransportError):
        return NotionUnavailable(
            f"the notes API could not be reached ({type(exc).__name__})",
            may_have_been_sent=not isinstance(exc, NOT_SENT),
        )
    assert isinstance(exc, HTTPResponseError)
    status = exc.status
    body = _error_body(exc.body)
    upstream_code = body.code or _code_value(exc.code)
    kind = ERROR_TABLE.classify(status, upstream_code)
    error_class = NotionError.for_kind(kind)
    return error_class(
        f"the notes API answered {status} {upstream_code}",
        status=status,
        upstream_code=upstream_code,
        upstream_message=scrub(body.message or str(exc)),
        request_id=body.request_id or exc.request_id,
        retry_after=parse_retry_after(exc.headers.get("retry-after"), clock.now())
        if error_class is NotionRateLimited
        else None,
        # Notion refuses a 429 before doing anything: even a write may be sent again.
        may_have_been_sent=error_class is not NotionRateLimited,
    )


@dataclass(frozen=True)
class _ErrorBody:
    """What a Notion error object says: ``{object: "error", status, code, message, request_id}``."""

    code: str | None = None
    message: str | None = None
    request_id: str | None = None


def _error_body(body: str) -> _ErrorBody:
    try:
        parsed = json.loads(body)
    except (TypeError, ValueError):
        return _ErrorBody()
    if not isinstance(parsed, dict):
        return _ErrorBody()

    def text(key: str) -> str | None:
        value = parsed.get(key)
        return value if isinstance(value, str) and value else None

    return _ErrorBody(text("code"), text("message"), text("request_id"))


def _code_value(code: Any) -> str:
    return str(getattr(code, "value", code))


def first_error(group: BaseExceptionGroup[Any]) -> BaseException:
    """The first NotionError inside a (nested) exception group, else its first exception."""
    leaves = exception_leaves(group)
    return next((e for e in leaves if isinstance(e, NotionError)), leaves[0] if leaves else group)
