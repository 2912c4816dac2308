"""Incidents: a problem as an object the platform team triages and acts on.

An **incident** is one problem of one subject, from the moment it is seen to its recovery
(docs/operations.md, Incidents). Four kinds, each observed from what is already stored:

- ``pms_error`` — a facility in ``error`` (its booking system refused the stored
  credentials). ``unverified`` does not count: nothing has failed yet, and the facility's
  first use settles it (``connected``, or ``error`` — which opens one). The incident is
  named by the facility's ``status_changed_at``, as its notices are (``incident_notices``):
  the notices of the incident are read from there, never copied. A facility that went to
  error again since the incident opened (a recovery between two ticks) ends it and opens
  a new one.
- ``job_failing`` — a scheduled job whose latest :data:`JOB_FAILURES_TO_OPEN` runs failed;
  it stays open until a run succeeds.
- ``registry`` — a customer whose latest registry check found problems.
- ``budget`` — a facility that spent its whole daily budget over the last 24 hours
  (booking-system requests, the admin overview's count): exhausted for long, not a burst.

**Count of failed attempts**: 1 when it opens, then one for every *newer* failed attempt
the reconciliation sees while it is not resolved — a failed authentication of the facility
(the gateway's retry once per re-authentication interval, a "check now" the booking system
refused), a failed run of the job, a newer registry check with problems, each hour the
budget is still spent. Seeing the same attempt twice (two replicas, two ticks) counts once.
``last_seen`` is the moment of the latest counted attempt.

**Reconciliation** (:meth:`IncidentService.reconcile`) opens what is observed and not open,
counts newer attempts, resolves what is no longer observed, and wakes the snoozes whose
time has passed. It runs at the start of every ``notify-incidents`` tick (jobs/notify.py)
rather than as a job of its own: the incident then exists in the same tick as its first
notices, every replica may run it (the writes are conditional, storage/incidents.py), and
one interval (60 s) governs both. A resolved incident that recurs opens a new one.

**The team's actions** (each a line of the incident's timeline and an audit event with
the admin as actor): acknowledge, assign to a team member (an admin console account),
snooze (1 h, 4 h, 1 day or until a date; it wakes up by itself), add a note, *check now*
(one token request with the stored credentials, through the facility's limiter like any
booking-system request: :func:`pmsgate.gateway.verification.kross_verifier` with the gateway's
``token_permit``) and *resend the sign-in link* (the customer's one-time link to its
reconnect form, as the error notice carries it, or the invitation when its account has no
password yet).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Protocol
from urllib.parse import urlencode

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate import i18n
from pmsgate.audit.actions import Actor, AuditAction, Outcome
from pmsgate.audit.trail import AuditTrail
from pmsgate.clock import Clock
from pmsgate.config import Settings
from pmsgate.customers.context import CustomerServices
from pmsgate.errors import Conflict, InvalidInput, NotFound, PmsgateError
from pmsgate.gateway.context import GatewayServices
from pmsgate.gateway.facilities import subject_of
from pmsgate.gateway.facility_status import CAUSE_REFUSED
from pmsgate.gateway.verification import is_refusal, kross_verifier
from pmsgate.integrations.kross.client import Token
from pmsgate.integrations.kross.errors import KrossError
from pmsgate.storage.gateway_usage import hour_start
from pmsgate.storage.incidents import (
    IncidentEventRecord,
    IncidentNoticeLine,
    IncidentRecord,
    IncidentRepository,
)
from pmsgate.storage.job_runs import JobRunRepository
from pmsgate.storage.models import RegistryCheckStatus
from pmsgate.storage.registry_checks import RegistryCheckRepository
from pmsgate.web.admin_views import AdminOverview
from pmsgate.web.invitations import Invitations, no_console_address
from pmsgate.web.query_params import ParameterRules
from pmsgate.web.users import UserService, UserView

log = structlog.get_logger(__name__)

RECONCILER = Actor.system("incidents")
PROBLEMS: tuple[RegistryCheckStatus, ...] = ("problems",)
JOB_FAILURES_TO_OPEN = 2
BUDGET_EXHAUSTED_PCT = 100.0
MAX_NOTE = 2000
MAX_SNOOZE = timedelta(days=90)
MAX_LISTED = 1000
CAUSE_CHECKED = "checked now from the console"

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


class SignInLinkMailer(Protocol):
    """Sends a customer its one-time sign-in link to the reconnect form (jobs/notify.py)."""

    async def send_reconnect_link(self, facility_id: int) -> tuple[str, str]:
        """E-mail the link for the facility's customer; (transport, recipient)."""
        ...


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
        record = self.record
        if self.state == "acknowledged":
            return f"acknowledged by {record.acknowledged_by}"
        if self.state == "snoozed" and record.snoozed_until is not None:
            return f"snoozed until {i18n.format_datetime(record.snoozed_until)}"
        return self.state

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


_RULES = ParameterRules(
    code="invalid_incident_filter",
    elsewhere="Or open /console/attention for every active incident.",
)
_bad = _RULES.bad
_choice = _RULES.choice


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


# --- observations ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Observation:
    """A problem seen now: what incident it belongs to and its latest failed attempt."""

    kind: str
    subject: str
    attempt_at: datetime
    facility_id: int | None = None
    student_id: str | None = None
    job: str | None = None
    incident_at: datetime | None = None
    reason: str | None = None


@dataclass
class ReconcileSummary:
    """What one reconciliation changed (the job run's detail)."""

    opened: list[str] = field(default_factory=list)
    resolved: list[str] = field(default_factory=list)
    woke: list[str] = field(default_factory=list)
    counted: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "opened": self.opened,
            "resolved": self.resolved,
            "woke": self.woke,
            "counted": self.counted,
        }


@dataclass(frozen=True)
class BulkOutcome:
    """What a bulk action did: how many succeeded, and the failures by code."""

    action: str
    done: int
    failed: dict[str, int]


class IncidentService:
    """Opens, resolves and lists incidents, and carries out the team's actions on them."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        *,
        clock: Clock,
        settings: Settings,
        gateway: GatewayServices,
        customers: CustomerServices,
        users: UserService,
        invitations: Invitations,
        audit: AuditTrail,
        link_mailer: SignInLinkMailer | None = None,
    ) -> None:
        self._sessions = sessions
        self._clock = clock
        self._settings = settings
        self._gateway = gateway
        self._customers = customers
        self._users = users
        self._invitations = invitations
        self._audit = audit
        self.link_mailer = link_mailer

    # --- reconciliation ---------------------------------------------------------------------

    async def _observations(self) -> list[Observation]:
        now = self._clock.now()
        async with self._sessions() as session:
            repository = IncidentRepository(session)
            in_error = await repository.facilities_in_error()
            runs = JobRunRepository(session)
            latest = await runs.latest_by_job()
            failing = {}
            for job, run in latest.items():
                if run.status != "failed":
                    continue
                recent = await runs.recent(job, JOB_FAILURES_TO_OPEN)
                failing[job] = (run, recent)
            open_jobs = {
                record.job
                for record in await repository.unresolved()
                if record.kind == "job_failing" and record.job
            }
            checks = await RegistryCheckRepository(session).with_status(PROBLEMS)
        found = [
            Observation(
                kind="pms_error",
                subject=subject_of(facility.hotel_id),
                attempt_at=facility.last_auth_attempt_at or facility.status_changed_at,
                facility_id=facility.facility_id,
                student_id=facility.student_id,
                incident_at=facility.status_changed_at,
                reason=facility.last_error,
            )
            for facility in in_error
        ]
        for job, (run, recent) in failing.items():
            keeps_failing = len(recent) >= JOB_FAILURES_TO_OPEN and all(
                r.status == "failed" for r in recent
            )
            if keeps_failing or job in open_jobs:
                found.append(
                    Observation(
                        kind="job_failing",
                        subject=f"job:{job}",
                        attempt_at=run.started_at,
                        job=job,
                        reason=run.error_code or "the latest run failed",
                    )
                )
        for check in checks:
            reasons = [str(p.get("reason", "")) for p in check.report.get("problems") or []]
            found.append(
                Observation(
                    kind="registry",
                    subject=f"customer:{check.student_id}",
                    attempt_at=check.checked_at,
                    student_id=check.student_id,
                    reason=(reasons[0] if reasons else f"{check.problems} problems")[:300],
                )
            )
        overview = AdminOverview(
            self._sessions, self._clock, snapshot=self._gateway.metrics.facilities
        )
        spent = [
            row
            for row in (await overview.fleet()).rows
            if row.hotel_id is not None
            and row.budget_percent is not None
            and row.budget_percent >= BUDGET_EXHAUSTED_PCT
        ]
        if spent:
            async with self._sessions() as session:
                ids = await IncidentRepository(session).facility_ids(
                    [row.hotel_id for row in spent if row.hotel_id]
                )
            for row in spent:
                hotel_id = row.hotel_id or ""
                found.append(
                    Observation(
                        kind="budget",
                        subject=subject_of(hotel_id),
                        attempt_at=hour_start(now),
                        student_id=row.student_id,
                        facility_id=ids.get(hotel_id),
                        reason=f"{row.budget_used:,} of {row.budget_allowed:,} requests of the "
                        "daily budget used in the last 24 hours",
                    )
                )
        return found

    async def reconcile(self) -> ReconcileSummary:
        """Open, count, resolve and wake: the incidents made to match what is observed now."""
        observed = await self._observations()
        now = self._clock.now()
        summary = ReconcileSummary()
        async with self._sessions.begin() as session:
            repository = IncidentRepository(session)
            current = {(r.kind, r.subject): r for r in await repository.unresolved()}
            for seen in observed:
                found = current.pop((seen.kind, seen.subject), None)
                if (
                    found is not None
                    and seen.incident_at is not None
                    and found.incident_at is not None
                    and found.incident_at != seen.incident_at
                ):
                    # Recovered and broken again between two ticks: that incident ended.
                    await self._resolve(session, found, now, summary, why="in error again since")
                    found = None
                if found is None:
                    await self._open(session, seen, now, summary)
                elif await repository.observe(found.id, seen.attempt_at, seen.reason, now):
                    summary.counted += 1
            for gone in current.values():
                await self._resolve(session, gone, now, summary)
            for incident_id in await repository.snoozes_ended(now):
                await repository.add_event(incident_id, at=now, kind="woke", actor=str(RECONCILER))
                summary.woke.append(str(incident_id))
        if summary.opened or summary.resolved:
            log.info("incidents_reconciled", **summary.as_dict())
        return summary

    async def _open(
        self, session: AsyncSession, seen: Observation, now: datetime, summary: ReconcileSummary
    ) -> None:
        repository = IncidentRepository(session)
        incident_id = await repository.open(
            kind=seen.kind,
            subject=seen.subject,
            facility_id=seen.facility_id,
            student_id=seen.student_id,
            job=seen.job,
            incident_at=seen.incident_at,
            reason=(seen.reason or "")[:300] or None,
            attempt_at=seen.attempt_at,
            now=now,
        )
        if incident_id is None:
            return  # another replica opened it
        await repository.add_event(
            incident_id,
            at=now,
            kind="opened",
            actor=str(RECONCILER),
            details={"reason": (seen.reason or "")[:300]},
        )
        await self._audit.record_in(
            session,
            AuditAction.INCIDENT_OPENED,
            actor=RECONCILER,
            subject=seen.subject,
            outcome=Outcome.FAILURE,
            details={"incident": incident_id, "kind": seen.kind},
            facility_id=seen.facility_id,
            student_id=seen.student_id,
        )
        summary.opened.append(f"{seen.kind} {seen.subject}")

    async def _resolve(
        self,
        session: AsyncSession,
        record: IncidentRecord,
        now: datetime,
        summary: ReconcileSummary,
        *,
        why: str | None = None,
    ) -> None:
        repository = IncidentRepository(session)
        if not await repository.resolve(record.id, now):
            return  # another replica resolved it
        await repository.add_event(
            record.id,
            at=now,
            kind="recovered",
            actor=str(RECONCILER),
            details={"why": why} if why else {},
        )
        await self._audit.record_in(
            session,
            AuditAction.INCIDENT_RESOLVED,
            actor=RECONCILER,
            subject=record.subject,
            details={"incident": record.id, "kind": record.kind, "failures": record.failures},
            facility_id=record.facility_id,
            student_id=record.student_id,
        )
        summary.resolved.append(f"{record.kind} {record.subject}")

    # --- reads ------------------------------------------------------------------------------

    async def team(self) -> list[UserView]:
        """The team members an incident can be assigned to (the admin console accounts)."""
        return [user for user in await self._users.list() if user.role == "admin"]

    async def _views(
        self, records: Sequence[IncidentRecord], *, timeline: bool
    ) -> list[IncidentView]:
        ids = [record.id for record in records]
        async with self._sessions() as session:
            repository = IncidentRepository(session)
            notices = await repository.notices(ids)
            events = await repository.events(ids) if timeline else []
        now = self._clock.now()
        return [
            IncidentView(
                record=record,
                now=now,
                notices=tuple(n for n in notices if n.incident_id == record.id),
                events=tuple(e for e in events if e.incident_id == record.id),
            )
            for record in records
        ]

    async def listed(self, query: IncidentQuery, me: str) -> list[IncidentView]:
        """The incidents the query selects, in its order (with their notices)."""
        states: tuple[str, ...] = ("open", "acknowledged", "snoozed")
        if query.state in ("resolved", "all"):
            states = (*states, "resolved")
        async with self._sessions() as session:
            records = await IncidentRepository(session).listed(states, limit=MAX_LISTED)
        views = await self._views(records, timeline=False)
        return query.sorted([view for view in views if query.keeps(view, me)])

    async def get(self, incident_id: int) -> IncidentView:
        """One incident with its notices and timeline (``incident_not_found``)."""
        async with self._sessions() as session:
            record = await IncidentRepository(session).get(incident_id)
        if record is None:
            raise incident_not_found(incident_id)
        [view] = await self._views([record], timeline=True)
        return view

    async def of_customer(self, student_id: str, hotel_ids: Sequence[str]) -> list[IncidentView]:
        """A customer's incidents, the unresolved ones and the latest resolved (timelines too)."""
        async with self._sessions() as session:
            records = await IncidentRepository(session).of_customer(student_id, hotel_ids, limit=10)
        unresolved = [r for r in records if r.state != "resolved"]
        shown = unresolved or records[:1]
        return await self._views(shown, timeline=True)

    # --- the team's actions -----------------------------------------------------------------

    async def _require(self, session: AsyncSession, incident_id: int) -> IncidentRecord:
        record = await IncidentRepository(session).get(incident_id)
        if record is None:
            raise incident_not_found(incident_id)
        return record

    async def _log(
        self,
        session: AsyncSession,
        record: IncidentRecord,
        action: AuditAction,
        actor: Actor,
        *,
        kind: str,
        details: dict[str, Any] | None = None,
        note: str | None = None,
        outcome: Outcome = Outcome.SUCCESS,
    ) -> None:
        """The timeline line and the audit event of one action, in the caller's transaction."""
        now = self._clock.now()
        await IncidentRepository(session).add_event(
            record.id, at=now, kind=kind, actor=actor.name, note=note, details=details or {}
        )
        await self._audit.record_in(
            session,
            action,
            actor=actor,
            subject=record.subject,
            outcome=outcome,
            # A note is the team's words: it stays in the timeline, the trail has its length.
            details={
                "incident": record.id,
                "kind": record.kind,
                **(details or {}),
                **({"note_length": len(note)} if note else {}),
            },
            facility_id=record.facility_id,
            student_id=record.student_id,
        )

    async def acknowledge(self, incident_id: int, *, actor: Actor) -> bool:
        """Acknowledge it (a snooze ends); False when it already was (nothing recorded)."""
        async with self._sessions.begin() as session:
            record = await self._require(session, incident_id)
            _unresolved(record)
            if not await IncidentRepository(session).acknowledge(
                incident_id, actor.name, self._clock.now()
            ):
                return False
            await self._log(
                session, record, AuditAction.INCIDENT_ACKNOWLEDGED, actor, kind="acknowledged"
            )
        return True

    async def assign(self, incident_id: int, assignee: str, *, actor: Actor) -> None:
        """Give it to a team member by e-mail address (empty: nobody)."""
        address = assignee.strip().lower()
        member: UserView | None = None
        if address:
            member = await self._users.account(address)
            if member is None or member.role != "admin":
                raise InvalidInput(
                    f"{address!r} is not a team member.",
                    code="unknown_assignee",
                    hint="Assign to an admin console account (`pmsgate users list`).",
                )
        async with self._sessions.begin() as session:
            record = await self._require(session, incident_id)
            await IncidentRepository(session).assign(
                incident_id, member.id if member else None, self._clock.now()
            )
            await self._log(
                session,
                record,
                AuditAction.INCIDENT_ASSIGNED,
                actor,
                kind="assigned",
                details={"assignee": member.email if member else None},
            )

    def snooze_until(self, choice: str, until: str = "") -> datetime:
        """When a snooze ends: ``1h``, ``4h``, ``1d``, or ``date`` with ``until`` (YYYY-MM-DD,
        the start of that day in the reader's time zone); ``invalid_snooze`` otherwise."""
        now = self._clock.now()
        if choice in SNOOZES:
            return now + SNOOZES[choice]
        if choice == "date":
            try:
                day = date.fromisoformat(until.strip())
            except ValueError:
                raise invalid_snooze(until) from None
            zone = i18n.zone_of(i18n.reader().timezone)
            moment = datetime.combine(day, time(0, 0), tzinfo=zone).astimezone(UTC)
            if moment <= now or moment - now > MAX_SNOOZE:
                raise invalid_snooze(until)
            return moment
        raise invalid_snooze(choice)

    async def snooze(self, incident_id: int, until: datetime, *, actor: Actor) -> None:
        """Snooze it until ``until``: the list shows it snoozed; it wakes up by itself."""
        async with self._sessions.begin() as session:
            record = await self._require(session, incident_id)
            _unresolved(record)
            if not await IncidentRepository(session).snooze(incident_id, until, self._clock.now()):
                _unresolved(replace(record, state="resolved"))  # resolved meanwhile
            await self._log(
                session,
                record,
                AuditAction.INCIDENT_SNOOZED,
                actor,
                kind="snoozed",
                details={"until": until.isoformat()},
            )

    async def add_note(self, incident_id: int, text: str, *, actor: Actor) -> None:
        """Add a team member's note to the timeline."""
        note = text.strip()
        if not note or len(note) > MAX_NOTE:
            raise InvalidInput(
                "A note is 1 to 2,000 characters.",
                code="invalid_note",
                hint="Write what was done or found, in a few sentences.",
            )
        async with self._sessions.begin() as session:
            record = await self._require(session, incident_id)
            await self._log(
                session, record, AuditAction.INCIDENT_NOTE_ADDED, actor, kind="note", note=note
            )

    async def check_now(self, incident_id: int, *, actor: Actor) -> str:
        """One verification of the facility's stored credentials; its outcome.

        One token request, through the facility's limiter (the gateway's ``token_permit``,
        as every booking-system request): ``connected`` (the token becomes the facility's;
        a facility in error is connected again and its incident resolves), ``refused`` (the
        booking system's verdict: the facility is in error, the attempt counts) or
        ``no_verdict`` (unreachable, budget spent: nothing changes).
        """
        async with self._sessions() as session:
            record = await self._require(session, incident_id)
        if record.hotel_id is None or record.kind not in FACILITY_KINDS:
            raise Conflict(
                "This incident has no facility to check.",
                code="incident_not_checkable",
                hint="Check now applies to a booking-system incident.",
            )
        hotel_id = record.hotel_id
        facilities = self._gateway.facilities
        issued: list[Token] = []
        verify = kross_verifier(
            self._gateway.kross, self._gateway.gateway.token_permit, keep=issued.append
        )
        details: dict[str, Any]
        try:
            await verify(await facilities.credentials(hotel_id))
        except (KrossError, PmsgateError) as error:
            if isinstance(error, KrossError) and is_refusal(error):
                await facilities.record_auth_attempt(hotel_id)
                if (await facilities.get(hotel_id)).status != "error":
                    await facilities.mark_error(
                        hotel_id, error.message, cause=CAUSE_REFUSED, actor=actor
                    )
                details = {"outcome": "refused", "code": error.code}
            else:
                details = {"outcome": "no_verdict", "code": error.code}
        else:
            if issued:
                await self._gateway.tokens.adopt(hotel_id, issued[-1], self._clock.now())
            if (await facilities.get(hotel_id)).status != "connected":
                await facilities.mark_connected(hotel_id, cause=CAUSE_CHECKED, actor=actor)
            details = {"outcome": "connected"}
        outcome = {
            "connected": Outcome.SUCCESS,
            "refused": Outcome.REFUSED,
        }.get(details["outcome"], Outcome.FAILURE)
        async with self._sessions.begin() as session:
            await self._log(
                session,
                record,
                AuditAction.INCIDENT_CHECKED,
                actor,
                kind="check",
                details=details,
                outcome=outcome,
            )
        log.info("incident_checked", incident=incident_id, hotel_id=hotel_id, **details)
        # The incident follows the facility now, not at the next tick.
        await self.reconcile()
        return str(details["outcome"])

    async def resend_link(self, incident_id: int, *, actor: Actor) -> str:
        """E-mail the customer its one-time sign-in link to the reconnect form again.

        When its console account has no password yet (or none exists), the invitation is
        sent instead (:meth:`pmsgate.web.invitations.Invitations.send`): a sign-in link
        would open an account nobody can sign in to again. Returns ``sign-in link`` or
        ``invitation``.
        """
        async with self._sessions() as session:
            record = await self._require(session, incident_id)
        if record.student_id is None or record.kind not in LINK_KINDS:
            raise Conflict(
                "This incident has no customer to write to.",
                code="incident_without_customer",
                hint="Resend applies to a booking-system incident of a linked customer.",
            )
        _unresolved(record)
        if self._settings.console_url is None:
            raise no_console_address()
        customer = await self._customers.customers.find(record.student_id)
        if customer is None:
            raise incident_not_found(incident_id)
        account = await self._users.account(customer.email)
        mine = account is not None and account.student_id == record.student_id
        if mine and account is not None and account.password_set and record.facility_id:
            if self.link_mailer is None:
                raise PmsgateError(
                    "No sign-in link mailer is configured in this process.",
                    code="link_mailer_missing",
                    status=503,
                    hint="Run the console through `pmsgate serve`.",
                )
            _, recipient = await self.link_mailer.send_reconnect_link(record.facility_id)
            via = "sign-in link"
        else:
            invited, _ = await self._users.ensure_customer_account(
                record.student_id, customer.email
            )
            await self._invitations.send(invited, "invite", actor=actor)
            recipient, via = invited.email, "invitation"
        async with self._sessions.begin() as session:
            await self._log(
                session,
                record,
                AuditAction.INCIDENT_LINK_RESENT,
                actor,
                kind="link_resent",
                details={"via": via, "to": recipient},
            )
        return via

    async def bulk(self, action: str, incident_ids: Sequence[int], *, actor: Actor) -> BulkOutcome:
        """One action on each incident in turn; one's failure never stops the others."""
        if action not in BULK_ACTIONS:
            raise _bad("action", action, tuple(BULK_ACTIONS))
        done = 0
        failed: dict[str, int] = {}
        for incident_id in incident_ids:
            try:
                if action == "acknowledge":
                    await self.acknowledge(incident_id, actor=actor)
                elif action == "resend":
                    await self.resend_link(incident_id, actor=actor)
                elif action == "check":
                    await self.check_now(incident_id, actor=actor)
                else:
                    choice = action.removeprefix("snooze_")
                    await self.snooze(incident_id, self.snooze_until(choice), actor=actor)
            except PmsgateError as error:
                failed[error.code] = failed.get(error.code, 0) + 1
                continue
            done += 1
        return BulkOutcome(action=action, done=done, failed=failed)


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


def _unresolved(record: IncidentRecord) -> None:
    if record.state == "resolved":
        raise Conflict(
            f"Incident {record.id} is resolved.",
            code="incident_resolved",
            hint="A resolved incident takes notes only; a recurrence opens a new one.",
        )


def incident_not_found(incident_id: int) -> NotFound:
    """The error for an incident id that does not exist."""
    return NotFound(
        f"There is no incident {incident_id}.",
        code="incident_not_found",
        hint="Open /console/attention for the list of incidents.",
    )


def invalid_snooze(value: str) -> InvalidInput:
    """The error for a snooze that is not one of the choices or a date within 90 days."""
    return InvalidInput(
        f"{value[:40]!r} is not a snooze: 1h, 4h, 1d, or a date (YYYY-MM-DD) within 90 days.",
        code="invalid_snooze",
        hint="Pick one of the choices, or a date after today.",
    )
