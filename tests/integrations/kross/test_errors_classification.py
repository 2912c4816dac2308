"""The booking system's error classification (``integrations/kross/errors.yaml``), as data.

Each case is an answer (HTTP status, upstream error_code, context) and the kind it must
get. The last test checks that every rule of the table is the first match of at least
one case, so a row added to the YAML without a case here fails the suite.
"""

from __future__ import annotations

import pytest

from pmsgate.integrations.kit import ErrorKind, UpstreamError
from pmsgate.integrations.kross.errors import (
    CALL,
    CLASSIFICATION,
    TOKEN_REQUEST,
    AuthenticationFailed,
    KrossError,
    RateLimited,
    TokenRejected,
    TooManySessions,
    UnknownOperation,
    UpstreamUnavailable,
)

K = ErrorKind

# The spellings of "invalid or expired token" the table must know (reference/upstreams.md §1).
TOKEN_SPELLINGS = [
    "INVALID_TOKEN",
    "TOKEN_INVALID",
    "TOKEN_EXPIRED",
    "EXPIRED_TOKEN",
    "INVALID_AUTH_TOKEN",
    "AUTH_TOKEN_EXPIRED",
    "AUTH_TOKEN_INVALID",
    "TOKEN_NOT_VALID",
    "TOKEN_NOT_FOUND",
    "MISSING_TOKEN",
    "AUTH_FAILED",
]
# The same, spelled as a number by the {error_code, error_message, ruid} family of clients.
TOKEN_NUMBERS = [401, 419, 440, 498]

CASES: list[tuple[int, object, str, ErrorKind]] = [
    # the edge's plain-text block, on a login too
    (403, "1010", CALL, K.EDGE_BLOCKED),
    (403, 1010, TOKEN_REQUEST, K.EDGE_BLOCKED),
    # transient refusals, in both contexts and whatever the status
    (429, "TOO_MANY_SESSIONS", TOKEN_REQUEST, K.TOO_MANY_SESSIONS),
    (200, "max_sessions_reached", TOKEN_REQUEST, K.TOO_MANY_SESSIONS),
    (429, "RATE_LIMITED", CALL, K.RATE_LIMITED),
    (200, "TOO_MANY_REQUESTS", CALL, K.RATE_LIMITED),
    (429, None, TOKEN_REQUEST, K.RATE_LIMITED),
    (429, "SOMETHING_NEW", CALL, K.RATE_LIMITED),
    (200, "SERVER_ERROR", TOKEN_REQUEST, K.UNAVAILABLE),
    (503, "SERVICE_UNAVAILABLE", CALL, K.UNAVAILABLE),
    (500, None, TOKEN_REQUEST, K.UNAVAILABLE),
    (502, "INVALID_TOKEN", CALL, K.UNAVAILABLE),
    (408, None, TOKEN_REQUEST, K.UNAVAILABLE),
    # a login refused in any non-transient shape is a verdict on the credentials
    (401, "AUTH_FAILED", TOKEN_REQUEST, K.AUTH_FAILED),
    (400, 1001, TOKEN_REQUEST, K.AUTH_FAILED),
    (403, "INVALID_CREDENTIALS", TOKEN_REQUEST, K.AUTH_FAILED),
    (404, None, TOKEN_REQUEST, K.AUTH_FAILED),
    (422, None, TOKEN_REQUEST, K.AUTH_FAILED),
    (200, "LOGIN_FAILED", TOKEN_REQUEST, K.AUTH_FAILED),
    (200, "SOMETHING_NEW", TOKEN_REQUEST, K.AUTH_FAILED),
    # a token refused on a call, in every public spelling
    *[(200, code, CALL, K.TOKEN_REJECTED) for code in TOKEN_SPELLINGS],
    *[(401, code.lower(), CALL, K.TOKEN_REJECTED) for code in TOKEN_SPELLINGS],
    *[(200, number, CALL, K.TOKEN_REJECTED) for number in TOKEN_NUMBERS],
    (200, "401", CALL, K.TOKEN_REJECTED),
    (200, 401.0, CALL, K.TOKEN_REJECTED),
    (401, 401, CALL, K.TOKEN_REJECTED),
    # ... but on a login the same number is a refused login
    (200, 401, TOKEN_REQUEST, K.AUTH_FAILED),
    (401, None, CALL, K.TOKEN_REJECTED),
    (401, "SOMETHING_NEW", CALL, K.TOKEN_REJECTED),
    # no such operation, and no such object
    (404, "OPERATION_NOT_FOUND", CALL, K.UNKNOWN_OPERATION),
    (200, "METHOD_NOT_FOUND", CALL, K.UNKNOWN_OPERATION),
    (404, "NOT_FOUND", CALL, K.NOT_FOUND),
    (404, "RESERVATION_GONE", CALL, K.NOT_FOUND),
    (200, "RESERVATION_NOT_FOUND", CALL, K.NOT_FOUND),
    (404, None, CALL, K.UNKNOWN_OPERATION),
    # a JSON 404 whose code only repeats the status: no such path either
    (404, 404, CALL, K.UNKNOWN_OPERATION),
    (404, "404", CALL, K.UNKNOWN_OPERATION),
    # the request itself refused
    (403, "IP_NOT_ALLOWED", CALL, K.FORBIDDEN),
    (403, None, CALL, K.FORBIDDEN),
    (409, "NOT_AVAILABLE", CALL, K.CONFLICT),
    (200, "NOT_AVAILABLE", CALL, K.CONFLICT),
    (400, "INVALID_REQUEST", CALL, K.INVALID_REQUEST),
    (413, "PAYLOAD_TOO_LARGE", CALL, K.INVALID_REQUEST),
    (415, None, CALL, K.INVALID_REQUEST),
    # an unknown code on a 200 is an error, never data
    (200, "SOMETHING_NEW", CALL, K.INVALID_REQUEST),
    (200, 4711, CALL, K.INVALID_REQUEST),
    # nothing matches: the table's default
    (302, None, CALL, K.UNEXPECTED),
    (302, None, TOKEN_REQUEST, K.UNEXPECTED),
]


@pytest.mark.parametrize(("status", "code", "context", "kind"), CASES)
def test_each_answer_shape_gets_its_kind(
    status: int, code: object, context: str, kind: ErrorKind
) -> None:
    assert CLASSIFICATION.classify(status, code, context=context) is kind


def test_every_rule_of_the_table_is_the_first_match_of_some_case() -> None:
    def first_rule(status: int, code: object, context: str) -> int | None:
        text = None if code is None else str(code).casefold()
        return next(
            (i for i, r in enumerate(CLASSIFICATION.rules) if r.matches(status, text, context)),
            None,
        )

    hit = {first_rule(status, code, context) for status, code, context, _ in CASES}
    assert hit >= set(range(len(CLASSIFICATION.rules)))
    assert None in hit  # the default is exercised too


def test_the_token_spellings_the_table_knows_are_all_tested() -> None:
    # A spelling added to the YAML must be added to TOKEN_SPELLINGS (and so to CASES).
    known = set()
    for rule in CLASSIFICATION.rules:
        if rule.kind is K.TOKEN_REJECTED and rule.codes is not None:
            known |= rule.codes
    assert known == {code.casefold() for code in TOKEN_SPELLINGS} | {
        str(number) for number in TOKEN_NUMBERS
    }


def test_kross_errors_share_the_upstream_root_and_keep_ruid_as_the_request_id() -> None:
    error = TokenRejected("rejected", operation="reservations/get-list", ruid="r-9")
    assert isinstance(error, UpstreamError)
    assert isinstance(error, KrossError)
    assert error.request_id == "r-9"
    assert error.ruid == "r-9"
    assert error.upstream == "pms"
    assert error.as_dict()["code"] == "kross_token_rejected"


@pytest.mark.parametrize(
    "error_class",
    [AuthenticationFailed, TokenRejected, TooManySessions, RateLimited, UnknownOperation],
)
def test_refusals_the_server_did_not_process_were_not_applied(
    error_class: type[KrossError],
) -> None:
    assert error_class("refused").may_have_been_sent is False


def test_a_transient_failure_may_have_been_applied_unless_the_client_knows_otherwise() -> None:
    assert UpstreamUnavailable("failed").may_have_been_sent is True
    assert UpstreamUnavailable("never sent", may_have_been_sent=False).may_have_been_sent is False
