"""What went wrong upstream, described for the gateway (docs/requirements.md R10.2).

These errors describe the booking system; they are deliberately *not*
:class:`pmsgate.errors.PmsgateError` subclasses. They derive from the upstream kit's
:class:`~pmsgate.integrations.kit.UpstreamError`; the gateway turns them into its own codes and
HTTP statuses. Each class has a stable ``code``, says whether sending the same request
again may succeed (``retryable``) and whether the request may have been applied
(``may_have_been_sent``: False when nothing was sent, or the server refused it unprocessed).

Which answer is which class is data: ``errors.yaml`` next to this module maps an HTTP
status, the upstream's ``error_code`` and the context (a token request or a call) to an
:class:`~pmsgate.integrations.kit.ErrorKind`; the client maps the kind to a class here.
Each class's code, hint and defaults are in the same file's ``classes:``.

Messages are written by us and never contain a token, password or api key; the
upstream's own ``error_message`` is kept separately (scrubbed, shortened) in
``upstream_message``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pmsgate.integrations.kit import ClassificationTable, ErrorKind, UpstreamError

CLASSIFICATION = ClassificationTable.load("pmsgate.integrations.kross", "errors.yaml")

# Contexts of the classification table: a login, or any other operation with a bearer token.
TOKEN_REQUEST = "token_request"
CALL = "call"


class KrossError(UpstreamError, table=CLASSIFICATION):
    """Base of every failure talking to the booking system."""

    upstream: ClassVar[str] = "pms"
    repr_fields: ClassVar[tuple[str, ...]] = (
        "code",
        "operation",
        "status",
        "upstream_code",
        "ruid",
    )

    def __init__(
        self,
        message: str,
        *,
        ruid: str | None = None,
        kind: ErrorKind | None = None,
        **kwargs: Any,
    ) -> None:
        if kwargs.get("request_id") is None:
            kwargs["request_id"] = ruid
        super().__init__(message, **kwargs)
        # The classification that produced this error (None when raised locally).
        self.kind = kind

    @property
    def ruid(self) -> str | None:
        """The booking system's request id (``ruid``), for support."""
        return self.request_id


# Each class's code, hint, retryability and whether it may have been sent: ``classes:`` in
# errors.yaml.


class EdgeBlocked(KrossError):
    """The edge protection refused the request (error 1010): a configuration fault."""


class HtmlInsteadOfJson(KrossError):
    """An HTML page came back where JSON was expected (e.g. the /apiv5 reference page)."""


class UnexpectedResponse(KrossError):
    """The answer is neither the documented success envelope nor an error envelope."""


class AuthenticationFailed(KrossError):
    """The booking system refused a login (any non-transient refusal of auth/get-token)."""


class TokenRejected(KrossError):
    """The bearer token is missing, unknown, revoked or expired: get a new one, once."""


class TooManySessions(KrossError):
    """The facility already has the maximum number of active tokens (50)."""


class RateLimited(KrossError):
    """A facility rate limit is spent; ``retry_after`` seconds says when one will fit."""


class UpstreamUnavailable(KrossError):
    """The booking system could not be reached or failed transiently; safe to retry."""


class WriteOutcomeUnknown(KrossError):
    """A write was sent and no answer came: it may or may not have been applied."""


class InvalidRequest(KrossError):
    """The booking system refused the request itself (400/404/409/413/415/422, or a code)."""


class AccessDenied(KrossError):
    """A 403 other than the edge block, e.g. the gateway's IP is not whitelisted."""


class UnknownOperation(KrossError):
    """The operation does not exist (locally known, or answered "not found" on every path)."""


class OutOfScopeOperation(KrossError):
    """The operation exists upstream but this integration never calls it."""


# --- what one request came to, for the gateway's latency histogram -------------------------

# The ``outcome`` of one HTTP request to the booking system: a small fixed set (a metric's
# label), derived from the classification above, never from the upstream's own codes.
REQUEST_OUTCOMES = (
    "ok",  # a success envelope
    "client_error",  # the request itself was refused: invalid, not found, conflict, no such path
    "auth_failed",  # credentials, token or access refused (edge block included)
    "rate_limited",  # a rate limit or the session cap
    "server_error",  # a 5xx/408 or a server-error code: the booking system failed
    "unexpected",  # an answer in no documented shape (HTML, no envelope)
    "timeout",  # sent, and no answer came (timeout, connection dropped)
    "unreachable",  # never sent: the connection could not be opened
)

_OUTCOME_OF_KIND = {
    ErrorKind.AUTH_FAILED: "auth_failed",
    ErrorKind.TOKEN_REJECTED: "auth_failed",
    ErrorKind.FORBIDDEN: "auth_failed",
    ErrorKind.EDGE_BLOCKED: "auth_failed",
    ErrorKind.UNKNOWN_OPERATION: "client_error",
    ErrorKind.NOT_FOUND: "client_error",
    ErrorKind.INVALID_REQUEST: "client_error",
    ErrorKind.CONFLICT: "client_error",
    ErrorKind.RATE_LIMITED: "rate_limited",
    ErrorKind.TOO_MANY_SESSIONS: "rate_limited",
    ErrorKind.UNAVAILABLE: "server_error",
    ErrorKind.UNEXPECTED: "unexpected",
}


def request_outcome(error: KrossError | None) -> str:
    """The outcome (one of :data:`REQUEST_OUTCOMES`) of a request that ended in ``error``."""
    if error is None:
        return "ok"
    if error.status is None and error.kind is None:
        # Raised by the client on the transport: nothing came back.
        return "timeout" if error.may_have_been_sent else "unreachable"
    if isinstance(error, HtmlInsteadOfJson):
        return "unexpected"
    if error.kind is not None:
        return _OUTCOME_OF_KIND[error.kind]
    return "unexpected"
