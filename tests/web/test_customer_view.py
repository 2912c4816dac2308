"""Each counter and problem of a sync job, and each event, told in words.

Told by sync_words, customer_events and customer_view.

These read the English words (the source language); the Italian ones are checked in
``test_customer_words_it.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pmsgate.i18n import use_locale
from pmsgate.storage.audit import AuditEventView
from pmsgate.storage.knowledge import SyncJobView
from pmsgate.storage.models import SyncJobKind, SyncJobStatus
from pmsgate.web.customer_events import event_text, group_events
from pmsgate.web.customer_view import reconnect_words
from pmsgate.web.sync_words import error_words, explain_job

WHEN = datetime(2026, 11, 24, 9, 30, tzinfo=UTC)
_CAMEL = re.compile(r"\b[a-z]+[A-Z][A-Za-z]*\b")


@pytest.fixture(autouse=True)
def english_reader() -> Iterator[None]:
    """Every test here reads English (the default reader is Italian, in Rome)."""
    with use_locale("en", "Europe/Rome"):
        yield


def job(
    kind: SyncJobKind = "commit",
    status: SyncJobStatus = "succeeded",
    counters: dict[str, Any] | None = None,
    details: list[dict[str, Any]] | None = None,
    error_code: str | None = None,
    done: int = 0,
    total: int = 0,
) -> SyncJobView:
    return SyncJobView(
        id="job-1",
        student_id="stu-1",
        kind=kind,
        status=status,
        progress_done=done,
        progress_total=total,
        counters=counters,
        report={"details": details or []},
        error_code=error_code,
        error="internal message with stu-1" if error_code else None,
        runner_id="runner",
        created_at=WHEN,
        started_at=WHEN,
        heartbeat_at=None,
        finished_at=None if status in ("queued", "running") else WHEN,
    )


def words(explained: Any) -> str:
    text = " ".join([explained.headline, *explained.lines, *explained.fixes])
    assert not _CAMEL.findall(text), text
    assert "stu-1" not in text and "_" not in text, text
    return text


def test_every_commit_counter_is_a_sentence() -> None:
    counters = {
        "apartments": 5,
        "unresolvedApartments": 1,
        "created": 40,
        "updated": 3,
        "unchanged": 70,
        "deleted": 2,
        "failed": 1,
        "blockedByTemplate": 1,
        "directoriesCreated": 2,
    }
    details: list[dict[str, Any]] = [
        {"name": "Blue", "status": "synced"},
        {
            "name": "Red",
            "status": "blocked_by_template",
            "notesPageId": "p",
            "missingSections": ["wifi", "house_rules"],
        },
        {"name": "Green", "status": "unresolved", "unresolvedReason": "listing_not_active"},
        {"name": "White", "status": "failed", "error": {"code": "x", "message": "y"}},
    ]
    explained = explain_job(job(counters=counters, details=details), "connected")
    text = words(explained)
    assert explained.tone == "warn"
    assert explained.headline == "Update finished with problems to fix"
    assert "5 apartments went through the update." in text
    assert (
        "40 new pieces of knowledge added, 3 updated, 70 already up to date, "
        "2 removed because they left your notes." in text
    )
    assert "2 apartments got their own section for the first time." in text
    assert "1 apartment skipped because its notes page is incomplete" in text
    assert "Red: add the missing sections “WiFi” and “House rules” to its notes page" in text
    assert "Green was skipped: its listing is not active in your booking system." in text
    assert "White could not be read or saved this time" in text


@pytest.mark.parametrize(
    ("reason", "sentence"),
    [
        ("no_listing", "it is not matched to a listing of your assistant yet"),
        ("listing_not_active", "its listing is not active in your booking system"),
        ("pms_not_linked", "your booking system is not connected yet"),
    ],
)
def test_each_unresolved_reason_is_a_sentence(reason: str, sentence: str) -> None:
    details = [{"name": "Blue", "unresolvedReason": reason, "templateComplete": True}]
    counters = {"apartments": 1, "unresolvedApartments": 1, "incompleteTemplates": 0}
    text = words(explain_job(job("dry_run", counters=counters, details=details), "connected"))
    assert f"Blue was skipped: {sentence}." in text


def test_a_dry_run_while_disconnected_is_a_warning_and_says_what_to_do() -> None:
    details = [
        {"name": n, "unresolvedReason": "pms_integration_error", "templateComplete": True}
        for n in ("Blue", "Red")
    ]
    counters = {"apartments": 2, "unresolvedApartments": 2, "incompleteTemplates": 0}
    down = explain_job(job("dry_run", counters=counters, details=details), "error")
    assert (down.tone, down.headline) == (
        "warn",
        "Nothing can sync until you reconnect your booking system",
    )
    assert "found 2 apartments, but none can be matched" in words(down)
    back = explain_job(job("dry_run", counters=counters, details=details), "connected")
    assert back.tone == "warn" and "ran while your booking system was disconnected" in words(back)


def test_a_page_without_notion_and_a_clean_check() -> None:
    details = [{"name": "Blue", "templateComplete": False, "notesPageId": None}]
    counters = {"apartments": 1, "unresolvedApartments": 0, "incompleteTemplates": 1}
    text = words(explain_job(job("dry_run", counters=counters, details=details), "connected"))
    assert "1 notes page is incomplete and would be skipped" in text
    assert "Blue has no notes page yet" in text
    clean = explain_job(
        job("dry_run", counters={"apartments": 3, "incompleteTemplates": 0}), "connected"
    )
    assert (clean.tone, clean.headline) == ("ok", "Check finished: ready to update")
    assert "Every notes page follows the template." in words(clean)


def test_running_and_failed_jobs() -> None:
    running = explain_job(job(status="running", done=2, total=5), "connected")
    assert running.tone == "busy" and "2 of 5 apartments done so far." in words(running)
    interrupted = explain_job(job(status="failed", error_code="sync_interrupted"), "connected")
    assert interrupted.tone == "bad" and "interrupted" in words(interrupted)
    unknown = explain_job(job(status="failed", error_code="something_new"), "connected")
    assert words(unknown).endswith("we will look into it.")
    assert error_words(None) == error_words("something_new")
    assert "refused these credentials" in reconnect_words("pms_credentials_rejected")


def _event(action: str, outcome: str = "success", **details: Any) -> AuditEventView:
    return AuditEventView(
        id=1,
        occurred_at=WHEN,
        actor_kind="customer_user",
        actor="me@example.com",
        action=action,
        subject="customer:stu-1",
        outcome=outcome,
        customer_id=1,
        facility_id=None,
        request_id="req",
        client_address=None,
        details=details,
    )


@pytest.mark.parametrize(
    ("event", "sentence"),
    [
        (_event("signin.succeeded"), "You signed in to this console."),
        (_event("facility.status_changed", to="error"), "connection lost"),
        (_event("facility.status_changed", to="connected"), "The booking-system connection works."),
        (
            _event("console.action", operation="knowledge.sync", commit=True),
            "You started an update",
        ),
        (_event("console.action", operation="knowledge.sync", commit=False), "You started a check"),
        (_event("credentials.changed", "refused"), "tried and refused; nothing changed."),
        (_event("key.minted"), "An access key for your assistant was created."),
        (_event("notification.sent"), "Something else was recorded on your account."),
        (
            _event("notice.sent", kind="error", channel="customer"),
            "We told you by e-mail that the booking-system connection was lost.",
        ),
        (
            _event("notice.sent", kind="recovered", channel="webhook"),
            "Our team was told that the booking-system connection works again.",
        ),
        (
            _event("notice.failed", "failure", kind="error", channel="customer", retried=True),
            "could not be delivered (we will try again).",
        ),
        (_event("signin.link_used"), "You signed in with the link from our message."),
        (_event("registry.fixed"), "You repaired which listing each apartment belongs to."),
        (
            _event("oauth.granted", client_name="Claude"),
            "You allowed the app “Claude” to use your booking system.",
        ),
        (
            _event("oauth.revoked", client_name="Claude", by="x"),
            "You disconnected the app “Claude”.",
        ),
        (
            _event("oauth.revoked", client_name="", by="client"),
            "The app “unnamed” ended its own connection.",
        ),
        (
            _event("oauth.denied", "refused"),
            "You refused to connect an app to your booking system.",
        ),
        (_event("oauth.refresh_reused", "failure", client_name="Claude"), "for safety"),
        (_event("webhook.subscribed"), "You added a web address that receives our automatic"),
        (_event("webhook.rotated"), "You made a new secret key for our automatic messages."),
        (_event("webhook.gave_up", "failure"), "You can send it again from the Webhooks page."),
        (_event("webhook.disabled", "failure"), "it answered that it no longer exists"),
    ],
)
def test_events_are_sentences(event: AuditEventView, sentence: str) -> None:
    line = event_text(event, viewer="me@example.com")
    assert sentence in line.text
    assert "stu-1" not in line.text and "_" not in line.text and "." in line.text


def test_someone_else_and_our_team_are_named_in_the_sentence() -> None:
    other = _event("signin.succeeded")
    assert event_text(other, viewer="you@example.com").text == (
        "me@example.com signed in to this console."
    )
    team = replace(other, actor_kind="admin", action="admin.action")
    assert event_text(team).text == "Our team made a change to your account."
    refused = _event("console.action", "refused", operation="kross.reconnect")
    line = event_text(refused, viewer="me@example.com")
    assert (line.text, line.tone) == ("You tried new booking-system credentials — refused.", "warn")


def _at(action: str, when: datetime, **details: Any) -> AuditEventView:
    return replace(_event(action, **details), occurred_at=when)


def test_events_are_grouped_by_local_day_and_repeats_are_told_once() -> None:
    evening = datetime(2026, 11, 12, 22, 30, tzinfo=UTC)  # 23:30 in Rome
    events = [
        _at("signin.succeeded", evening + timedelta(hours=1)),  # 00:30 on 13 November in Rome
        *[_at("onboarding.side_effect", evening - timedelta(minutes=i)) for i in range(10)],
        _at("key.minted", evening - timedelta(hours=2)),
        _at("key.minted", evening - timedelta(hours=3)),
        _at("signin.succeeded", evening - timedelta(hours=4)),
    ]
    days = group_events([event_text(e, viewer="me@example.com") for e in events])
    assert [d.day_label for d in days] == ["13 November 2026", "12 November 2026"]
    assert [d.day.isoformat() for d in days] == ["2026-11-13", "2026-11-12"]
    assert [(i.text, i.count) for i in days[0].items] == [("You signed in to this console.", 1)]
    items = days[1].items
    assert [(i.text, i.count) for i in items] == [
        ("Set-up made 10 changes to your account.", 10),
        ("An access key for your assistant was created (\N{MULTIPLICATION SIGN}2).", 2),
        ("You signed in to this console.", 1),
    ]
    setup = items[0]
    assert setup.when == evening and setup.earliest == evening - timedelta(minutes=9)
    assert setup.time_label == "23:30" and setup.tone == "info"
    assert group_events([]) == []
