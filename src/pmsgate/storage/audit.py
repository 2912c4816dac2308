"""The audit trail's table: the only queries on ``audit_events``.

Events are appended and read; the only removal is :meth:`AuditRepository.purge_before`,
the retention purge of everything older than a cutoff. There is no update and no
deletion of a single event: nothing a caller does can change the trail. The repository
works in the caller's session and never commits; what goes into an event (the actor,
the checked details, the request id) is :class:`pmsgate.audit.trail.AuditTrail`'s.

Reads are newest first, ``(occurred_at, id)`` descending, paged by keyset
(:mod:`pmsgate.storage.keyset`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, delete, false, func, or_, select

from pmsgate.storage.keyset import Keyset, cursor_at, given
from pmsgate.storage.models import AuditEvent, Customer, CustomerIntegration, Facility
from pmsgate.storage.repository import Repository
from pmsgate.storage.views import json_fields, view_of


@dataclass(frozen=True)
class AuditEventView:
    """One stored event."""

    id: int
    occurred_at: datetime
    actor_kind: str
    actor: str
    action: str
    subject: str
    outcome: str
    customer_id: int | None
    facility_id: int | None
    request_id: str | None
    client_address: str | None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def cursor(self) -> str:
        """The keyset position of this event (a page after it starts with the next older one)."""
        return cursor_at(self.occurred_at, self.id)

    def as_json(self) -> dict[str, Any]:
        """The event as an export line carries it."""
        return json_fields(self)


@dataclass(frozen=True)
class Owner:
    """What belongs to one customer: events naming the customer or one of its facilities."""

    customer_id: int | None
    facility_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class AuditFilter:
    """Which events a read returns (every given condition must hold)."""

    since: datetime | None = None
    until: datetime | None = None  # exclusive
    owner: Owner | None = None
    facility_ids: tuple[int, ...] | None = None
    action_prefix: str | None = None
    actor: str | None = None
    actor_kind: str | None = None
    outcome: str | None = None


@dataclass(frozen=True)
class ActorSeen:
    """An actor of recent events, for the audit page's actor picker."""

    kind: str
    name: str
    last_seen: datetime


@dataclass(frozen=True)
class AuditPage:
    """One page of events, newest first, and the cursor of the next (older) page if any."""

    events: list[AuditEventView]
    next_cursor: str | None


_NEWEST_FIRST = Keyset(AuditEvent.occurred_at, AuditEvent.id)


def _view(row: AuditEvent) -> AuditEventView:
    return view_of(AuditEventView, row, details=dict(row.details or {}))


def _like_prefix(prefix: str) -> str:
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"


def _conditions(where: AuditFilter) -> list[ColumnElement[bool]]:
    conditions = _NEWEST_FIRST.between(where.since, where.until)
    if where.owner is not None:
        owned: list[ColumnElement[bool]] = []
        if where.owner.customer_id is not None:
            owned.append(AuditEvent.customer_id == where.owner.customer_id)
        if where.owner.facility_ids:
            owned.append(AuditEvent.facility_id.in_(where.owner.facility_ids))
        # An owner with nothing to own sees nothing (never everything).
        conditions.append(or_(*owned) if owned else false())
    if where.facility_ids is not None:
        conditions.append(
            AuditEvent.facility_id.in_(where.facility_ids) if where.facility_ids else false()
        )
    if where.action_prefix:
        conditions.append(AuditEvent.action.like(_like_prefix(where.action_prefix), escape="\\"))
    return conditions + given(
        (AuditEvent.actor, where.actor),
        (AuditEvent.actor_kind, where.actor_kind),
        (AuditEvent.outcome, where.outcome),
    )


class AuditRepository(Repository):
    """Appends and reads audit events in the caller's session; never commits."""

    async def append(self, **columns: Any) -> AuditEventView:
        """Store one event, given its columns but ``id`` (the trail checked them; flushed, so
        its id is known)."""
        row = AuditEvent(**{**columns, "details": dict(columns.get("details") or {})})
        await self._add(row)
        return _view(row)

    async def query(
        self, where: AuditFilter, *, limit: int = 50, after: str | None = None
    ) -> AuditPage:
        """A page of the events matching ``where``, newest first, after the cursor ``after``
        (a malformed one reads from the newest event: it can never widen the filter)."""
        statement = select(AuditEvent).where(*_conditions(where))
        events, next_cursor = await _NEWEST_FIRST.page(
            self._session, statement, lambda row: _view(row[0]), limit=limit, after=after
        )
        return AuditPage(events=events, next_cursor=next_cursor)

    async def actors_since(self, since: datetime, *, limit: int = 200) -> list[ActorSeen]:
        """The actors of events since ``since``, most recently active first (at most ``limit``).

        Read through the ``occurred_at`` index, so its cost follows the recent events only.
        """
        last_seen = func.max(AuditEvent.occurred_at)
        rows = await self._session.execute(
            select(AuditEvent.actor_kind, AuditEvent.actor, last_seen)
            .where(AuditEvent.occurred_at >= since)
            .group_by(AuditEvent.actor_kind, AuditEvent.actor)
            .order_by(last_seen.desc())
            .limit(max(1, limit))
        )
        return [ActorSeen(kind=kind, name=name, last_seen=seen) for kind, name, seen in rows]

    async def purge_before(self, cutoff: datetime) -> int:
        """Remove every event that occurred before ``cutoff`` (retention); how many went."""
        result = await self._session.execute(
            delete(AuditEvent).where(AuditEvent.occurred_at < cutoff)
        )
        return int(getattr(result, "rowcount", 0) or 0)

    async def customer_id(self, student_id: str) -> int | None:
        """The row id of the customer ``student_id`` (what events store), if it exists."""
        found = await self._session.scalar(
            select(Customer.id).where(Customer.student_id == student_id)
        )
        return None if found is None else int(found)

    async def facility_id(self, hotel_id: str) -> int | None:
        """The row id of the facility ``hotel_id`` (what events store), if it exists."""
        found = await self._session.scalar(select(Facility.id).where(Facility.hotel_id == hotel_id))
        return None if found is None else int(found)

    async def owner(self, student_id: str) -> Owner:
        """The customer ``student_id`` and the facilities its integrations link to."""
        facility_ids: Sequence[int | None] = (
            (
                await self._session.execute(
                    select(CustomerIntegration.facility_id).where(
                        CustomerIntegration.student_id == student_id
                    )
                )
            )
            .scalars()
            .all()
        )
        return Owner(
            customer_id=await self.customer_id(student_id),
            facility_ids=tuple(sorted({f for f in facility_ids if f is not None})),
        )
