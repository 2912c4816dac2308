"""What a customer's own console page says, in plain language (docs/web.md).

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
- :func:`group_events` — the events by the reader's local day, identical ones in a row
  told once ("Set-up made 10 changes to your account.");
- :func:`customer_home` — the whole page: the three answers, the ordered to-do list,
  the sync (Route A only), the recent events.

Every sentence is English in the code and translated through the catalogue
(:mod:`pmsgate.i18n`, Italian in ``locales/it/LC_MESSAGES/words.po``) at the moment it is
made, in the reader's language; times are the reader's local times, never UTC.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Literal

from babel.lists import format_list

from pmsgate.catalogue import load_catalogue
from pmsgate.i18n import (
    N_,
    current_language,
    format_date,
    format_datetime,
    format_time,
    gettext,
    local,
    locale,
    ngettext,
)
from pmsgate.storage.audit import AuditEventView
from pmsgate.storage.knowledge import SyncJobView
from pmsgate.web.views import CustomerPage

Tone = Literal["ok", "warn", "bad", "busy", "info"]
BookingState = Literal["connected", "unverified", "error", "not_linked"]

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

# Why an apartment was skipped, by the job's reason: one whole sentence each ({name}: the
# apartment's name).
_UNRESOLVED_WORDS = {
    "pms_not_linked": N_("{name} was skipped: your booking system is not connected yet."),
    "pms_integration_error": N_("{name} was skipped: your booking system is disconnected."),
    "no_listing": N_("{name} was skipped: it is not matched to a listing of your assistant yet."),
    "listing_not_active": N_(
        "{name} was skipped: its listing is not active in your booking system."
    ),
}
_UNRESOLVED_FALLBACK = N_("{name} was skipped: it is not matched to your booking system.")

# A failed job or a refused start, by its code, as the customer reads it.
_ERROR_WORDS = {
    "not_on_allowlist": N_(
        "Knowledge updates are not open to your account yet. We open them account by "
        "account and will tell you when yours is ready."
    ),
    "notes_not_connected": N_(
        "Your apartment notes are not connected yet. We connect them during set-up; "
        "nothing to do on your side."
    ),
    "workspace_not_created": N_(
        "Your assistant is still being set up, so there is no knowledge to update yet."
    ),
    "sync_already_running": N_("An update is already running: its progress is shown below."),
    "sync_interrupted": N_(
        "The last update was interrupted (our service restarted). Start it again: it "
        "continues where it stopped, without duplicates."
    ),
    "sync_cancelled": N_("The last update was stopped before it finished. Start it again."),
    "csrf_failed": N_("The page was out of date. Reload it and try again."),
}
_ERROR_FALLBACK = N_(
    "The update could not finish. Try again in a few minutes; if it keeps failing, we "
    "will look into it."
)


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


def error_words(code: str | None) -> str:
    """A refused or failed sync as one plain sentence (never its code)."""
    return gettext(_ERROR_WORDS.get(code or "", _ERROR_FALLBACK))


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
    # The event's action (``signin.succeeded``): how several in a row are told together.
    action: str = ""


@dataclass(frozen=True)
class EventItem:
    """One line of a day's activity: an event, or several identical ones in a row."""

    when: datetime  # the newest of them
    text: str  # the sentence (several: a plural sentence, or "... (times 3)")
    tone: Tone
    count: int = 1
    earliest: datetime | None = None  # the oldest of them (= when for one event)

    @property
    def time_label(self) -> str:
        """The local time of day of the newest (``20:40``)."""
        return format_time(self.when)


@dataclass(frozen=True)
class EventDay:
    """The activity of one local day, newest first."""

    day: date
    day_label: str  # "26 novembre 2026" / "26 November 2026"
    items: list[EventItem]


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


# --- the knowledge ------------------------------------------------------------------------------


def _counter(job: SyncJobView, name: str) -> int:
    value = (job.counters or {}).get(name, 0)
    return int(value) if isinstance(value, int | float) else 0


def _details(job: SyncJobView) -> list[Mapping[str, Any]]:
    details = (job.report or {}).get("details") or []
    return [d for d in details if isinstance(d, Mapping)]


def _name(detail: Mapping[str, Any]) -> str:
    return str(detail.get("name") or gettext("An apartment"))


def section_title(section_id: str) -> str:
    """A template section as the customer's notes page titles it, in the reader's language.

    The notes pages accept either title (the template's Italian or English heading).
    """
    for section in load_catalogue().knowledge.sections:
        if section.id == section_id:
            return section.title_it if current_language() == "it" else section.title_en
    return section_id.replace("_", " ")


def _quoted_list(items: list[str]) -> str:
    """“A”, “B” and “C” in the reader's language."""
    return format_list([f"“{item}”" for item in items], locale=locale())


def _template_fixes(job: SyncJobView) -> list[str]:
    """What to change in which notes page, one sentence per apartment."""
    fixes = []
    for detail in _details(job):
        blocked = detail.get("status") == "blocked_by_template" or (
            detail.get("templateComplete") is False
        )
        if not blocked:
            continue
        name = _name(detail)
        missing = [section_title(str(s)) for s in detail.get("missingSections") or []]
        if not detail.get("notesPageId"):
            fixes.append(
                gettext(
                    "{name} has no notes page yet: add a page for it to your apartments "
                    "notes, with the five sections of the template."
                ).format(name=name)
            )
        elif missing:
            fixes.append(
                ngettext(
                    "{name}: add the missing section {sections} to its notes page (use the "
                    "headings of the template).",
                    "{name}: add the missing sections {sections} to its notes page (use the "
                    "headings of the template).",
                    len(missing),
                ).format(name=name, sections=_quoted_list(missing))
            )
        else:
            fixes.append(
                gettext(
                    "{name}: its notes page does not follow the template; compare its "
                    "headings with the template's five sections."
                ).format(name=name)
            )
    return fixes


def _unresolved_lines(job: SyncJobView) -> list[str]:
    lines = []
    for detail in _details(job):
        reason = detail.get("unresolvedReason")
        if reason and reason != "pms_integration_error":
            sentence = _UNRESOLVED_WORDS.get(str(reason), _UNRESOLVED_FALLBACK)
            lines.append(gettext(sentence).format(name=_name(detail)))
    return lines


def _failed_lines(job: SyncJobView) -> list[str]:
    return [
        gettext(
            "{name} could not be read or saved this time (we retried); start the update "
            "again later."
        ).format(name=_name(d))
        for d in _details(job)
        if d.get("status") == "failed" or d.get("error")
    ]


def _blocked_by_connection(job: SyncJobView, booking: BookingState) -> bool:
    """Whether the job could not match apartments because the booking system is down."""
    if booking == "error" and _counter(job, "unresolvedApartments") > 0:
        return True
    reasons = [d.get("unresolvedReason") for d in _details(job)]
    return bool(reasons) and all(r == "pms_integration_error" for r in reasons)


def _running(job: SyncJobView, when: datetime | None) -> SyncExplanation:
    total = job.progress_total or 0
    progress = (
        ngettext(
            "{done} of {total} apartment done so far.",
            "{done} of {total} apartments done so far.",
            total,
        ).format(done=job.progress_done, total=total)
        if total
        else gettext("Starting…")
    )
    headline = (
        gettext("Updating your assistant's knowledge…")
        if job.kind == "commit"
        else gettext("Checking your notes…")
    )
    return SyncExplanation("busy", headline, [progress], when=when)


def _disconnected(
    job: SyncJobView, booking: BookingState, when: datetime | None
) -> SyncExplanation:
    """A job that could not match apartments because the booking system was (or is) down."""
    is_commit = job.kind == "commit"
    if booking != "error":
        return SyncExplanation(
            "warn",
            gettext("The last update ran while your booking system was disconnected")
            if is_commit
            else gettext("The last check ran while your booking system was disconnected"),
            [
                gettext(
                    "Your booking system is connected again: start it again to see where your "
                    "apartments stand."
                )
            ],
            fixes=_template_fixes(job),
            when=when,
        )
    apartments = _counter(job, "apartments")
    found = (
        ngettext(
            "The update found {count} apartment, but it cannot be matched to your booking "
            "system while the connection is down, so nothing was changed.",
            "The update found {count} apartments, but none can be matched to your booking "
            "system while the connection is down, so nothing was changed.",
            apartments,
        )
        if is_commit
        else ngettext(
            "The check found {count} apartment, but it cannot be matched to your booking "
            "system while the connection is down.",
            "The check found {count} apartments, but none can be matched to your booking "
            "system while the connection is down.",
            apartments,
        )
    )
    return SyncExplanation(
        "warn",
        gettext("Nothing can sync until you reconnect your booking system"),
        [
            found.format(count=apartments),
            gettext("Reconnect with the form above, then start the update again."),
        ],
        fixes=_template_fixes(job),
        when=when,
    )


def _commit_lines(job: SyncJobView) -> list[str]:
    apartments = _counter(job, "apartments")
    created, updated = _counter(job, "created"), _counter(job, "updated")
    unchanged, deleted = _counter(job, "unchanged"), _counter(job, "deleted")
    lines = [
        ngettext(
            "{count} apartment went through the update.",
            "{count} apartments went through the update.",
            apartments,
        ).format(count=apartments)
    ]
    pieces = (
        ngettext(
            "{created} new piece of knowledge added, {updated} updated, {unchanged} already "
            "up to date, {deleted} removed because they left your notes.",
            "{created} new pieces of knowledge added, {updated} updated, {unchanged} already "
            "up to date, {deleted} removed because they left your notes.",
            created,
        )
        if deleted
        else ngettext(
            "{created} new piece of knowledge added, {updated} updated, {unchanged} already "
            "up to date.",
            "{created} new pieces of knowledge added, {updated} updated, {unchanged} already "
            "up to date.",
            created,
        )
    )
    lines.append(
        pieces.format(created=created, updated=updated, unchanged=unchanged, deleted=deleted)
    )
    folders = _counter(job, "directoriesCreated")
    if folders:
        lines.append(
            ngettext(
                "{count} apartment got its own section for the first time.",
                "{count} apartments got their own section for the first time.",
                folders,
            ).format(count=folders)
        )
    blocked = _counter(job, "blockedByTemplate")
    if blocked:
        lines.append(
            ngettext(
                "{count} apartment skipped because its notes page is incomplete — see what "
                "to fix below. Its earlier knowledge is kept.",
                "{count} apartments skipped because their notes pages are incomplete — see "
                "what to fix below. Their earlier knowledge is kept.",
                blocked,
            ).format(count=blocked)
        )
    return lines


def _check_lines(job: SyncJobView) -> list[str]:
    apartments = _counter(job, "apartments")
    incomplete = _counter(job, "incompleteTemplates")
    return [
        ngettext(
            "{count} apartment checked; nothing was changed.",
            "{count} apartments checked; nothing was changed.",
            apartments,
        ).format(count=apartments),
        gettext("Every notes page follows the template.")
        if not incomplete
        else ngettext(
            "{count} notes page is incomplete and would be skipped — see what to fix below.",
            "{count} notes pages are incomplete and would be skipped — see what to fix below.",
            incomplete,
        ).format(count=incomplete),
    ]


def explain_job(job: SyncJobView, booking: BookingState) -> SyncExplanation:
    """The job in words: what it did, what is blocked and why, what to fix."""
    when = job.finished_at or job.started_at or job.created_at
    is_commit = job.kind == "commit"
    if job.status in ("queued", "running"):
        return _running(job, when)
    if job.status != "succeeded":
        return SyncExplanation(
            "bad",
            gettext("The last update did not finish")
            if is_commit
            else gettext("The last check did not finish"),
            [error_words(job.error_code)],
            when=when,
        )
    if _blocked_by_connection(job, booking):
        return _disconnected(job, booking, when)
    fixes = _template_fixes(job)
    unresolved = _unresolved_lines(job)
    failed = _failed_lines(job)
    lines = _commit_lines(job) if is_commit else _check_lines(job)
    lines.extend(unresolved)
    lines.extend(failed)
    problems = bool(fixes or unresolved or failed) or _counter(job, "failed") > 0
    if is_commit:
        headline = (
            gettext("Update finished with problems to fix")
            if problems
            else gettext("Update finished: all done")
        )
    else:
        headline = (
            gettext("Check finished: some things to fix before updating")
            if problems
            else gettext("Check finished: ready to update")
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
        for fix in _template_fixes(latest):
            todos.append(
                Todo(gettext("Fix a notes page — {fix}").format(fix=fix), "you", "knowledge")
            )
        if (
            latest.status == "succeeded"
            and booking != "error"
            and _blocked_by_connection(latest, booking)
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
            if latest.kind == "dry_run" and not _template_fixes(latest) and last_commit is None:
                todos.append(
                    Todo(
                        gettext("Load your notes into your assistant: press “Update knowledge”."),
                        "you",
                        "knowledge",
                    )
                )
            if _unresolved_lines(latest):
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


# --- the audit trail ----------------------------------------------------------------------------

# What someone did, as a sentence for each kind of doer: (the reader did it, someone else —
# {who}: another person of the account, our team, your assistant, our service — did it).
# Two whole sentences, because the verb takes a different form ("Hai…" / "{who} ha…").
_DONE_BY = tuple[str, str]
_ACTION_BY_WHO: dict[str, _DONE_BY] = {
    "signin.succeeded": (
        N_("You signed in to this console"),
        N_("{who} signed in to this console"),
    ),
    "signin.link_used": (
        N_("You signed in with the link from our message"),
        N_("{who} signed in with the link from our message"),
    ),
    "registry.fixed": (
        N_("You repaired which listing each apartment belongs to"),
        N_("{who} repaired which listing each apartment belongs to"),
    ),
    "account.password_set": (
        N_("You set a new password"),
        N_("{who} set a new password"),
    ),
}
# What happened, whoever did it.
_ACTION_WORDS = {
    "signin.failed": N_("A sign-in to this console failed"),
    "credentials.stored": N_("Booking-system credentials were saved"),
    "credentials.changed": N_("Booking-system credentials were changed"),
    "credentials.reconnected": N_("The booking system was reconnected with new credentials"),
    "key.minted": N_("An access key for your assistant was created"),
    "key.revoked": N_("An access key for your assistant was withdrawn"),
    "key.expired": N_("An access key for your assistant expired"),
    "key.rotated": N_("An access key for your assistant was replaced"),
    "key.scopes_changed": N_("What an access key of your assistant may do was changed"),
    "key.used_for_write": N_("Your assistant made a change in your booking system"),
    "admin.action": N_("Our team made a change to your account"),
    "onboarding.side_effect": N_("A set-up step made a change to your account"),
    "account.invited": N_("An invitation to this console was sent by e-mail"),
    "account.reset_sent": N_("A link to choose a new password was sent by e-mail"),
    "account.reset_requested": N_("Someone asked for a new password"),
    "audit.purged": N_("Older activity was removed from this list"),
    # The team's triage of a problem (docs/operations.md, Incidents): never its notes.
    "incident.opened": N_("Our team was alerted to a problem with your account"),
    "incident.acknowledged": N_("Our team is looking into a problem with your account"),
    "incident.assigned": N_("Our team is looking into a problem with your account"),
    "incident.snoozed": N_("Our team is looking into a problem with your account"),
    "incident.note_added": N_("Our team is looking into a problem with your account"),
    "incident.checked": N_("Our team checked the connection to your booking system"),
    "incident.link_resent": N_("Our team sent you a new sign-in link by e-mail"),
    "incident.resolved": N_("A problem with your account was solved"),
}
_TIMES = "\N{MULTIPLICATION SIGN}"
_ACTION_FALLBACK = N_("Something else was recorded on your account")
# Incident notices (jobs/notify.py): who was told what, by the notice's kind and channel.
_NOTICE_WORDS = {
    ("error", "customer"): N_("We told you by e-mail that the booking-system connection was lost"),
    ("recovered", "customer"): N_(
        "We told you by e-mail that the booking-system connection works again"
    ),
    ("error", "team"): N_("Our team was told that the booking-system connection was lost"),
    ("recovered", "team"): N_("Our team was told that the booking-system connection works again"),
}
_NOTICE_FALLBACK = N_("A notice about your booking-system connection was sent")
# What was done on this console, by its operation.
_OPERATION_WORDS: dict[str, _DONE_BY] = {
    "kross.reconnect": (
        N_("You tried new booking-system credentials"),
        N_("{who} tried new booking-system credentials"),
    ),
    "gateway.mint_key": (N_("You created an access key"), N_("{who} created an access key")),
    "gateway.revoke_key": (N_("You withdrew an access key"), N_("{who} withdrew an access key")),
    "gateway.set_key_scopes": (N_("You changed an access key"), N_("{who} changed an access key")),
}
_OPERATION_FALLBACK: _DONE_BY = (N_("You used this console"), N_("{who} used this console"))
_SYNC_STARTED: dict[bool, _DONE_BY] = {
    True: (
        N_("You started an update of the knowledge"),
        N_("{who} started an update of the knowledge"),
    ),
    False: (N_("You started a check of the notes"), N_("{who} started a check of the notes")),
}
_OUTCOME_WORDS = {
    "failure": N_("it did not work"),
    "refused": N_("refused"),
    "unknown": N_("the outcome is not known"),
}
_WHO_WORDS = {
    "team": N_("Our team"),
    "assistant": N_("Your assistant"),
    "service": N_("Our service"),
}


def _who(event: AuditEventView, viewer: str | None) -> str | None:
    """Who acted, as the sentence names them; None when it is the reader."""
    if event.actor_kind == "customer_user":
        return None if viewer and event.actor == viewer else event.actor
    if event.actor_kind in ("admin", "cli"):
        return gettext(_WHO_WORDS["team"])
    if event.actor_kind == "gateway_key":
        return gettext(_WHO_WORDS["assistant"])
    return gettext(_WHO_WORDS["service"])


def _by(said: _DONE_BY, who: str | None) -> str:
    """The sentence for the reader (``who`` None) or for someone else."""
    you, other = said
    return gettext(you) if who is None else gettext(other).format(who=who)


def event_text(event: AuditEventView, *, viewer: str | None = None) -> EventLine:
    """One event as a sentence for the customer (no ids, codes or internal names)."""
    who = _who(event, viewer)
    details = event.details or {}
    action = event.action
    when = event.occurred_at
    if action == "facility.status_changed":
        to = details.get("to")
        if to == "error":
            lost = gettext("The booking system stopped accepting our sign-in (connection lost).")
            return EventLine(when, lost, "bad", action)
        if to == "connected":
            return EventLine(when, gettext("The booking-system connection works."), "ok", action)
        return EventLine(when, gettext("The booking-system connection changed."), "info", action)
    if action == "console.action":
        operation = str(details.get("operation", ""))
        if operation == "knowledge.sync":
            text = _by(_SYNC_STARTED[bool(details.get("commit"))], who)
        else:
            text = _by(_OPERATION_WORDS.get(operation, _OPERATION_FALLBACK), who)
    elif action == "notice.sent":
        key = (
            str(details.get("kind")),
            "customer" if details.get("channel") == "customer" else "team",
        )
        text = gettext(_NOTICE_WORDS.get(key, _NOTICE_FALLBACK))
    elif action == "notice.failed":
        sentence = (
            gettext("A notice about your connection could not be delivered (we will try again).")
            if details.get("retried")
            else gettext("A notice about your connection could not be delivered.")
        )
        return EventLine(when, sentence, "warn", action)
    elif action.startswith("credentials.") and event.outcome != "success":
        refused = gettext("New booking-system credentials were tried and refused; nothing changed.")
        return EventLine(when, refused, "warn", action)
    elif action in _ACTION_BY_WHO:
        text = _by(_ACTION_BY_WHO[action], who)
    else:
        text = gettext(_ACTION_WORDS.get(action, _ACTION_FALLBACK))
    tone: Tone = "info"
    if event.outcome in _OUTCOME_WORDS:
        text += f" — {gettext(_OUTCOME_WORDS[event.outcome])}"
        tone = "warn" if event.outcome != "failure" else "bad"
    return EventLine(when, text + ".", tone, action)


def _told_together(first: EventLine, count: int) -> str:
    """Several identical events in a row as one sentence (else the sentence "(times n)")."""
    if first.tone == "info":
        if first.action == "onboarding.side_effect":
            many = ngettext(
                "Set-up made {count} change to your account.",
                "Set-up made {count} changes to your account.",
                count,
            )
            return many.format(count=count)
        if first.action == "admin.action":
            many = ngettext(
                "Our team made {count} change to your account.",
                "Our team made {count} changes to your account.",
                count,
            )
            return many.format(count=count)
        if first.action == "key.used_for_write":
            many = ngettext(
                "Your assistant made {count} change in your booking system.",
                "Your assistant made {count} changes in your booking system.",
                count,
            )
            return many.format(count=count)
        if first.action == "signin.failed":
            many = ngettext(
                "{count} sign-in to this console failed.",
                "{count} sign-ins to this console failed.",
                count,
            )
            return many.format(count=count)
    return f"{first.text.removesuffix('.')} ({_TIMES}{count})."


def group_events(lines: Iterable[EventLine]) -> list[EventDay]:
    """The events (newest first) by local day, identical ones in a row told once.

    Ten "A set-up step made a change to your account." on one day read "Set-up made 10
    changes to your account."; other repeats read "... (times 3)", written with the
    multiplication sign. The day is the reader's.
    """
    days: list[EventDay] = []
    for day, of_day in itertools.groupby(lines, key=lambda line: local(line.when).date()):
        items: list[EventItem] = []
        for _key, run in itertools.groupby(of_day, key=lambda line: (line.text, line.tone)):
            same = list(run)
            first = same[0]
            items.append(
                EventItem(
                    when=first.when,
                    text=first.text if len(same) == 1 else _told_together(first, len(same)),
                    tone=first.tone,
                    count=len(same),
                    earliest=same[-1].when,
                )
            )
        days.append(EventDay(day=day, day_label=format_date(day), items=items))
    return days


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
