"""Upstream failures become the gateway's own codes and statuses at one boundary."""

from __future__ import annotations

import pytest

from pmsgate.gateway.upstream_errors import translate
from pmsgate.integrations.kit import ErrorKind
from pmsgate.integrations.kross.errors import InvalidRequest, KrossError, RateLimited, TokenRejected


@pytest.mark.parametrize(
    ("error", "code", "status"),
    [
        (InvalidRequest("x", status=404, kind=ErrorKind.NOT_FOUND), "pms_not_found", 404),
        # the booking system said it with a code on a 200: the caller still gets a 404 / 409
        (InvalidRequest("x", status=200, kind=ErrorKind.NOT_FOUND), "pms_not_found", 404),
        (InvalidRequest("x", status=200, kind=ErrorKind.CONFLICT), "pms_conflict", 409),
        (InvalidRequest("x", status=409), "pms_conflict", 409),
        (
            InvalidRequest("x", status=200, kind=ErrorKind.INVALID_REQUEST),
            "pms_rejected_request",
            422,
        ),
        (
            TokenRejected("x", status=200, kind=ErrorKind.TOKEN_REJECTED),
            "kross_token_rejected",
            502,
        ),
    ],
)
def test_each_upstream_failure_has_its_code_and_status(
    error: KrossError, code: str, status: int
) -> None:
    translated = translate(error)
    assert (translated.code, translated.status) == (code, status)


def test_a_rate_limit_passes_its_retry_after_on_in_whole_seconds() -> None:
    translated = translate(RateLimited("x", status=429, retry_after=1.2))
    assert translated.headers == {"Retry-After": "2"}
