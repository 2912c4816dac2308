"""Incidents and their timelines: the only queries on ``incidents`` and ``incident_events``.

Every write that decides something is conditional, so that each replica may run the
reconciliation at the same moment and the outcome is the same as one replica's:

- opening is an insert on the unique (kind, open_key) that does nothing when an unresolved
  incident of that subject exists (:meth:`IncidentRepository.open` returns the new id only
  to the replica whose insert landed, and only that one writes the ``opened`` line);
- counting a failed attempt moves ``last_attempt_at`` forward only when the attempt is
  newer (:meth:`~IncidentRepository.observe`): the same attempt seen twice counts once;
- resolving, waking a snooze, acknowledging are updates guarded by the current state.

Like every repository here: the caller's session, never a commit.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import ColumnElement, CursorResult, and_, select, update

from pmsgate.storage.integrity import dialect_insert
from pmsgate.storage.kross_links import facilities_with_customer, status_since
from pmsgate.storage.models import (
    Customer,
    CustomerIntegration,
    Facility,
    Incident,
    IncidentEvent,
    IncidentNotice,
    User,
)
from pmsgate.storage.repository import Repository
from pmsgate.storage.views import view_of

UNRESOLVED = ("open", "acknowledged", "snoozed")


@dataclass(frozen=True)
class IncidentRecord:
    """One incident with the names a list shows (customer, facility, assignee)."""

    id: int
    kind: str
    subject: str
    facility_id: int | None
    student_id: str | None
    job: str | None
    incident_at: datetime | None
    reason: str | None
    state: str
    first_seen: datetime
    last_seen: datetime
    failures: int
    last_attempt_at: datetime | None
    acknowledged_by: str | None
    acknowledged_at: datetime | None
    snoozed_until: datetime | None
    assignee_id: int | None
    assignee_email: str | None
    resolved_at: datetime | None
    customer_name: str | None
    hotel_id: str | None
    facility_name: str | None


@dataclass(frozen=True)
class IncidentEventRecord:
    """One line of an incident's timeline."""

    id: int
    incident_id: int
    at: datetime
    kind: str
    actor: str
    note: str | None
    details: dict[str, Any]


@dataclass(frozen=True)
class FacilityInError:
    """A facility in ``error``, with what names its incident and its latest failed attempt."""

    facility_id: int
    hotel_id: str
    status_changed_at: datetime
    last_auth_attempt_at: datetime | None
    last_error: str | None
    student_id: str | None


@dataclass(frozen=True)
class IncidentNoticeLine:
    """A notice of an incident as its timeline shows it (never the link it carried)."""

    incident_id: int
    kind: str
    channel: str
    recipient: str
    status: str
    attempts: int
    last_error: str | None
    created_at: datetime
    sent_at: datetime | None


_COLUMNS: tuple[Any, ...] = (
    Incident,
    User.email,
    Customer.name,
    Facility.hotel_id,
    Facility.name,
)


def _record(row: Any) -> IncidentRecord:
    incident: Incident = row[0]
    return view_of(
        IncidentRecord,
        incident,
        assignee_email=row[1],
        customer_name=row[2],
        hotel_id=row[3],
        facility_name=row[4],
    )


def _event(row: IncidentEvent) -> IncidentEventRecord:
    return view_of(IncidentEventRecord, row, details=dict(row.details or {}))


class IncidentRepository(Repository):
    """Opens, counts, changes and reads incidents in the caller's session; never commits."""

    # --- what the reconciliation observes ---------------------------------------------------

    async def facilities_in_error(self) -> list[FacilityInError]:
        """Every facility in ``error`` with its kross customer (when linked)."""
        rows = await facilities_with_customer(
            self._session,
            Facility.hotel_id,
            status_since(),
            Facility.last_auth_attempt_at,
            Facility.last_error,
            CustomerIntegration.student_id,
            where=[Facility.status == "error"],
        )
        return [FacilityInError(*row) for row in rows]

    # --- reconciliation writes --------------------------------------------------------------

    async def open(
        self,
        *,
        kind: str,
        subject: str,
        facility_id: int | None,
        student_id: str | None,
        job: str | None,
        incident_at: datetime | None,
        reason: str | None,
        attempt_at: datetime | None,
        now: datetime,
    ) -> int | None:
        """Open an incident unless one of this kind and subject is unresolved; its new id."""
        statement = (
            dialect_insert(self._session, Incident)
            .values(
                kind=kind,
                subject=subject,
                open_key=subject,
                facility_id=facility_id,
                student_id=student_id,
                job=job,
                incident_at=incident_at,
                reason=reason,
                state="open",
                first_seen=incident_at or now,
                last_seen=attempt_at or now,
                failures=1,
                last_attempt_at=attempt_at,
                updated_at=now,
            )
            .on_conflict_do_nothing(index_elements=["kind", "open_key"])
            .returning(Incident.id)
        )
        found = (await self._session.execute(statement)).scalar_one_or_none()
        return int(found) if found is not None else None

    async def observe(
        self, incident_id: int, attempt_at: datetime, reason: str | None, now: datetime
    ) -> bool:
        """Count one more failed attempt when ``attempt_at`` is newer than the last counted."""
        values: dict[str, Any] = {
            "failures": Incident.failures + 1,
            "last_attempt_at": attempt_at,
            "last_seen": attempt_at,
            "updated_at": now,
        }
        if reason:
            values["reason"] = reason
        return await self._change(
            incident_id,
            Incident.state != "resolved",
            (Incident.last_attempt_at.is_(None)) | (Incident.last_attempt_at < attempt_at),
            **values,
        )

    async def resolve(self, incident_id: int, now: datetime) -> bool:
        """Resolve an unresolved incident (its subject may open a new one); False if it was."""
        return await self._change(
            incident_id,
            Incident.state != "resolved",
            state="resolved",
            open_key=None,
            resolved_at=now,
            snoozed_until=None,
            updated_at=now,
        )

    async def snoozes_ended(self, now: datetime) -> list[int]:
        """The snoozed incidents whose time has come, woken here (back to ``open``)."""
        due = (
            await self._session.scalars(
                select(Incident.id).where(
                    Incident.state == "snoozed", Incident.snoozed_until <= now
                )
            )
        ).all()
        woke: list[int] = []
        for incident_id in due:
            if await self._change(
                incident_id,
                Incident.state == "snoozed",
                Incident.snoozed_until <= now,
                state="open",
                snoozed_until=None,
                updated_at=now,
            ):
                woke.append(int(incident_id))
        return woke

    # --- the team's changes -----------------------------------------------------------------

    async def acknowledge(self, incident_id: int, by: str, now: datetime) -> bool:
        """Acknowledge an open or snoozed incident (a snooze ends); False otherwise."""
        return await self._change(
            incident_id,
            Incident.state.in_(("open", "snoozed")),
            state="acknowledged",
            acknowledged_by=by,
            acknowledged_at=now,
            snoozed_until=None,
            updated_at=now,
        )

    async def snooze(self, incident_id: int, until: datetime, now: datetime) -> bool:
        """Snooze an unresolved incident until ``until``; False when it is resolved."""
        return await self._change(
            incident_id,
            Incident.state != "resolved",
            state="snoozed",
            snoozed_until=until,
            updated_at=now,
        )

    async def assign(self, incident_id: int, user_id: int | None, now: datetime) -> bool:
        """Give the incident to a team member (None: nobody); False when it does not exist."""
        return await self._change(incident_id, assignee_id=user_id, updated_at=now)

    async def _change(
        self, incident_id: int, *conditions: ColumnElement[bool], **values: Any
    ) -> bool:
        """Set ``values`` on the incident if ``conditions`` hold; whether it changed."""
        result = await self._session.execute(
            update(Incident).where(Incident.id == incident_id, *conditions).values(**values)
        )
        return cast(CursorResult[Any], result).rowcount == 1

    # --- timelines --------------------------------------------------------------------------

    async def add_event(
        self,
        incident_id: int,
        *,
        at: datetime,
        kind: str,
        actor: str,
        note: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> IncidentEventRecord:
        """Add one line to the incident's timeline (flushed, so its id is known)."""
        row = IncidentEvent(
            incident_id=incident_id,
            at=at,
            kind=kind,
            actor=actor[:200],
            note=note,
            details=details or {},
        )
        await self._add(row)
        return _event(row)

    async def events(self, incident_ids: Collection[int]) -> list[IncidentEventRecord]:
        """The timeline lines of these incidents, oldest first."""
        if not incident_ids:
            return []
        rows = await self._session.scalars(
            select(IncidentEvent)
            .where(IncidentEvent.incident_id.in_(list(incident_ids)))
            .order_by(IncidentEvent.at, IncidentEvent.id)
        )
        return [_event(row) for row in rows]

    async def notices(self, incident_ids: Collection[int]) -> list[IncidentNoticeLine]:
        """The notices of these (booking-system) incidents: the same facility and incident."""
        if not incident_ids:
            return []
        rows = (
            await self._session.execute(
                select(
                    Incident.id,
                    IncidentNotice.kind,
                    IncidentNotice.channel,
                    IncidentNotice.recipient,
                    IncidentNotice.status,
                    IncidentNotice.attempts,
                    IncidentNotice.last_error,
                    IncidentNotice.created_at,
                    IncidentNotice.sent_at,
                )
                .select_from(Incident)
                .join(
                    IncidentNotice,
                    and_(
                        IncidentNotice.facility_id == Incident.facility_id,
                        IncidentNotice.incident_at == Incident.incident_at,
                    ),
                )
                .where(Incident.id.in_(list(incident_ids)), Incident.kind == "pms_error")
                .order_by(IncidentNotice.id)
            )
        ).all()
        return [IncidentNoticeLine(*row) for row in rows]

    # --- reads ------------------------------------------------------------------------------

    def _select(self) -> Any:
        return (
            select(*_COLUMNS)
            .select_from(Incident)
            .outerjoin(User, User.id == Incident.assignee_id)
            .outerjoin(Customer, Customer.student_id == Incident.student_id)
            .outerjoin(Facility, Facility.id == Incident.facility_id)
        )

    async def get(self, incident_id: int) -> IncidentRecord | None:
        """One incident, resolved or not."""
        row = (
            await self._session.execute(self._select().where(Incident.id == incident_id))
        ).first()
        return _record(row) if row is not None else None

    async def many(self, incident_ids: Sequence[int]) -> list[IncidentRecord]:
        """These incidents (those that exist), by id."""
        if not incident_ids:
            return []
        rows = await self._session.execute(
            self._select().where(Incident.id.in_(list(incident_ids))).order_by(Incident.id)
        )
        return [_record(row) for row in rows.all()]

    async def unresolved(self) -> list[IncidentRecord]:
        """Every incident not resolved, oldest first."""
        rows = await self._session.execute(
            self._select().where(Incident.state.in_(UNRESOLVED)).order_by(Incident.id)
        )
        return [_record(row) for row in rows.all()]

    async def listed(self, states: Collection[str], *, limit: int) -> list[IncidentRecord]:
        """The incidents in these states, the most recently seen first, at most ``limit``."""
        rows = await self._session.execute(
            self._select()
            .where(Incident.state.in_(list(states)))
            .order_by(Incident.last_seen.desc(), Incident.id.desc())
            .limit(limit)
        )
        return [_record(row) for row in rows.all()]

    async def of_customer(
        self, student_id: str, hotel_ids: Collection[str], *, limit: int
    ) -> list[IncidentRecord]:
        """A customer's incidents (its own and its facilities'), the latest first."""
        condition = Incident.student_id == student_id
        if hotel_ids:
            condition = condition | Facility.hotel_id.in_(list(hotel_ids))
        rows = await self._session.execute(
            self._select().where(condition).order_by(Incident.id.desc()).limit(limit)
        )
        return [_record(row) for row in rows.all()]

    async def facility_ids(self, hotel_ids: Collection[str]) -> dict[str, int]:
        """The row id of each of these facilities (those that exist)."""
        if not hotel_ids:
            return {}
        rows = await self._session.execute(
            select(Facility.hotel_id, Facility.id).where(Facility.hotel_id.in_(list(hotel_ids)))
        )
        return {row[0]: int(row[1]) for row in rows.all()}
