"""Trying credentials upstream before they are stored, and the words for a failure.

A :data:`Verifier` accepts credentials or raises; :func:`kross_verifier` is the usual one
(one token request, after a permit of the facility's budget). A failure is either the
booking system's verdict on the credentials (:func:`is_refusal`: 422, the caller corrects
them) or no verdict at all (unreachable, rate-limited, budget spent: the usual error, with a
hint to retry); :func:`verification_error` is the caller-facing error of both, and
:func:`failure_details` what the audit trail says of it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pmsgate.errors import InvalidInput, PmsgateError
from pmsgate.gateway.upstream_errors import translate
from pmsgate.integrations.kross.client import KrossClient, Token
from pmsgate.integrations.kross.credentials import Credentials
from pmsgate.integrations.kross.errors import AuthenticationFailed, InvalidRequest, KrossError

Verifier = Callable[[Credentials], Awaitable[None]]


def kross_verifier(
    client: KrossClient,
    permit: Callable[[str], Awaitable[None]] | None = None,
    keep: Callable[[Token], None] | None = None,
) -> Verifier:
    """A verifier that accepts credentials when the booking system issues a token for them.

    ``permit(hotel_id)`` runs before the token request (the gateway's ``token_permit``):
    trying credentials spends the facility's upstream budget like any other call, and its
    error (429 ``upstream_budget_exhausted``) passes through when the budget is spent.
    ``keep`` receives the token issued, so that it can serve as the facility's new token
    (each token is a session upstream, 50 at most per facility) instead of being dropped.
    """

    async def verify(credentials: Credentials) -> None:
        if permit is not None:
            await permit(credentials.hotel_id)
        token = await client.get_token(credentials)
        if keep is not None:
            keep(token)

    return verify


def is_refusal(error: KrossError) -> bool:
    """True when the booking system gave a verdict on the credentials themselves."""
    return isinstance(error, AuthenticationFailed | InvalidRequest)


def verification_error(
    error: KrossError | PmsgateError,
    *,
    outcome: str = "nothing was changed",
    retry_hint: str | None = None,
) -> PmsgateError:
    """The caller-facing error when credentials could not be verified upstream.

    ``outcome`` says what was (not) stored; ``retry_hint`` replaces the hint when there was
    no verdict (timeout, 5xx, 429, the facility's budget spent): e.g. retry or --no-verify.
    """
    if isinstance(error, KrossError) and is_refusal(error):
        # A verdict on the credentials themselves: the caller must correct them (422).
        reason = ": ".join(part for part in (error.upstream_code, error.upstream_message) if part)
        detail = f" (booking system said {reason})" if reason else ""
        return InvalidInput(
            f"The booking system refused these credentials{detail}; {outcome}.",
            code=error.code,
            hint=error.hint,
        )
    # No verdict (unreachable, rate-limited, budget spent, misconfigured): the usual code.
    translated = translate(error) if isinstance(error, KrossError) else error
    return PmsgateError(
        f"{translated.message} The credentials could not be verified; {outcome}.",
        code=translated.code,
        status=translated.status,
        hint=retry_hint or translated.hint,
        headers=translated.headers,
    )


def failure_details(error: KrossError | PmsgateError) -> dict[str, Any]:
    """What an audit event says of a failed verification: its code and kind, never a secret."""
    if isinstance(error, KrossError):
        cause = (
            "the booking system refused the credentials"
            if is_refusal(error)
            else "the booking system gave no verdict"
        )
        return {"cause": cause, "error": error.code, "upstream_code": error.upstream_code}
    return {"cause": "the credentials could not be tried", "error": error.code}


def refused(error: KrossError | PmsgateError) -> bool:
    """True when ``error`` is the booking system's verdict on the credentials."""
    return isinstance(error, KrossError) and is_refusal(error)
