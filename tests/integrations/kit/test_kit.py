"""The upstream kit: classification tables, Retry-After, the scrubber, the retry policy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import ClassVar

import pytest
import stamina

from pmsgate.integrations.kit import (
    ClassificationTable,
    ErrorKind,
    RetryPolicy,
    Scrubber,
    UpstreamError,
    parse_retry_after,
)

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)

TABLE = ClassificationTable.from_data(
    "test",
    {
        "rules": [
            {"kind": "rate_limited", "status": [429]},
            {"kind": "unavailable", "status": [408, "5xx"]},
            {"kind": "auth_failed", "context": ["token_request"], "status": ["4xx"]},
            {"kind": "auth_failed", "context": ["token_request"], "codes": ["*"]},
            {"kind": "token_rejected", "codes": ["INVALID_TOKEN", 1002]},
            {"kind": "invalid_request", "status": ["4xx"]},
        ]
    },
)


@pytest.mark.parametrize(
    ("status", "code", "context", "kind"),
    [
        (429, None, "token_request", ErrorKind.RATE_LIMITED),
        (503, "SERVER_ERROR", "call", ErrorKind.UNAVAILABLE),
        (408, None, "token_request", ErrorKind.UNAVAILABLE),
        (400, 1001, "token_request", ErrorKind.AUTH_FAILED),
        (200, "LOGIN_FAILED", "token_request", ErrorKind.AUTH_FAILED),
        (200, "invalid_token", "call", ErrorKind.TOKEN_REJECTED),
        (400, "1002", "call", ErrorKind.TOKEN_REJECTED),
        (404, None, "call", ErrorKind.INVALID_REQUEST),
        (200, "SOMETHING_NEW", "call", ErrorKind.UNEXPECTED),
    ],
)
def test_the_first_matching_rule_names_the_kind(
    status: int, code: object, context: str, kind: ErrorKind
) -> None:
    assert TABLE.classify(status, code, context=context) is kind


def test_an_empty_code_is_no_code() -> None:
    assert TABLE.classify(200, "", context="token_request") is ErrorKind.UNEXPECTED


def test_a_malformed_table_is_refused_with_its_name() -> None:
    with pytest.raises(ValueError, match="broken"):
        ClassificationTable.from_data("broken", {"rules": [{"kind": "x", "status": ["4yy"]}]})


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [
        ("7", 7.0),
        (" 2.5 ", 2.5),
        ("-3", 0.0),
        ("inf", None),
        ("soon", None),
        ("", None),
        (None, None),
        (format_datetime(NOW + timedelta(seconds=30), usegmt=True), 30.0),
        (format_datetime(NOW - timedelta(seconds=30), usegmt=True), 0.0),
    ],
)
def test_retry_after_reads_seconds_and_http_dates(raw: str | None, seconds: float | None) -> None:
    assert parse_retry_after(raw, NOW) == seconds


def test_the_scrubber_removes_every_secret_and_cuts_long_text() -> None:
    scrub = Scrubber(["hunter2", "hunter2-longer", None], limit=40)

    assert scrub("password hunter2-longer refused") == "password *** refused"
    assert scrub("x" * 50) == "x" * 37 + "..."
    assert scrub(None) is None
    assert "tok" not in (scrub.with_secrets("tok")("bad tok") or "")


class Flaky(UpstreamError):
    retryable = True


class Final(UpstreamError):
    code: ClassVar[str] = "final"


POLICY = RetryPolicy(attempts=3, deadline_s=20.0, max_retry_after_s=10.0)


@pytest.mark.parametrize(
    ("error", "replay_safe", "verdict"),
    [
        (Flaky("x"), True, True),
        (Flaky("x", retry_after=4.0), True, 4.0),
        (Flaky("x", retry_after=11.0), True, False),
        (Flaky("x"), False, False),
        (Flaky("x", may_have_been_sent=False), False, True),
        (Final("x"), True, False),
        (ValueError("x"), True, False),
    ],
)
def test_the_policy_retries_only_what_is_safe_and_worth_waiting_for(
    error: BaseException, replay_safe: bool, verdict: bool | float
) -> None:
    assert POLICY.verdict(error, replay_safe=replay_safe) == verdict


async def test_a_request_is_attempted_at_most_the_policy_s_attempts() -> None:
    tries = 0
    with pytest.raises(Flaky):
        async for attempt in POLICY.retrying(replay_safe=True):
            with attempt:
                tries += 1
                raise Flaky("still down")

    assert tries == 3


async def test_an_upstream_wait_goes_through_the_hook_once() -> None:
    seen: list[float] = []

    def hold(error: UpstreamError, wait: float) -> float:
        seen.append(wait)
        return 0.0

    tries = 0
    async for attempt in POLICY.retrying(replay_safe=True, on_wait=hold):
        with attempt:
            tries += 1
            if tries == 1:
                raise Flaky("busy", retry_after=2.0)

    assert (tries, seen) == (2, [2.0])


async def test_stamina_counts_attempts_even_in_testing_mode() -> None:
    with stamina.set_testing(True, attempts=1_000, cap=True):
        tries = 0
        with pytest.raises(Flaky):
            async for attempt in RetryPolicy(attempts=2).retrying(replay_safe=True):
                with attempt:
                    tries += 1
                    raise Flaky("down")
    assert tries == 2


# --- error families described by their errors.yaml ------------------------------------------

FAMILY_TABLE = ClassificationTable.from_data(
    "family",
    {
        "rules": [{"kind": "rate_limited", "status": [429]}],
        "classes": {
            "ShopError": {"code": "shop_error", "hint": "See the shop's docs."},
            "ShopBusy": {"code": "shop_busy", "retryable": True, "sent": False},
            "ShopGone": {"code": "shop_gone"},
        },
        "kinds": {"rate_limited": "ShopBusy", "not_found": "ShopGone"},
    },
)


class ShopError(UpstreamError, table=FAMILY_TABLE):
    upstream: ClassVar[str] = "shop"


class ShopBusy(ShopError):
    """Told to come back later."""


class ShopGone(ShopError):
    """No such thing."""


def test_a_family_takes_codes_hints_and_defaults_from_its_table() -> None:
    assert (ShopError.code, ShopError.hint, ShopError.retryable) == (
        "shop_error",
        "See the shop's docs.",
        False,
    )
    busy = ShopBusy("later")
    assert (busy.code, busy.retryable, busy.may_have_been_sent, busy.hint) == (
        "shop_busy",
        True,
        False,
        "See the shop's docs.",
    )
    assert ShopGone("x").may_have_been_sent is True
    assert ShopBusy("x", may_have_been_sent=True).may_have_been_sent is True


def test_a_family_names_the_class_of_each_kind_and_refuses_an_unnamed_one() -> None:
    assert ShopError.for_kind(ErrorKind.RATE_LIMITED) is ShopBusy
    assert ShopError.for_kind(ErrorKind.NOT_FOUND) is ShopGone
    with pytest.raises(LookupError):
        ShopError.for_kind(ErrorKind.CONFLICT)
    with pytest.raises(LookupError):
        ShopBusy.for_kind(ErrorKind.NOT_FOUND)


def test_a_class_missing_from_its_table_is_refused_when_defined() -> None:
    with pytest.raises(TypeError, match="ShopTypo"):

        class ShopTypo(ShopError):
            pass


@pytest.mark.parametrize(
    "family",
    [
        "pmsgate.integrations.kross.errors:KrossError",
        "pmsgate.integrations.assistant.errors:AssistantError",
        "pmsgate.integrations.notion.errors:NotionError",
    ],
)
def test_every_kind_of_each_upstream_has_a_class_of_its_family(family: str) -> None:
    from importlib import import_module

    module, name = family.split(":")
    root = getattr(import_module(module), name)
    for kind in ErrorKind:
        assert issubclass(root.for_kind(kind), root)
