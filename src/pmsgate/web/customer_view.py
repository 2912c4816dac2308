"""What a customer's own console page says, in plain language (issue 16 item 3).

A property operator signing in wants four answers — is my assistant live, is my booking
system connected, is my knowledge up to date, what must I do now — and the results of
the knowledge sync in words. This module derives them from what
:func:`pmsgate.web.views.customer_page` read; it only reads, and every sentence it makes
is free of internal words: no student id, workspace slug, step id, error code,
camelCase counter name or command line.

- :func:`booking_state` — ``connected``, ``unverified``, ``error`` or ``not_linked``;
- :func:`explain_job` — a sync job (running, failed, a dry run, a commit) as a headline,
  a tone (``ok``, ``warn``, ``bad``, ``busy``) and sentences; a job that ran while the
  booking system was disconnected reads "nothing can sync until you reconnect" (a
  warning, never a green "succeeded");
- :func:`event_text` — an audit event as a sentence;
- :func:`customer_home` — the whole page: the three answers, the ordered to-do list,
  the sync (Route A only), the recent events.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from pmsgate.catalogue import load_catalogue
from pmsgate.storage.audit import AuditEventView
from pmsgate.storage.knowledge import SyncJobView
from pmsgate.web.views import CustomerPage

Tone = Literal["ok", "warn", "bad", "busy", "info"]
BookingState = Literal["connected", "unverified", "error", "not_linked"]

# The step whose success means the customer was told the assistant is live (spec §4.3 16).
LIVE_STEP = "onboarding-message"
# How the steps a person on our side finishes read to the customer.
_WAITING_STEP_WORDS = {
    "prerequisites": "checking your subscription and accounts",
    "allowlist": "opening knowledge updates for your account",
    "platform-admin": "giving you access to the assistant platform",
    "channels": "connecting WhatsApp and the voice agent",
    "templates": "preparing your apartment notes",
    "route-b-quick-setup": "the final set-up of your assistant",
}

_UNRESOLVED_WORDS = {
    "pms_not_linked": "your booking system is not connected yet",
    "pms_integration_error": "your booking system is disconnected",
    "no_listing": "it is not matched to a listing of your assistant yet",
    "listing_not_active": "its listing is not active in your booking system",
}

# A failed job or a refused start, by its code, as the customer reads it.
_ERROR_WORDS = {
    "not_on_allowlist": (
        "Knowledge updates are not open to your account yet. We open them account by "
        "account and will tell you when yours is ready."
    ),
    "notes_not_connected": (
        "Your apartment notes are not connected yet. We connect them during set-up; "
        "nothing to do on your side."
    ),
    "workspace_not_created": (
        "Your assistant is still being set up, so there is no knowledge to update yet."
    ),
    "sync_already_running": "An update is already running: its progress is shown below.",
    "sync_interrupted": (
        "The last update was interrupted (our service restarted). Start it again: it "
        "continues where it stopped, without duplicates."
    ),
    "sync_cancelled": "The last update was stopped before it finished. Start it again.",
    "csrf_failed": "The page was out of date. Reload it and try again.",
}
_ERROR_FALLBACK = (
    "The update could not finish. Try again in a few minutes; if it keeps failing, we "
    "will look into it."
)


# A refused reconnect, by its code, as the customer reads it.
_RECONNECT_WORDS = {
    "pms_credentials_rejected": (
        "Your booking system refused these credentials. Check the API user (“api” followed by "
        "digits — not your login to the booking system's website) and its password under "
        "Settings → API in your booking system, then try again."
    ),
    "pms_auth_failed": (
        "Your booking system refused these credentials. Check the API username and password: "
        "they are the API credentials, not your login to the booking system's website."
    ),
    "pms_access_denied": (
        "Your booking system accepted the sign-in but refused access: check that the API "
        "user may read the property."
    ),
    "invalid_input": "Fill in the API username and password.",
}
_RECONNECT_FALLBACK = (
    "Your booking system could not be reached to try the credentials. Try again in a few minutes."
)


def reconnect_words(code: str | None) -> str:
    """A refused reconnect as one plain sentence (never its code or an id)."""
    return _RECONNECT_WORDS.get(code or "", _RECONNECT_FALLBACK)


def error_words(code: str | None) -> str:
    """A refused or failed sync as one plain sentence (never its code)."""
    return _ERROR_WORDS.get(code or "", _ERROR_FALLBACK)


@dataclass(frozen=True)
class Answer:
    """One of the page's questions and its answer."""

    key: str
    question: str
    tone: Tone
    headline: str
    detail: str


@dataclass(frozen=True)
class Todo:
    """One thing to do now, and where on the page it is done (an anchor, or none)."""

    text: str
    who: Literal["you", "us", "nobody"]
    anchor: str | None = None


@dataclass(frozen=True)
class SyncExplanation:
    """A sync job in words."""

    tone: Tone
    headline: str
    lines: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)  # what to change in which notes page
    when: datetime | None = None


@dataclass(frozen=True)
class EventLine:
    """One audit event as a sentence."""

    when: datetime
    text: str
    tone: Tone


@dataclass(frozen=True)
class CustomerHome:
    """Everything the customer's page says."""

    name: str
    route: str | None
    sync_applies: bool
    sync_open: bool  # False when the allowlist refuses the customer's knowledge sync
    booking: BookingState
    answers: list[Answer]
    todos: list[Todo]
    sync: SyncExplanation | None
    last_update: datetime | None
    events: list[EventLine]

    @property
    def route_b_sentence(self) -> str:
        """What applies instead of the sync on Route B (one sentence)."""
        return (
            "Your assistant reads availability, prices and bookings straight from your "
            "booking system, so there are no apartment notes to update here; general "
            "information is loaded by our team — write to us to change it."
        )


# --- the booking system --------------------------------------------------------------------


def booking_state(page: CustomerPage) -> BookingState:
    """The connection as the customer should understand it (the facility knows unverified)."""
    if page.facility is not None:
        return page.facility.status
    if page.ctx.pms is None or page.ctx.hotel_id is None:
        return "not_linked"
    return "error" if page.ctx.pms.status == "error" else "connected"


def _booking_answer(state: BookingState) -> Answer:
    question = "Is my booking system connected?"
    if state == "connected":
        return Answer(
            "booking",
            question,
            "ok",
            "Yes, connected",
            "Your assistant can read availability, prices and bookings.",
        )
    if state == "unverified":
        return Answer(
            "booking",
            question,
            "warn",
            "Saved, not confirmed yet",
            "Your credentials are saved; the booking system's first answer will confirm them.",
        )
    if state == "error":
        return Answer(
            "booking",
            question,
            "bad",
            "No — the connection is down",
            "The booking system refused our sign-in, usually because the API password was "
            "changed. Enter the new credentials in the form below to reconnect.",
        )
    return Answer(
        "booking",
        question,
        "info",
        "Not yet",
        "We connect your booking system during set-up.",
    )


# --- the assistant ------------------------------------------------------------------------------


def _assistant_answer(page: CustomerPage, booking: BookingState) -> Answer:
    question = "Is my assistant live?"
    checklist = page.row.onboarding.checklist
    live = checklist is not None and any(
        o.id == LIVE_STEP and o.status == "done" for o in checklist.outcomes
    )
    if live and booking in ("error", "not_linked"):
        until = (
            "you reconnect your booking system"
            if booking == "error"
            else "your booking system is connected"
        )
        return Answer(
            "assistant",
            question,
            "warn",
            "Live, but it cannot see your bookings",
            f"Guests can talk to it, but until {until} it cannot check availability or bookings.",
        )
    if live:
        return Answer(
            "assistant", question, "ok", "Yes, it is live", "Your guests can talk to it now."
        )
    onboarding = page.row.onboarding
    if checklist is None or onboarding.applicable == 0:
        return Answer(
            "assistant",
            question,
            "info",
            "Not yet — set-up has not started",
            "We will tell you as soon as it is live.",
        )
    return Answer(
        "assistant",
        question,
        "info",
        "Not yet — being set up",
        f"{onboarding.done} of {onboarding.applicable} set-up steps are done. "
        "We will tell you as soon as it is live.",
    )


# --- the knowledge ------------------------------------------------------------------------------


def _counter(job: SyncJobView, name: str) -> int:
    value = (job.counters or {}).get(name, 0)
    return int(value) if isinstance(value, int | float) else 0


def _details(job: SyncJobView) -> list[Mapping[str, Any]]:
    details = (job.report or {}).get("details") or []
    return [d for d in details if isinstance(d, Mapping)]


def _name(detail: Mapping[str, Any]) -> str:
    return str(detail.get("name") or "An apartment")


def _plural(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else (many or one + 's')}"


def section_title(section_id: str) -> str:
    """A template section as the customer's notes page titles it (Italian / English)."""
    for section in load_catalogue().knowledge.sections:
        if section.id == section_id:
            if section.title_it == section.title_en:
                return section.title_en
            return f"{section.title_it} / {section.title_en}"
    return section_id.replace("_", " ")


def _template_fixes(job: SyncJobView) -> list[str]:
    """What to change in which notes page, one sentence per apartment."""
    fixes = []
    for detail in _details(job):
        blocked = detail.get("status") == "blocked_by_template" or (
            detail.get("templateComplete") is False
        )
        if not blocked:
            continue
        missing = [section_title(str(s)) for s in detail.get("missingSections") or []]
        if not detail.get("notesPageId"):
            fixes.append(
                f"{_name(detail)} has no notes page yet: add a page for it to your apartments "
                "notes, with the five sections of the template."
            )
        elif missing:
            sections = ", ".join(f"“{s}”" for s in missing)
            fixes.append(
                f"{_name(detail)}: add the missing section{'s' if len(missing) > 1 else ''} "
                f"{sections} to its notes page (use the headings of the template)."
            )
        else:
            fixes.append(
                f"{_name(detail)}: its notes page does not follow the template; compare its "
                "headings with the template's five sections."
            )
    return fixes


def _unresolved_lines(job: SyncJobView) -> list[str]:
    lines = []
    for detail in _details(job):
        reason = detail.get("unresolvedReason")
        if reason and reason != "pms_integration_error":
            why = _UNRESOLVED_WORDS.get(str(reason), "it is not matched to your booking system")
            lines.append(f"{_name(detail)} was skipped: {why}.")
    return lines


def _failed_lines(job: SyncJobView) -> list[str]:
    return [
        f"{_name(d)} could not be read or saved this time (we retried); start the update "
        "again later."
        for d in _details(job)
        if d.get("status") == "failed" or d.get("error")
    ]


def _blocked_by_connection(job: SyncJobView, booking: BookingState) -> bool:
    """Whether the job could not match apartments because the booking system is down."""
    if booking == "error" and _counter(job, "unresolvedApartments") > 0:
        return True
    reasons = [d.get("unresolvedReason") for d in _details(job)]
    return bool(reasons) and all(r == "pms_integration_error" for r in reasons)


def explain_job(job: SyncJobView, booking: BookingState) -> SyncExplanation:
    """The job in words: what it did, what is blocked and why, what to fix."""
    when = job.finished_at or job.started_at or job.created_at
    is_commit = job.kind == "commit"
    if job.status in ("queued", "running"):
        total = job.progress_total or 0
        progress = (
            f"{job.progress_done} of {_plural(total, 'apartment')} done so far."
            if total
            else "Starting…"
        )
        verb = "Updating your assistant's knowledge" if is_commit else "Checking your notes"
        return SyncExplanation("busy", f"{verb}…", [progress], when=when)
    if job.status != "succeeded":
        return SyncExplanation(
            "bad",
            "The last update did not finish" if is_commit else "The last check did not finish",
            [error_words(job.error_code)],
            when=when,
        )
    apartments = _counter(job, "apartments")
    if _blocked_by_connection(job, booking) and booking != "error":
        return SyncExplanation(
            "warn",
            f"The last {'update' if is_commit else 'check'} ran while your booking system "
            "was disconnected",
            [
                "Your booking system is connected again: start it again to see where your "
                "apartments stand."
            ],
            fixes=_template_fixes(job),
            when=when,
        )
    if _blocked_by_connection(job, booking):
        return SyncExplanation(
            "warn",
            "Nothing can sync until you reconnect your booking system",
            [
                f"The {'update' if is_commit else 'check'} found "
                f"{_plural(apartments, 'apartment')}, but none can be matched to your "
                "booking system while the connection is down"
                + (", so nothing was changed." if is_commit else "."),
                "Reconnect with the form above, then start the update again.",
            ],
            fixes=_template_fixes(job),
            when=when,
        )
    fixes = _template_fixes(job)
    unresolved = _unresolved_lines(job)
    failed = _failed_lines(job)
    lines: list[str] = []
    if is_commit:
        created, updated = _counter(job, "created"), _counter(job, "updated")
        unchanged, deleted = _counter(job, "unchanged"), _counter(job, "deleted")
        folders = _counter(job, "directoriesCreated")
        lines.append(f"{_plural(apartments, 'apartment')} went through the update.")
        lines.append(
            f"{_plural(created, 'new piece')} of knowledge added, {updated} updated, "
            f"{unchanged} already up to date"
            + (f", {deleted} removed because they left your notes" if deleted else "")
            + "."
        )
        if folders:
            their = "its" if folders == 1 else "their"
            lines.append(
                f"{_plural(folders, 'apartment')} got {their} own section for the first time."
            )
        blocked = _counter(job, "blockedByTemplate")
        if blocked:
            lines.append(
                f"{_plural(blocked, 'apartment')} skipped because "
                f"{'its notes page is' if blocked == 1 else 'their notes pages are'} incomplete "
                "— see what to fix below. Their earlier knowledge is kept."
            )
    else:
        incomplete = _counter(job, "incompleteTemplates")
        lines.append(f"{_plural(apartments, 'apartment')} checked; nothing was changed.")
        lines.append(
            "Every notes page follows the template."
            if not incomplete
            else f"{_plural(incomplete, 'notes page')} {'is' if incomplete == 1 else 'are'} "
            "incomplete and would be skipped — see what to fix below."
        )
    lines.extend(unresolved)
    lines.extend(failed)
    problems = bool(fixes or unresolved or failed) or _counter(job, "failed") > 0
    if is_commit:
        headline = (
            "Update finished with problems to fix" if problems else "Update finished: all done"
        )
    else:
        headline = (
            "Check finished: some things to fix before updating"
            if problems
            else "Check finished: ready to update"
        )
    return SyncExplanation("warn" if problems else "ok", headline, lines, fixes, when)


def _knowledge_answer(
    route: str | None,
    sync_open: bool,
    notes_connected: bool,
    booking: BookingState,
    latest: SyncJobView | None,
    last_commit: SyncJobView | None,
) -> Answer:
    question = "Is my knowledge up to date?"
    if route == "B":
        return Answer(
            "knowledge",
            question,
            "ok",
            "Nothing to update",
            "Your assistant answers from your booking system directly.",
        )
    if not sync_open:
        return Answer(
            "knowledge", question, "info", "Not open yet", error_words("not_on_allowlist")
        )
    if not notes_connected:
        return Answer("knowledge", question, "info", "Not yet", error_words("notes_not_connected"))
    if latest is not None and latest.active:
        return Answer("knowledge", question, "busy", "Updating now", "The progress is shown below.")
    if booking == "error":
        return Answer(
            "knowledge",
            question,
            "warn",
            "On hold",
            "Nothing can sync until you reconnect your booking system; what your assistant "
            "knew before stays in place.",
        )
    if last_commit is None:
        return Answer(
            "knowledge",
            question,
            "warn",
            "Not loaded yet",
            "Your apartment notes have not been loaded into your assistant yet.",
        )
    when = (last_commit.finished_at or last_commit.created_at).astimezone(UTC)
    explained = explain_job(last_commit, booking)
    if explained.tone == "ok":
        return Answer(
            "knowledge",
            question,
            "ok",
            "Yes",
            f"Last updated {when:%d %b %Y at %H:%M} UTC. After you edit your notes, update again.",
        )
    return Answer(
        "knowledge",
        question,
        "warn",
        "Partly",
        f"The last update ({when:%d %b %Y}) skipped some apartments — see what to fix below.",
    )


# --- what to do now -----------------------------------------------------------------------------


def _todos(
    page: CustomerPage,
    *,
    booking: BookingState,
    route: str | None,
    sync_open: bool,
    latest: SyncJobView | None,
    last_commit: SyncJobView | None,
) -> list[Todo]:
    todos: list[Todo] = []
    if booking == "error":
        todos.append(
            Todo(
                "Reconnect your booking system: enter its current API password in the form "
                "on this page.",
                "you",
                "reconnect",
            )
        )
    if booking == "not_linked":
        todos.append(Todo("Wait for us: we are connecting your booking system.", "us"))
    knowledge_applies = route != "B" and sync_open and page.ctx.notes_connected
    if knowledge_applies and latest is not None and not latest.active:
        for fix in _template_fixes(latest):
            todos.append(Todo(f"Fix a notes page — {fix}", "you", "knowledge"))
        if (
            latest.status == "succeeded"
            and booking != "error"
            and _blocked_by_connection(latest, booking)
        ):
            todos.append(
                Todo(
                    "Check your notes again: the last check ran while your booking system "
                    "was disconnected.",
                    "you",
                    "knowledge",
                )
            )
        elif latest.status == "succeeded" and booking != "error":
            if latest.kind == "dry_run" and not _template_fixes(latest) and last_commit is None:
                todos.append(
                    Todo(
                        "Load your notes into your assistant: press “Update knowledge”.",
                        "you",
                        "knowledge",
                    )
                )
            if _unresolved_lines(latest):
                todos.append(
                    Todo(
                        "Wait for us: some apartments are not matched to your booking system "
                        "yet; we are told and will fix the match.",
                        "us",
                    )
                )
        elif latest.status != "succeeded":
            todos.append(Todo("Start the knowledge update again.", "you", "knowledge"))
    elif knowledge_applies and latest is None and booking != "error":
        todos.append(
            Todo(
                "Check your apartment notes, then load them into your assistant "
                "(“Check my notes”, then “Update knowledge”).",
                "you",
                "knowledge",
            )
        )
    checklist = page.row.onboarding.checklist
    if checklist is not None:
        waiting = [o for o in checklist.outcomes if o.status == "waiting"]
        if waiting:
            what = "; ".join(
                dict.fromkeys(_WAITING_STEP_WORDS.get(o.id, "a set-up step") for o in waiting)
            )
            due = min((o.due for o in waiting if o.due), default=None)
            todos.append(
                Todo(
                    f"Wait for us: we are {what}"
                    + (f" (planned by {due:%d %b %Y})" if due else "")
                    + ".",
                    "us",
                )
            )
    if not sync_open and route != "B":
        todos.append(Todo("Wait for us: " + error_words("not_on_allowlist"), "us"))
    if not todos:
        todos.append(Todo("Nothing to do — everything is in order.", "nobody"))
    return todos


# --- the audit trail ----------------------------------------------------------------------------

_ACTION_WORDS = {
    "signin.succeeded": "{who} signed in to this console",
    "signin.failed": "A sign-in to this console failed",
    "credentials.stored": "Booking-system credentials were saved",
    "credentials.changed": "Booking-system credentials were changed",
    "credentials.reconnected": "The booking system was reconnected with new credentials",
    "key.minted": "An access key for your assistant was created",
    "key.revoked": "An access key for your assistant was withdrawn",
    "key.expired": "An access key for your assistant expired",
    "key.rotated": "An access key for your assistant was replaced",
    "key.scopes_changed": "What an access key of your assistant may do was changed",
    "key.used_for_write": "Your assistant made a change in your booking system",
    "admin.action": "Our team made a change to your account",
    "onboarding.side_effect": "A set-up step made a change to your account",
    "signin.link_used": "{who} signed in with the link from our message",
    "registry.fixed": "{who} repaired which listing each apartment belongs to",
}
# Incident notices (jobs/notify.py): who was told what, by the notice's kind and channel.
_NOTICE_WORDS = {
    ("error", "customer"): "We told you by e-mail that the booking-system connection was lost",
    (
        "recovered",
        "customer",
    ): "We told you by e-mail that the booking-system connection works again",
    ("error", "team"): "Our team was told that the booking-system connection was lost",
    ("recovered", "team"): "Our team was told that the booking-system connection works again",
}
_OPERATION_WORDS = {
    "kross.reconnect": "{who} tried new booking-system credentials",
    "gateway.mint_key": "{who} created an access key",
    "gateway.revoke_key": "{who} withdrew an access key",
    "gateway.set_key_scopes": "{who} changed an access key",
}
_OUTCOME_WORDS = {
    "failure": "it did not work",
    "refused": "refused",
    "unknown": "the outcome is not known",
}
# Credentials events that did not succeed: what was tried, and that nothing changed.
_CREDENTIALS_REFUSED = "New booking-system credentials were tried and refused; nothing changed"


def _who(event: AuditEventView, viewer: str | None) -> str:
    if event.actor_kind == "customer_user":
        return "You" if viewer and event.actor == viewer else event.actor
    if event.actor_kind == "admin" or event.actor_kind == "cli":
        return "Our team"
    if event.actor_kind == "gateway_key":
        return "Your assistant"
    return "Our service"


def event_text(event: AuditEventView, *, viewer: str | None = None) -> EventLine:
    """One event as a sentence for the customer (no ids, codes or internal names)."""
    who = _who(event, viewer)
    details = event.details or {}
    action = event.action
    if action == "facility.status_changed":
        to = details.get("to")
        if to == "error":
            lost = "The booking system stopped accepting our sign-in (connection lost)."
            return EventLine(event.occurred_at, lost, "bad")
        if to == "connected":
            return EventLine(event.occurred_at, "The booking-system connection works.", "ok")
        return EventLine(event.occurred_at, "The booking-system connection changed.", "info")
    if action == "console.action":
        operation = str(details.get("operation", ""))
        if operation == "knowledge.sync":
            kind = "update of the knowledge" if details.get("commit") else "check of the notes"
            text = f"{who} started a{'n' if kind[0] == 'u' else ''} {kind}"
        else:
            text = _OPERATION_WORDS.get(operation, "{who} used this console").format(who=who)
    elif action == "notice.sent":
        key = (
            str(details.get("kind")),
            "customer" if details.get("channel") == "customer" else "team",
        )
        text = _NOTICE_WORDS.get(key, "A notice about your booking-system connection was sent")
    elif action == "notice.failed":
        again = " (we will try again)" if details.get("retried") else ""
        return EventLine(
            event.occurred_at,
            f"A notice about your connection could not be delivered{again}.",
            "warn",
        )
    elif action.startswith("credentials.") and event.outcome != "success":
        return EventLine(event.occurred_at, _CREDENTIALS_REFUSED + ".", "warn")
    elif action in _ACTION_WORDS:
        text = _ACTION_WORDS[action].format(who=who)
    else:
        words = action.replace("_", " ").replace(".", " ").strip()
        text = words[:1].upper() + words[1:] if words else "An event was recorded"
    tone: Tone = "info"
    if event.outcome in _OUTCOME_WORDS:
        text += f" — {_OUTCOME_WORDS[event.outcome]}"
        tone = "warn" if event.outcome != "failure" else "bad"
    return EventLine(event.occurred_at, text + ".", tone)


# --- the page -----------------------------------------------------------------------------------


def last_commit_of(jobs: Iterable[SyncJobView]) -> SyncJobView | None:
    """The newest finished commit (succeeded), if any."""
    return next((j for j in jobs if j.kind == "commit" and j.status == "succeeded"), None)


def customer_route(page: CustomerPage) -> str | None:
    """Route A or B: as onboarding chose it, else A when apartments are registered."""
    route = page.row.onboarding.route
    if route is not None:
        return route
    return "A" if page.ctx.apartments else None


def customer_home(
    page: CustomerPage,
    *,
    jobs: list[SyncJobView],
    events: list[AuditEventView],
    sync_open: bool,
    viewer: str | None,
) -> CustomerHome:
    """The customer's page: answers, to-dos, the sync in words and the recent events."""
    booking = booking_state(page)
    route = customer_route(page)
    latest = jobs[0] if jobs else None
    last_commit = last_commit_of(jobs)
    answers = [
        _assistant_answer(page, booking),
        _booking_answer(booking),
        _knowledge_answer(route, sync_open, page.ctx.notes_connected, booking, latest, last_commit),
    ]
    return CustomerHome(
        name=page.ctx.customer.name or "Your account",
        route=route,
        sync_applies=route != "B",
        sync_open=sync_open,
        booking=booking,
        answers=answers,
        todos=_todos(
            page,
            booking=booking,
            route=route,
            sync_open=sync_open,
            latest=latest,
            last_commit=last_commit,
        ),
        sync=explain_job(latest, booking) if latest is not None else None,
        last_update=(last_commit.finished_at if last_commit is not None else None),
        events=[event_text(e, viewer=viewer) for e in events],
    )
