"""What a customer's own console page says, in plain language (docs/web.md).

A property operator signing in wants four answers — is my assistant live, is my booking
system connected, is my knowledge up to date, what must I do now — and the results of
the knowledge sync in words. This module derives them from what
:func:`pmsgate.web.views.customer_page` read; it only reads, and every sentence it makes
is free of internal words: no student id, workspace slug, step id, error code,
camelCase counter name or command line.

- :func:`booking_state` — ``connected``, ``unverified``, ``error`` or ``not_linked``;
- :func:`customer_home` — the whole page: the three answers, the ordered to-do list,
  the sync (Route A only, told by :func:`pmsgate.web.sync_words.explain_job`), the
  recent events (told by :mod:`pmsgate.web.customer_events`).

Every sentence is English in the code and translated through the catalogue
(:mod:`pmsgate.i18n`, Italian in ``locales/it/LC_MESSAGES/words.po``) at the moment it is
made, in the reader's language; times are the reader's local times, never UTC.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from pmsgate.i18n import N_, format_date, format_datetime, gettext, ngettext
from pmsgate.storage.audit import AuditEventView
from pmsgate.storage.knowledge import SyncJobView
from pmsgate.web.customer_events import EventDay, EventLine, event_text, group_events
from pmsgate.web.sync_words import (
    BookingState,
    SyncExplanation,
    Tone,
    blocked_by_connection,
    error_words,
    explain_job,
    template_fixes,
    unresolved_lines,
)
from pmsgate.web.views import CustomerPage

# The step whose success means the customer was told it is live (docs/requirements.md R21.16).
LIVE_STEP = "onboarding-message"
# How the steps a person on our side finishes read to the customer (a clause after
# "Wait for us:"; several are joined with "; ").
_WAITING_STEP_WORDS = {
    "prerequisites": N_("we are checking your subscription and accounts"),
    "allowlist": N_("we are opening knowledge updates for your account"),
    "platform-admin": N_("we are giving you access to the assistant platform"),
    "channels": N_("we are connecting WhatsApp and the voice agent"),
    "templates": N_("we are preparing your apartment notes"),
    "route-b-quick-setup": N_("we are doing the final set-up of your assistant"),
}
_WAITING_STEP_FALLBACK = N_("we are finishing a set-up step")


# A refused reconnect, by its code, as the customer reads it.
_RECONNECT_WORDS = {
    "pms_credentials_rejected": N_(
        "Your booking system refused these credentials. Check the API user (“api” followed by "
        "digits — not your login to the booking system's website) and its password under "
        "Settings → API in your booking system, then try again."
    ),
    "pms_auth_failed": N_(
        "Your booking system refused these credentials. Check the API username and password: "
        "they are the API credentials, not your login to the booking system's website."
    ),
    "pms_access_denied": N_(
        "Your booking system accepted the sign-in but refused access: check that the API "
        "user may read the property."
    ),
    "invalid_input": N_("Fill in the API username and password."),
}
_RECONNECT_FALLBACK = N_(
    "Your booking system could not be reached to try the credentials. Try again in a few minutes."
)


def reconnect_words(code: str | None) -> str:
    """A refused reconnect as one plain sentence (never its code or an id)."""
    return gettext(_RECONNECT_WORDS.get(code or "", _RECONNECT_FALLBACK))


@dataclass(frozen=True)
class Todo:
    """One thing to do now, and where on the page it is done (an anchor, or none)."""

    text: str
    who: Literal["you", "us", "nobody"]
    anchor: str | None = None


@dataclass(frozen=True)
class Answer:
    """One of the page's questions and its answer."""

    key: str
    question: str
    tone: Tone
    headline: str
    detail: str


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
    # The same events by local day, identical ones in a row told once (see group_events).
    event_days: list[EventDay] = field(default_factory=list)

    @property
    def route_b_sentence(self) -> str:
        """What applies instead of the sync on Route B (one sentence)."""
        return gettext(
            "Your assistant reads availability, prices and bookings straight from your "
            "booking system, so there are no apartment notes to update here; general "
            "information is loaded by our team — write to us to change it."
        )


# --- the booking system --------------------------------------------------------------------


def booking_state(page: CustomerPage) -> BookingState:
    """The connection as the customer should understand it (the facility knows unverified)."""
    if page.facility is not None:
        return page.facility.status
    if page.ctx.kross is None or page.ctx.hotel_id is None:
        return "not_linked"
    return "error" if page.ctx.kross.status == "error" else "connected"


def _booking_answer(state: BookingState) -> Answer:
    question = gettext("Is my booking system connected?")
    if state == "connected":
        return Answer(
            "booking",
            question,
            "ok",
            gettext("Yes, connected"),
            gettext("Your assistant can read availability, prices and bookings."),
        )
    if state == "unverified":
        return Answer(
            "booking",
            question,
            "warn",
            gettext("Saved, not confirmed yet"),
            gettext(
                "Your credentials are saved; the booking system's first answer will confirm them."
            ),
        )
    if state == "error":
        return Answer(
            "booking",
            question,
            "bad",
            gettext("No — the connection is down"),
            gettext(
                "The booking system refused our sign-in, usually because the API password was "
                "changed. Enter the new credentials in the form below to reconnect."
            ),
        )
    return Answer(
        "booking",
        question,
        "info",
        gettext("Not yet"),
        gettext("We connect your booking system during set-up."),
    )


# --- the assistant ------------------------------------------------------------------------------


def _assistant_answer(page: CustomerPage, booking: BookingState) -> Answer:
    question = gettext("Is my assistant live?")
    checklist = page.row.onboarding.checklist
    live = checklist is not None and any(
        o.id == LIVE_STEP and o.status == "done" for o in checklist.outcomes
    )
    if live and booking in ("error", "not_linked"):
        detail = (
            gettext(
                "Guests can talk to it, but until you reconnect your booking system it cannot "
                "check availability or bookings."
            )
            if booking == "error"
            else gettext(
                "Guests can talk to it, but until your booking system is connected it cannot "
                "check availability or bookings."
            )
        )
        return Answer(
            "assistant",
            question,
            "warn",
            gettext("Live, but it cannot see your bookings"),
            detail,
        )
    if live:
        return Answer(
            "assistant",
            question,
            "ok",
            gettext("Yes, it is live"),
            gettext("Your guests can talk to it now."),
        )
    onboarding = page.row.onboarding
    if checklist is None or onboarding.applicable == 0:
        return Answer(
            "assistant",
            question,
            "info",
            gettext("Not yet — set-up has not started"),
            gettext("We will tell you as soon as it is live."),
        )
    return Answer(
        "assistant",
        question,
        "info",
        gettext("Not yet — being set up"),
        ngettext(
            "{done} of {total} set-up step is done. We will tell you as soon as it is live.",
            "{done} of {total} set-up steps are done. We will tell you as soon as it is live.",
            onboarding.applicable,
        ).format(done=onboarding.done, total=onboarding.applicable),
    )


def _knowledge_answer(
    route: str | None,
    sync_open: bool,
    notes_connected: bool,
    booking: BookingState,
    latest: SyncJobView | None,
    last_commit: SyncJobView | None,
) -> Answer:
    question = gettext("Is my knowledge up to date?")
    if route == "B":
        return Answer(
            "knowledge",
            question,
            "ok",
            gettext("Nothing to update"),
            gettext("Your assistant answers from your booking system directly."),
        )
    if not sync_open:
        return Answer(
            "knowledge",
            question,
            "info",
            gettext("Not open yet"),
            error_words("not_on_allowlist"),
        )
    if not notes_connected:
        return Answer(
            "knowledge", question, "info", gettext("Not yet"), error_words("notes_not_connected")
        )
    if latest is not None and latest.active:
        return Answer(
            "knowledge",
            question,
            "busy",
            gettext("Updating now"),
            gettext("The progress is shown below."),
        )
    if booking == "error":
        return Answer(
            "knowledge",
            question,
            "warn",
            gettext("On hold"),
            gettext(
                "Nothing can sync until you reconnect your booking system; what your assistant "
                "knew before stays in place."
            ),
        )
    if last_commit is None:
        return Answer(
            "knowledge",
            question,
            "warn",
            gettext("Not loaded yet"),
            gettext("Your apartment notes have not been loaded into your assistant yet."),
        )
    when = last_commit.finished_at or last_commit.created_at
    explained = explain_job(last_commit, booking)
    if explained.tone == "ok":
        return Answer(
            "knowledge",
            question,
            "ok",
            gettext("Yes"),
            gettext("Last updated {when}. After you edit your notes, update again.").format(
                when=format_datetime(when)
            ),
        )
    return Answer(
        "knowledge",
        question,
        "warn",
        gettext("Partly"),
        gettext("The last update ({day}) skipped some apartments — see what to fix below.").format(
            day=format_date(when)
        ),
    )


# --- what to do now -----------------------------------------------------------------------------


def _waiting_todo(page: CustomerPage) -> Todo | None:
    """What we, on our side, are doing now (the checklist's waiting steps), if anything."""
    checklist = page.row.onboarding.checklist
    if checklist is None:
        return None
    waiting = [o for o in checklist.outcomes if o.status == "waiting"]
    if not waiting:
        return None
    what = "; ".join(
        dict.fromkeys(
            gettext(_WAITING_STEP_WORDS.get(o.id, _WAITING_STEP_FALLBACK)) for o in waiting
        )
    )
    due = min((o.due for o in waiting if o.due), default=None)
    if due is None:
        return Todo(gettext("Wait for us: {what}.").format(what=what), "us")
    return Todo(
        gettext("Wait for us: {what} (planned by {day}).").format(what=what, day=format_date(due)),
        "us",
    )


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
                gettext(
                    "Reconnect your booking system: enter its current API password in the form "
                    "on this page."
                ),
                "you",
                "reconnect",
            )
        )
    if booking == "not_linked":
        todos.append(Todo(gettext("Wait for us: we are connecting your booking system."), "us"))
    knowledge_applies = route != "B" and sync_open and page.ctx.notes_connected
    if knowledge_applies and latest is not None and not latest.active:
        for fix in template_fixes(latest):
            todos.append(
                Todo(gettext("Fix a notes page — {fix}").format(fix=fix), "you", "knowledge")
            )
        if (
            latest.status == "succeeded"
            and booking != "error"
            and blocked_by_connection(latest, booking)
        ):
            todos.append(
                Todo(
                    gettext(
                        "Check your notes again: the last check ran while your booking system "
                        "was disconnected."
                    ),
                    "you",
                    "knowledge",
                )
            )
        elif latest.status == "succeeded" and booking != "error":
            if latest.kind == "dry_run" and not template_fixes(latest) and last_commit is None:
                todos.append(
                    Todo(
                        gettext("Load your notes into your assistant: press “Update knowledge”."),
                        "you",
                        "knowledge",
                    )
                )
            if unresolved_lines(latest):
                todos.append(
                    Todo(
                        gettext(
                            "Wait for us: some apartments are not matched to your booking "
                            "system yet; we are told and will fix the match."
                        ),
                        "us",
                    )
                )
        elif latest.status != "succeeded":
            todos.append(Todo(gettext("Start the knowledge update again."), "you", "knowledge"))
    elif knowledge_applies and latest is None and booking != "error":
        todos.append(
            Todo(
                gettext(
                    "Check your apartment notes, then load them into your assistant "
                    "(“Check my notes”, then “Update knowledge”)."
                ),
                "you",
                "knowledge",
            )
        )
    waiting = _waiting_todo(page)
    if waiting is not None:
        todos.append(waiting)
    if not sync_open and route != "B":
        todos.append(
            Todo(
                gettext("Wait for us: {what}").format(what=error_words("not_on_allowlist")),
                "us",
            )
        )
    if not todos:
        todos.append(Todo(gettext("Nothing to do — everything is in order."), "nobody"))
    return todos


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
    lines = [event_text(e, viewer=viewer) for e in events]
    return CustomerHome(
        name=page.ctx.customer.name or gettext("Your account"),
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
        events=lines,
        event_days=group_events(lines),
    )
