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

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Protocol

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
from pmsgate.gateway.facility_status import CAUSE_REFUSED
from pmsgate.gateway.verification import is_refusal, kross_verifier
from pmsgate.integrations.kross.client import Token
from pmsgate.integrations.kross.errors import KrossError
from pmsgate.storage.incidents import (
    IncidentRecord,
    IncidentRepository,
)
from pmsgate.web.incident_reconcile import IncidentReconciler, ReconcileSummary
from pmsgate.web.incident_views import (
    BULK_ACTIONS,
    FACILITY_KINDS,
    LINK_KINDS,
    QUERY_RULES,
    SNOOZES,
    IncidentQuery,
    IncidentView,
)
from pmsgate.web.invitations import Invitations, no_console_address
from pmsgate.web.users import UserService, UserView

log = structlog.get_logger(__name__)

MAX_NOTE = 2000
MAX_SNOOZE = timedelta(days=90)
MAX_LISTED = 1000
CAUSE_CHECKED = "checked now from the console"


class SignInLinkMailer(Protocol):
    """Sends a customer its one-time sign-in link to the reconnect form (jobs/notify.py)."""

    async def send_reconnect_link(self, facility_id: int) -> tuple[str, str]:
        """E-mail the link for the facility's customer; (transport, recipient)."""
        ...


# --- the service ----------------------------------------------------------------------------


@dataclass(frozen=True)
class BulkOutcome:
    """What a bulk action did: how many succeeded, and the failures by code."""

    action: str
    done: int
    failed: dict[str, int]


@dataclass(repr=False, eq=False)
class IncidentService:
    """Opens, resolves and lists incidents, and carries out the team's actions on them."""

    sessions: async_sessionmaker[AsyncSession]
    _: KW_ONLY
    clock: Clock
    settings: Settings
    gateway: GatewayServices
    customers: CustomerServices
    users: UserService
    invitations: Invitations
    audit: AuditTrail
    link_mailer: SignInLinkMailer | None = None
    _reconciler: IncidentReconciler = field(init=False)

    def __post_init__(self) -> None:
        self._reconciler = IncidentReconciler(
            self.sessions, clock=self.clock, gateway=self.gateway, audit=self.audit
        )

    async def reconcile(self) -> ReconcileSummary:
        """Open, count, resolve and wake: the incidents made to match what is observed now."""
        return await self._reconciler.reconcile()

    # --- reads ------------------------------------------------------------------------------

    async def team(self) -> list[UserView]:
        """The team members an incident can be assigned to (the admin console accounts)."""
        return [user for user in await self.users.list() if user.role == "admin"]

    async def _views(
        self, records: Sequence[IncidentRecord], *, timeline: bool
    ) -> list[IncidentView]:
        ids = [record.id for record in records]
        async with self.sessions() as session:
            repository = IncidentRepository(session)
            notices = await repository.notices(ids)
            events = await repository.events(ids) if timeline else []
        now = self.clock.now()
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
        async with self.sessions() as session:
            records = await IncidentRepository(session).listed(states, limit=MAX_LISTED)
        views = await self._views(records, timeline=False)
        return query.sorted([view for view in views if query.keeps(view, me)])

    async def get(self, incident_id: int) -> IncidentView:
        """One incident with its notices and timeline (``incident_not_found``)."""
        async with self.sessions() as session:
            record = await IncidentRepository(session).get(incident_id)
        if record is None:
            raise incident_not_found(incident_id)
        [view] = await self._views([record], timeline=True)
        return view

    async def of_customer(self, student_id: str, hotel_ids: Sequence[str]) -> list[IncidentView]:
        """A customer's incidents, the unresolved ones and the latest resolved (timelines too)."""
        async with self.sessions() as session:
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

    async def _applying(
        self, incident_id: int, kinds: tuple[str, ...], needs: str, refusal: Conflict
    ) -> IncidentRecord:
        """The incident, when an action applies to it: one of ``kinds``, with its ``needs``
        (the facility, the customer) known; else ``refusal``."""
        async with self.sessions() as session:
            record = await self._require(session, incident_id)
        if getattr(record, needs) is None or record.kind not in kinds:
            raise refusal
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
        now = self.clock.now()
        await IncidentRepository(session).add_event(
            record.id, at=now, kind=kind, actor=actor.name, note=note, details=details or {}
        )
        await self.audit.record_in(
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

    async def _log_alone(
        self, record: IncidentRecord, action: AuditAction, actor: Actor, **logged: Any
    ) -> None:
        """:meth:`_log` in a transaction of its own (after an action done outside one)."""
        async with self.sessions.begin() as session:
            await self._log(session, record, action, actor, **logged)

    async def acknowledge(self, incident_id: int, *, actor: Actor) -> bool:
        """Acknowledge it (a snooze ends); False when it already was (nothing recorded)."""
        async with self.sessions.begin() as session:
            record = await self._require(session, incident_id)
            _unresolved(record)
            if not await IncidentRepository(session).acknowledge(
                incident_id, actor.name, self.clock.now()
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
            member = await self.users.account(address)
            if member is None or member.role != "admin":
                raise InvalidInput(
                    f"{address!r} is not a team member.",
                    code="unknown_assignee",
                    hint="Assign to an admin console account (`pmsgate users list`).",
                )
        async with self.sessions.begin() as session:
            record = await self._require(session, incident_id)
            await IncidentRepository(session).assign(
                incident_id, member.id if member else None, self.clock.now()
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
        now = self.clock.now()
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
        async with self.sessions.begin() as session:
            record = await self._require(session, incident_id)
            _unresolved(record)
            if not await IncidentRepository(session).snooze(incident_id, until, self.clock.now()):
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
        async with self.sessions.begin() as session:
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
        record = await self._applying(
            incident_id,
            FACILITY_KINDS,
            "hotel_id",
            Conflict(
                "This incident has no facility to check.",
                code="incident_not_checkable",
                hint="Check now applies to a booking-system incident.",
            ),
        )
        hotel_id = record.hotel_id or ""
        facilities = self.gateway.facilities
        issued: list[Token] = []
        verify = kross_verifier(
            self.gateway.kross, self.gateway.gateway.token_permit, keep=issued.append
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
                await self.gateway.tokens.adopt(hotel_id, issued[-1], self.clock.now())
            if (await facilities.get(hotel_id)).status != "connected":
                await facilities.mark_connected(hotel_id, cause=CAUSE_CHECKED, actor=actor)
            details = {"outcome": "connected"}
        outcome = {
            "connected": Outcome.SUCCESS,
            "refused": Outcome.REFUSED,
        }.get(details["outcome"], Outcome.FAILURE)
        await self._log_alone(
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
        record = await self._applying(
            incident_id,
            LINK_KINDS,
            "student_id",
            Conflict(
                "This incident has no customer to write to.",
                code="incident_without_customer",
                hint="Resend applies to a booking-system incident of a linked customer.",
            ),
        )
        _unresolved(record)
        student_id = record.student_id or ""
        if self.settings.console_url is None:
            raise no_console_address()
        customer = await self.customers.customers.find(student_id)
        if customer is None:
            raise incident_not_found(incident_id)
        account = await self.users.account(customer.email)
        mine = account is not None and account.student_id == student_id
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
            invited, _ = await self.users.ensure_customer_account(student_id, customer.email)
            await self.invitations.send(invited, "invite", actor=actor)
            recipient, via = invited.email, "invitation"
        await self._log_alone(
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
            raise QUERY_RULES.bad("action", action, tuple(BULK_ACTIONS))
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
