"""A customer's activity in words: each audit event as a sentence, grouped by day.

:func:`event_text` tells an audit event as a sentence for the customer (no ids, codes or
internal names), naming who did it as the reader knows them ("You", another person of
the account, our team, the assistant, our service); :func:`group_events` groups the
sentences by the reader's local day and tells identical ones in a row once ("Set-up made
10 changes to your account."). Every sentence is translated through the catalogue
(:mod:`pmsgate.i18n`) in the reader's language; times are the reader's local times.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, datetime

from pmsgate.i18n import N_, format_date, format_time, gettext, local, ngettext
from pmsgate.storage.audit import AuditEventView
from pmsgate.web.sync_words import Tone


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
    # Webhooks (docs/webhooks.md): the addresses that receive our automatic messages.
    "webhook.subscribed": (
        N_("You added a web address that receives our automatic messages"),
        N_("{who} added a web address that receives our automatic messages"),
    ),
    "webhook.removed": (
        N_("You removed a web address that received our automatic messages"),
        N_("{who} removed a web address that received our automatic messages"),
    ),
    "webhook.enabled": (
        N_("You turned our automatic messages to a web address back on"),
        N_("{who} turned our automatic messages to a web address back on"),
    ),
    "webhook.rotated": (
        N_("You made a new secret key for our automatic messages"),
        N_("{who} made a new secret key for our automatic messages"),
    ),
    "webhook.replayed": (
        N_("You asked us to send an automatic message again"),
        N_("{who} asked us to send an automatic message again"),
    ),
    "oauth.denied": (
        N_("You refused to connect an app to your booking system"),
        N_("{who} refused to connect an app to your booking system"),
    ),
}
# Connected apps (docs/oauth.md), naming the app as the consent page did ({app}).
_APP_BY_WHO: dict[str, _DONE_BY] = {
    "oauth.granted": (
        N_("You allowed the app “{app}” to use your booking system"),
        N_("{who} allowed the app “{app}” to use your booking system"),
    ),
    "oauth.revoked": (
        N_("You disconnected the app “{app}”"),
        N_("{who} disconnected the app “{app}”"),
    ),
}
# An app's connection ended for safety (a one-time code or refresh token used twice).
_APP_ENDED = N_(
    "The app “{app}” was disconnected for safety: one of its access codes was used twice"
)
_APP_ENDED_ITSELF = N_("The app “{app}” ended its own connection")
_AN_APP = N_("unnamed")
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
    "oauth.client_registered": N_("An app registered itself to connect to this service"),
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
# Something that needs the reader's eye, told whole (its outcome is in the sentence).
_WARNING_WORDS = {
    "webhook.disabled": N_(
        "We stopped sending automatic messages to a web address: it answered that it no "
        "longer exists. Turn it back on from the Webhooks page once it works"
    ),
    "webhook.gave_up": N_(
        "An automatic message could not be delivered, even after several tries. You can "
        "send it again from the Webhooks page"
    ),
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
    elif action in _WARNING_WORDS:
        return EventLine(when, gettext(_WARNING_WORDS[action]) + ".", "warn", action)
    elif action.startswith("oauth.") and action not in _ACTION_WORDS | _ACTION_BY_WHO:
        return _app_line(event, who)
    elif action == "oauth.denied":
        return EventLine(when, _by(_ACTION_BY_WHO[action], who) + ".", "info", action)
    elif action in _ACTION_BY_WHO:
        text = _by(_ACTION_BY_WHO[action], who)
    else:
        text = gettext(_ACTION_WORDS.get(action, _ACTION_FALLBACK))
    tone: Tone = "info"
    if event.outcome in _OUTCOME_WORDS:
        text += f" — {gettext(_OUTCOME_WORDS[event.outcome])}"
        tone = "warn" if event.outcome != "failure" else "bad"
    return EventLine(when, text + ".", tone, action)


def _app_line(event: AuditEventView, who: str | None) -> EventLine:
    """A connected app's event (granted, disconnected, ended for safety), naming the app."""
    details = event.details or {}
    app = str(details.get("client_name") or "") or gettext(_AN_APP)
    action = event.action
    if action in _APP_BY_WHO and details.get("by") != "client":
        you, other = _APP_BY_WHO[action]
        text = gettext(you).format(app=app) if who is None else gettext(other)
        return EventLine(event.occurred_at, text.format(who=who, app=app) + ".", "info", action)
    if action == "oauth.revoked":
        ended = gettext(_APP_ENDED_ITSELF).format(app=app)
        return EventLine(event.occurred_at, ended + ".", "info", action)
    if action in ("oauth.code_reused", "oauth.refresh_reused"):
        ended = gettext(_APP_ENDED).format(app=app)
        return EventLine(event.occurred_at, ended + ".", "warn", action)
    return EventLine(event.occurred_at, gettext(_ACTION_FALLBACK) + ".", "info", action)


# Several identical informational events in a row, told as one plural sentence ({count}).
_TOLD_TOGETHER: dict[str, Callable[[int], str]] = {
    "onboarding.side_effect": lambda count: ngettext(
        "Set-up made {count} change to your account.",
        "Set-up made {count} changes to your account.",
        count,
    ),
    "admin.action": lambda count: ngettext(
        "Our team made {count} change to your account.",
        "Our team made {count} changes to your account.",
        count,
    ),
    "key.used_for_write": lambda count: ngettext(
        "Your assistant made {count} change in your booking system.",
        "Your assistant made {count} changes in your booking system.",
        count,
    ),
    "signin.failed": lambda count: ngettext(
        "{count} sign-in to this console failed.",
        "{count} sign-ins to this console failed.",
        count,
    ),
}


def _told_together(first: EventLine, count: int) -> str:
    """Several identical events in a row as one sentence (else the sentence "(times n)")."""
    if first.tone == "info" and first.action in _TOLD_TOGETHER:
        return _TOLD_TOGETHER[first.action](count).format(count=count)
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
