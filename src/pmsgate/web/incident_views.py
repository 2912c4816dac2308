"""An incident as the console shows it: its words, its timeline, and the list's query string.

What the "needs attention" list and an incident's page read of an incident
(:class:`IncidentView`, :class:`TimelineLine`), the list's bookmarkable filters and sort
(:class:`IncidentQuery`), and which bulk action applies to which incident. The incidents
themselves are opened, resolved and acted on by :mod:`pmsgate.web.incidents`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from pmsgate import i18n
from pmsgate.storage.incidents import IncidentEventRecord, IncidentNoticeLine, IncidentRecord
from pmsgate.web.query_params import ParameterRules

KIND_LABELS = {
    "pms_error": "booking system in error",
    "job_failing": "scheduled job failing",
    "registry": "registry problem",
    "budget": "daily budget spent",
}
# How a list row words an incident's age: "in error for 3 h".
AGE_WORDS = {
    "pms_error": "in error for",
    "job_failing": "failing for",
    "registry": "problems for",
    "budget": "budget spent for",
}
STATE_CHOICES = ("active", "open", "acknowledged", "snoozed", "resolved", "all")
SORTS = ("last_seen", "age", "count")
ORDERS = ("desc", "asc")
SNOOZES = {"1h": timedelta(hours=1), "4h": timedelta(hours=4), "1d": timedelta(days=1)}
BULK_ACTIONS = {
    "acknowledge": "acknowledge",
    "resend": "resend the sign-in link to",
    "check": "check now",
    "snooze_1h": "snooze for 1 hour",
    "snooze_1d": "snooze for 1 day",
}
# Which incidents each action applies to (a facility to check, a customer to write to).
FACILITY_KINDS = ("pms_error", "budget")
LINK_KINDS = ("pms_error",)


# --- what an incident looks like to the console ------------------------------------------------


def duration_words(delta: timedelta) -> str:
    """A duration as a person says it: "45 min", "3 h", "2 days"."""
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 3600:
        return f"{max(1, seconds // 60)} min"
    if seconds < 2 * 86400:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} days"


@dataclass(frozen=True)
class TimelineLine:
    """One line of a timeline: an incident event or a notice of it."""

    at: datetime
    kind: str
    actor: str
    text: str
    note: str | None = None
    outcome: str = "info"


@dataclass(frozen=True)
class IncidentView:
    """An incident as the list and its page show it."""

    record: IncidentRecord
    now: datetime
    notices: tuple[IncidentNoticeLine, ...] = ()
    events: tuple[IncidentEventRecord, ...] = ()

    @property
    def label(self) -> str:
        """The kind in words."""
        return KIND_LABELS.get(self.record.kind, self.record.kind)

    @property
    def state(self) -> str:
        """The state now: a snooze whose time has passed is open again (before the tick)."""
        record = self.record
        if (
            record.state == "snoozed"
            and record.snoozed_until is not None
            and record.snoozed_until <= self.now
        ):
            return "open"
        return record.state

    @property
    def state_words(self) -> str:
        """ "open", "acknowledged by X", "snoozed until T", "resolved"."""
        detail = self.state_detail
        return f"{self.state} {detail}" if detail else self.state

    @property
    def state_detail(self) -> str:
        """Who acknowledged it, or until when it sleeps (the list's short form)."""
        record = self.record
        if self.state == "acknowledged":
            return f"by {record.acknowledged_by}"
        if self.state == "snoozed" and record.snoozed_until is not None:
            return f"until {i18n.format_datetime(record.snoozed_until)}"
        return ""

    @property
    def age(self) -> timedelta:
        """How long the problem has lasted (until its resolution, if resolved)."""
        end = self.record.resolved_at or self.now
        return end - self.record.first_seen

    @property
    def age_words(self) -> str:
        """ "in error for 3 h" (resolved: "lasted 3 h")."""
        if self.record.state == "resolved":
            return f"lasted {duration_words(self.age)}"
        return f"{AGE_WORDS.get(self.record.kind, 'for')} {duration_words(self.age)}"

    @property
    def subject_words(self) -> str:
        """What the incident is about, as an operator searches for it."""
        record = self.record
        if record.job:
            return f"job {record.job}"
        parts = [record.customer_name or record.student_id or ""]
        if record.hotel_id:
            parts.append(f"hotel {record.hotel_id}")
        return " · ".join(part for part in parts if part) or record.subject

    @property
    def sent_notices(self) -> tuple[IncidentNoticeLine, ...]:
        """The notices delivered."""
        return tuple(n for n in self.notices if n.status == "sent")

    @property
    def customer_told_at(self) -> datetime | None:
        """When the customer's error notice went out, if it did."""
        for notice in self.notices:
            if notice.channel == "customer" and notice.kind == "error" and notice.sent_at:
                return notice.sent_at
        return None

    @property
    def team_told_at(self) -> datetime | None:
        """When the team (e-mail or chat) was first told, if it was."""
        times = [
            n.sent_at
            for n in self.notices
            if n.channel in ("team", "webhook") and n.kind == "error" and n.sent_at
        ]
        return min(times) if times else None

    @property
    def can_check(self) -> bool:
        """Whether "check now" applies (a facility to verify)."""
        return self.record.kind in FACILITY_KINDS and self.record.hotel_id is not None

    @property
    def can_resend(self) -> bool:
        """Whether "resend the sign-in link" applies (a customer to write to)."""
        return self.record.kind in LINK_KINDS and self.record.student_id is not None

    def timeline(self) -> list[TimelineLine]:
        """Events and notices, oldest first."""
        lines = [_event_line(event) for event in self.events]
        lines.extend(_notice_line(notice) for notice in self.notices)
        return sorted(lines, key=lambda line: line.at)


def _moment_words(value: object) -> str:
    """A stored ISO moment in the reader's zone and words (anything else as it is)."""
    try:
        return i18n.format_datetime(datetime.fromisoformat(str(value)))
    except ValueError:
        return str(value or "")


def _event_line(event: IncidentEventRecord) -> TimelineLine:
    details = event.details
    texts = {
        "opened": f"Opened: {details.get('reason') or 'problem seen'}",
        "acknowledged": "Acknowledged",
        "assigned": (
            f"Assigned to {details['assignee']}" if details.get("assignee") else "Unassigned"
        ),
        "snoozed": f"Snoozed until {_moment_words(details.get('until'))}",
        "woke": "Snooze ended: open again",
        "note": "Note",
        "check": _check_text(details),
        "link_resent": (
            f"Sign-in link resent to {details.get('to', 'the customer')}"
            if details.get("via") == "sign-in link"
            else f"Invitation sent again to {details.get('to', 'the customer')}"
        ),
        "recovered": f"Recovered{': ' + details['why'] if details.get('why') else ''}",
    }
    outcome = "info"
    if event.kind == "check":
        outcome = "ok" if details.get("outcome") == "connected" else "failed"
    elif event.kind in ("recovered", "link_resent"):
        outcome = "ok"
    return TimelineLine(
        at=event.at,
        kind=event.kind,
        actor=event.actor,
        text=texts.get(event.kind, event.kind),
        note=event.note,
        outcome=outcome,
    )


def _check_text(details: Mapping[str, Any]) -> str:
    outcome = details.get("outcome")
    if outcome == "connected":
        return "Check now: the booking system accepted the stored credentials"
    if outcome == "refused":
        return (
            f"Check now: the booking system refused the stored credentials ({details.get('code')})"
        )
    return f"Check now: no verdict ({details.get('code')})"


def _notice_line(notice: IncidentNoticeLine) -> TimelineLine:
    who = notice.recipient if notice.channel == "customer" else notice.channel
    what = "recovery notice" if notice.kind == "recovered" else "error notice"
    if notice.status == "sent":
        text, at, outcome = f"{what.capitalize()} sent to {who}", notice.sent_at, "ok"
    elif notice.status == "failed":
        text = f"{what.capitalize()} to {who} failed after {notice.attempts} attempts"
        at, outcome = notice.created_at, "failed"
    elif notice.status == "skipped":
        text, at, outcome = f"{what.capitalize()} to {who} skipped", notice.created_at, "info"
    else:
        retry = f" (retrying: {notice.last_error})" if notice.last_error else ""
        text, at, outcome = (
            f"{what.capitalize()} to {who} pending{retry}",
            notice.created_at,
            "info",
        )
    return TimelineLine(
        at=at or notice.created_at,
        kind="notice",
        actor="notify-incidents",
        text=text,
        outcome=outcome,
    )


# --- the list's query string ------------------------------------------------------------------


QUERY_RULES = ParameterRules(
    code="invalid_incident_filter",
    elsewhere="Or open /console/attention for every active incident.",
)
_bad = QUERY_RULES.bad
_choice = QUERY_RULES.choice


@dataclass(frozen=True)
class IncidentQuery:
    """The incident list's filters and sort, as its query string gives them (bookmarkable).

    ``assignee`` is ``""`` (anyone), ``nobody``, ``me`` or a team member's e-mail address.
    """

    kind: str = ""
    state: str = "active"
    assignee: str = ""
    sort: str = "last_seen"
    order: str = "desc"

    @classmethod
    def parse(cls, params: Mapping[str, str], team: Sequence[str] = ()) -> IncidentQuery:
        """The query of a request (``invalid_incident_filter``, a 422, for a bad value)."""
        assignee = params.get("assignee", "").strip().lower()
        if assignee and assignee not in ("nobody", "me", *team):
            raise _bad("assignee", assignee, ("nobody", "me", *team))
        return cls(
            kind=_choice(params, "kind", tuple(KIND_LABELS), ""),
            state=_choice(params, "state", STATE_CHOICES, "active"),
            assignee=assignee,
            sort=_choice(params, "sort", SORTS, "last_seen"),
            order=_choice(params, "order", ORDERS, "desc"),
        )

    def params(self, **changes: Any) -> dict[str, str]:
        """The non-default parameters of this query with ``changes``, for a link or a form."""
        query = replace(self, **changes)
        values = {
            "kind": query.kind,
            "state": query.state if query.state != "active" else "",
            "assignee": query.assignee,
            "sort": query.sort if query.sort != "last_seen" else "",
            "order": query.order if query.order != "desc" else "",
        }
        return {name: value for name, value in values.items() if value}

    def url(self, path: str = "/console/attention", **changes: Any) -> str:
        """``path`` with this query (and ``changes``)."""
        params = self.params(**changes)
        return path + ("?" + urlencode(params) if params else "")

    def sort_url(self, column: str) -> str:
        """A column heading's link: sort by it (again: the other way)."""
        order = "asc" if self.sort == column and self.order == "desc" else "desc"
        return self.url(sort=column, order=order)

    def keeps(self, view: IncidentView, me: str) -> bool:
        """Whether the incident passes the filters (``me``: the signed-in admin's address)."""
        if self.kind and view.record.kind != self.kind:
            return False
        state = view.state
        if self.state == "active" and state == "resolved":
            return False
        if self.state not in ("active", "all") and state != self.state:
            return False
        wanted = me if self.assignee == "me" else self.assignee
        if wanted == "nobody":
            return view.record.assignee_email is None
        return not wanted or view.record.assignee_email == wanted

    def sorted(self, views: list[IncidentView]) -> list[IncidentView]:
        """The views in this query's order."""
        keys: dict[str, Any] = {
            "last_seen": lambda v: (v.record.last_seen, v.record.id),
            "age": lambda v: (v.age, v.record.id),
            "count": lambda v: (v.record.failures, v.record.id),
        }
        return sorted(views, key=keys[self.sort], reverse=self.order == "desc")


def bulk_applies(action: str, view: IncidentView) -> bool:
    """Whether a bulk action applies to this incident (resend: a customer; check: a facility)."""
    if view.state == "resolved":
        return False
    if action == "resend":
        return view.can_resend
    if action == "check":
        return view.can_check
    if action == "acknowledge":
        return view.state in ("open", "snoozed")
    return True
