"""What went wrong upstream, described for the gateway (DESIGN §2: translate at one boundary).

These errors describe the booking system; they are deliberately *not*
:class:`pmsgate.errors.PmsgateError` subclasses. The gateway turns them into its
own codes and HTTP statuses. Each class has a stable ``code`` and says whether
sending the same request again may succeed (``retryable``).

Messages are written by us and never contain a token, password or api key; the
upstream's own ``error_message`` is kept separately (scrubbed, shortened) in
``upstream_message``.
"""

from __future__ import annotations

from typing import Any


class PmsError(Exception):
    """Base of every failure talking to the booking system."""

    code = "pms_error"
    retryable = False
    hint = "See docs/kross-api.md for the booking-system contract."

    def __init__(
        self,
        message: str,
        *,
        operation: str | None = None,
        status: int | None = None,
        ruid: str | None = None,
        upstream_code: str | None = None,
        upstream_message: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.operation = operation
        self.status = status
        self.ruid = ruid
        self.upstream_code = upstream_code
        self.upstream_message = upstream_message
        if hint is not None:
            self.hint = hint

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, operation={self.operation!r}, "
            f"status={self.status!r}, upstream_code={self.upstream_code!r}, ruid={self.ruid!r})"
        )


class EdgeBlocked(PmsError):
    """The edge protection refused the request (error 1010): a configuration fault."""

    code = "pms_edge_blocked"
    hint = (
        "Every booking-system request needs a browser-style User-Agent starting with "
        "'Mozilla/5.0'; check PMSGATE_USER_AGENT."
    )


class HtmlInsteadOfJson(PmsError):
    """An HTML page came back where JSON was expected (e.g. the /apiv5 reference page)."""

    code = "pms_html_instead_of_json"
    hint = (
        "Operations live under {base_url}/v5/<path>; /apiv5 is the human reference page. "
        "Check PMSGATE_KROSS_BASE_URL."
    )


class UnexpectedResponse(PmsError):
    """The answer is neither the documented success envelope nor an error envelope."""

    code = "pms_unexpected_response"
    hint = "The booking system answered in an undocumented shape; compare with docs/kross-api.md."


class AuthenticationFailed(PmsError):
    """The booking system refused the credentials (hotel_id, username, password, api_key)."""

    code = "pms_auth_failed"
    hint = (
        "The booking-system credentials are not accepted (was the API password changed?). "
        "Reconnect the facility with the API user (apiNNNNN) and its password."
    )


class TokenRejected(PmsError):
    """The bearer token is missing, unknown, revoked or expired: get a new one, once."""

    code = "pms_token_rejected"
    hint = "Fetch a new token with auth/get-token and send the request again once."


class TooManySessions(PmsError):
    """The facility already has the maximum number of active tokens (50)."""

    code = "pms_too_many_sessions"
    hint = "Reuse the facility's cached token; new sessions are refused until older ones expire."


class RateLimited(PmsError):
    """A facility rate limit is spent; ``retry_after`` seconds says when one will fit."""

    code = "pms_rate_limited"
    retryable = True
    hint = "Wait for the time in retry_after before sending again."

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class UpstreamUnavailable(PmsError):
    """The booking system could not be reached or failed transiently; safe to retry."""

    code = "pms_unavailable"
    retryable = True
    hint = "The booking system is temporarily unavailable; retry with backoff."


class WriteOutcomeUnknown(PmsError):
    """A write was sent and no answer came: it may or may not have been applied."""

    code = "pms_write_outcome_unknown"
    hint = (
        "Do not send the write again blindly: read the reservation to see whether it was applied."
    )


class InvalidRequest(PmsError):
    """The booking system refused the request itself (400/404/409/413/415/422)."""

    code = "pms_invalid_request"
    hint = "Correct the request; see upstream_code for the booking system's reason."


class AccessDenied(PmsError):
    """A 403 other than the edge block, e.g. the gateway's IP is not whitelisted."""

    code = "pms_access_denied"
    hint = "Check the IP whitelisting and that the facility is linked to the partner."


class UnknownOperation(PmsError):
    """The operation does not exist (locally known, or answered OPERATION_NOT_FOUND)."""

    code = "pms_unknown_operation"
    hint = (
        "Use one of the operations in pmsgate/pms/operations.yaml; a path override lives in "
        "PMSGATE_KROSS_PATHS."
    )


class OutOfScopeOperation(PmsError):
    """The operation exists upstream but this integration never calls it."""

    code = "pms_out_of_scope_operation"
    hint = "This integration does not call it; see spec §4.1 for what is out of scope."
