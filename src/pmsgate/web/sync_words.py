"""A knowledge sync job in the customer's words (docs/web.md).

:func:`explain_job` tells a sync job (running, failed, a dry run, a commit) as a headline,
a tone (``ok``, ``warn``, ``bad``, ``busy``) and sentences; a job that ran while the
booking system was disconnected reads "nothing can sync until you reconnect" (a warning,
never a green "succeeded"). :func:`error_words` says why a sync was refused or failed,
:func:`template_fixes` what to change in which notes page. No sentence carries an
internal word (a code, a camelCase counter name, an id); each is translated through the
catalogue (:mod:`pmsgate.i18n`) in the reader's language.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from babel.lists import format_list

from pmsgate.catalogue import load_catalogue
from pmsgate.i18n import N_, current_language, gettext, locale, ngettext
from pmsgate.storage.knowledge import SyncJobView

Tone = Literal["ok", "warn", "bad", "busy", "info"]
BookingState = Literal["connected", "unverified", "error", "not_linked"]

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


def error_words(code: str | None) -> str:
    """A refused or failed sync as one plain sentence (never its code)."""
    return gettext(_ERROR_WORDS.get(code or "", _ERROR_FALLBACK))


@dataclass(frozen=True)
class SyncExplanation:
    """A sync job in words."""

    tone: Tone
    headline: str
    lines: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)  # what to change in which notes page
    when: datetime | None = None


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


def template_fixes(job: SyncJobView) -> list[str]:
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


def unresolved_lines(job: SyncJobView) -> list[str]:
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


def blocked_by_connection(job: SyncJobView, booking: BookingState) -> bool:
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
            fixes=template_fixes(job),
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
        fixes=template_fixes(job),
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
    if blocked_by_connection(job, booking):
        return _disconnected(job, booking, when)
    fixes = template_fixes(job)
    unresolved = unresolved_lines(job)
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
