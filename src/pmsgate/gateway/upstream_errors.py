"""Translation of booking-system failures (``pms.errors``) into the service's own errors.

This is the one boundary where an upstream failure becomes a code and an HTTP
status a caller sees (docs/requirements.md R10.2). Messages are ours; the upstream's own code is
named, its ruid kept for support, and nothing secret is ever included.
"""

from __future__ import annotations

import math

from pmsgate.errors import PmsgateError
from pmsgate.integrations.kit import ErrorKind
from pmsgate.integrations.kross import errors as kross

RECONNECT_HINT = (
    "The booking system refused this facility's credentials (was the API password "
    "changed?). Reconnect it with `pmsgate facilities reconnect HOTEL_ID` or "
    "PUT /api/admin/kross/connect; calls resume as soon as the credentials work."
)

# code, HTTP status for each upstream failure kind.
_STATUS: dict[type[kross.KrossError], tuple[str, int]] = {
    kross.UnknownOperation: ("unknown_operation", 404),
    kross.OutOfScopeOperation: ("operation_out_of_scope", 403),
    kross.AuthenticationFailed: ("pms_auth_failed", 502),
    kross.TokenRejected: ("kross_token_rejected", 502),
    kross.EdgeBlocked: ("pms_edge_blocked", 502),
    kross.HtmlInsteadOfJson: ("pms_misconfigured_base_url", 502),
    kross.UnexpectedResponse: ("pms_unexpected_response", 502),
    kross.AccessDenied: ("pms_access_denied", 502),
    kross.TooManySessions: ("pms_too_many_sessions", 503),
    kross.RateLimited: ("pms_rate_limited", 429),
    kross.UpstreamUnavailable: ("pms_unavailable", 503),
    kross.WriteOutcomeUnknown: ("write_outcome_unknown", 504),
}

# Upstream refusals of the request itself keep a 4xx the caller can act on, whether the
# booking system said so with a status or with an error code on a 200.
_INVALID_KIND = {
    ErrorKind.NOT_FOUND: ("pms_not_found", 404),
    ErrorKind.CONFLICT: ("pms_conflict", 409),
}
_INVALID_STATUS = {404: ("pms_not_found", 404), 409: ("pms_conflict", 409)}


def translate(error: kross.KrossError) -> PmsgateError:
    """The caller-facing error for an upstream failure."""
    headers: dict[str, str] = {}
    if isinstance(error, kross.InvalidRequest):
        by_kind = _INVALID_KIND.get(error.kind) if error.kind is not None else None
        code, status = by_kind or _INVALID_STATUS.get(
            error.status or 0, ("pms_rejected_request", 422)
        )
    else:
        code, status = next(
            (value for kind, value in _STATUS.items() if isinstance(error, kind)),
            ("pms_error", 502),
        )
    if isinstance(error, kross.RateLimited) and error.retry_after is not None:
        headers["Retry-After"] = str(max(1, math.ceil(error.retry_after)))
    message = error.message
    if error.upstream_code:
        message = f"{message} (booking system said {error.upstream_code})"
    if error.ruid:
        message = f"{message} [ruid {error.ruid}]"
    hint = RECONNECT_HINT if isinstance(error, kross.AuthenticationFailed) else error.hint
    return PmsgateError(message, code=code, status=status, hint=hint, headers=headers)


def auth_failed(reason: str | None) -> PmsgateError:
    """The error every call of a facility in `error` state answers until it is reconnected."""
    detail = f" Last error: {reason}" if reason else ""
    return PmsgateError(
        f"The facility's booking-system integration is in error state.{detail}",
        code="pms_auth_failed",
        status=502,
        hint=RECONNECT_HINT,
    )
