"""Signed event webhooks: subscriptions, the event outbox and deliveries (docs/webhooks.md).

The outbox is written by :meth:`WebhookRepository.add_event` in the caller's session, so an
event exists exactly when the change it reports was committed. Fanning an event out
inserts one delivery per subscription wanting it (the unique (event, subscription) keeps
one row whichever replica does it); sending a delivery is a *claim* — a conditional
update that sets a lease (``claimed_until``) only on a due, unclaimed row, after a
``SELECT … FOR UPDATE SKIP LOCKED`` on PostgreSQL — so one replica sends it; its outcome
is settled only by the holder of that lease. Secrets are vault ciphertext only.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, delete, or_, select, true, update
from sqlalchemy.engine import CursorResult

from pmsgate.storage.integrity import dialect_insert
from pmsgate.storage.kross_links import facilities_with_customer
from pmsgate.storage.models import (
    Ciphertext,
    CustomerIntegration,
    WebhookDelivery,
    WebhookEvent,
    WebhookSubscription,
)
from pmsgate.storage.repository import Repository
from pmsgate.storage.views import view_of

EVENT_ID_PREFIX = "msg_"
# Every subscription, the team's and every customer's (a listing filter).
EVERY_OWNER = "*"


def new_event_id() -> str:
    """A new event id: ``msg_`` and 32 random hex digits (128 bits)."""
    return EVENT_ID_PREFIX + secrets.token_hex(16)


@dataclass(frozen=True)
class SubscriptionView:
    """A subscription as shown (never its secret)."""

    id: int
    student_id: str | None
    url: str
    description: str
    events: list[str]
    enabled: bool
    disabled_reason: str | None
    previous_secret_expires_at: datetime | None
    created_by: str
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class SubscriptionSecrets:
    """A subscription's sealed secrets: the current one, and the previous one while it signs."""

    secret_enc: Ciphertext
    previous_secret_enc: Ciphertext | None
    previous_secret_expires_at: datetime | None


@dataclass(frozen=True)
class EventView:
    """One event of the outbox."""

    id: str
    type: str
    student_id: str | None
    facility_id: int | None
    payload: dict[str, Any]
    occurred_at: datetime


@dataclass(frozen=True)
class DeliveryView:
    """One delivery with its event's type and its subscription's owner and URL."""

    id: int
    event_id: str
    event_type: str
    subscription_id: int
    student_id: str | None
    url: str
    status: str
    attempts: int
    next_attempt_at: datetime | None
    last_attempt_at: datetime | None
    response_status: int | None
    last_error: str | None
    delivered_at: datetime | None
    created_at: datetime


def _subscription_view(row: WebhookSubscription) -> SubscriptionView:
    return view_of(SubscriptionView, row, events=list(row.events or []))


def _claimable(now: datetime) -> Any:
    """A pending delivery whose time has come and that no replica holds."""
    return and_(
        WebhookDelivery.status == "pending",
        WebhookDelivery.next_attempt_at <= now,
        or_(WebhookDelivery.claimed_until.is_(None), WebhookDelivery.claimed_until <= now),
    )


def _owned_by(student_id: str | None) -> Any:
    """Subscriptions of one customer, of the team (None), or all (:data:`EVERY_OWNER`)."""
    if student_id == EVERY_OWNER:
        return true()
    if student_id is None:
        return WebhookSubscription.student_id.is_(None)
    return WebhookSubscription.student_id == student_id


def secret_context(subscription_id: int, field: str) -> str:
    """The vault's associated data of a subscription's secret (``secret`` or ``previous``)."""
    return f"webhook:{subscription_id}:{field}"


def _count(result: object) -> int:
    return max(0, int(getattr(result, "rowcount", 0) or 0))


class WebhookRepository(Repository):
    """Subscriptions, events and deliveries in the caller's session; never commits."""

    # --- subscriptions ---------------------------------------------------------------------

    async def add_subscription(
        self,
        *,
        student_id: str | None,
        url: str,
        description: str,
        events: Sequence[str],
        created_by: str,
        now: datetime,
    ) -> int:
        """A new enabled subscription without a secret yet (:meth:`set_secrets` next); its id."""
        row = await self._add(
            WebhookSubscription(
                student_id=student_id,
                url=url,
                description=description,
                events=list(events),
                secret_enc="",
                enabled=True,
                created_by=created_by,
                created_at=now,
                updated_at=now,
            )
        )
        return row.id

    async def set_secrets(
        self,
        subscription_id: int,
        secret_enc: Ciphertext,
        *,
        previous: tuple[Ciphertext, datetime] | None,
        now: datetime,
    ) -> bool:
        """Store the subscription's sealed secret and the previous one with its end."""
        result: CursorResult[Any] = await self._session.execute(  # type: ignore[assignment]
            update(WebhookSubscription)
            .where(WebhookSubscription.id == subscription_id)
            .values(
                secret_enc=secret_enc,
                previous_secret_enc=previous[0] if previous else None,
                previous_secret_expires_at=previous[1] if previous else None,
                updated_at=now,
            )
        )
        return result.rowcount == 1

    async def subscription(self, subscription_id: int) -> SubscriptionView | None:
        """One subscription, or None."""
        row = await self._session.get(WebhookSubscription, subscription_id)
        return None if row is None else _subscription_view(row)

    async def subscription_rows(self) -> list[WebhookSubscription]:
        """Every subscription row, to change in the caller's transaction (a key rotation)."""
        result = await self._session.execute(
            select(WebhookSubscription).order_by(WebhookSubscription.id)
        )
        return list(result.scalars())

    async def subscriptions(self, student_id: str | None) -> list[SubscriptionView]:
        """A customer's subscriptions, the team's (None), or all (:data:`EVERY_OWNER`)."""
        rows = await self._session.scalars(
            select(WebhookSubscription)
            .where(_owned_by(student_id))
            .order_by(WebhookSubscription.id)
        )
        return [_subscription_view(row) for row in rows]

    async def secrets_of(self, subscription_id: int) -> SubscriptionSecrets | None:
        """The subscription's sealed secrets, or None."""
        row = (
            await self._session.execute(
                select(
                    WebhookSubscription.secret_enc,
                    WebhookSubscription.previous_secret_enc,
                    WebhookSubscription.previous_secret_expires_at,
                ).where(WebhookSubscription.id == subscription_id)
            )
        ).first()
        if row is None:
            return None
        return SubscriptionSecrets(Ciphertext(row[0]), _sealed(row[1]), row[2])

    async def delete_subscription(self, subscription_id: int) -> bool:
        """Remove a subscription and its deliveries; False when it was not there."""
        result: CursorResult[Any] = await self._session.execute(  # type: ignore[assignment]
            delete(WebhookSubscription).where(WebhookSubscription.id == subscription_id)
        )
        await self._session.execute(
            delete(WebhookDelivery).where(WebhookDelivery.subscription_id == subscription_id)
        )
        return result.rowcount == 1

    async def disable_subscription(self, subscription_id: int, reason: str, now: datetime) -> bool:
        """Disable an enabled subscription and stop its pending deliveries; False if it was not
        enabled (another replica disabled it first)."""
        result: CursorResult[Any] = await self._session.execute(  # type: ignore[assignment]
            update(WebhookSubscription)
            .where(WebhookSubscription.id == subscription_id, WebhookSubscription.enabled)
            .values(enabled=False, disabled_reason=reason, updated_at=now)
        )
        if result.rowcount != 1:
            return False
        await self._session.execute(
            update(WebhookDelivery)
            .where(
                WebhookDelivery.subscription_id == subscription_id,
                WebhookDelivery.status == "pending",
            )
            .values(status="disabled", next_attempt_at=None, claimed_until=None, updated_at=now)
        )
        return True

    async def enable_subscription(self, subscription_id: int, now: datetime) -> bool:
        """Enable a subscription again; False when it was not there."""
        result: CursorResult[Any] = await self._session.execute(  # type: ignore[assignment]
            update(WebhookSubscription)
            .where(WebhookSubscription.id == subscription_id)
            .values(enabled=True, disabled_reason=None, updated_at=now)
        )
        return result.rowcount == 1

    # --- the outbox ------------------------------------------------------------------------

    async def purge_before(self, cutoff: datetime) -> tuple[int, int]:
        """Remove the settled deliveries created and the fanned-out events that occurred
        before ``cutoff`` (an event only once none of its deliveries is left, so a delivery
        still pending keeps its event); how many events and deliveries went."""
        deliveries = await self._session.execute(
            delete(WebhookDelivery).where(
                WebhookDelivery.created_at < cutoff, WebhookDelivery.status != "pending"
            )
        )
        left = select(WebhookDelivery.id).where(WebhookDelivery.event_id == WebhookEvent.id)
        events = await self._session.execute(
            delete(WebhookEvent).where(
                WebhookEvent.occurred_at < cutoff,
                WebhookEvent.fanned_out_at.is_not(None),
                ~left.exists(),
            )
        )
        return _count(events), _count(deliveries)

    async def add_event(
        self,
        event_type: str,
        data: Mapping[str, Any],
        *,
        occurred_at: datetime,
        student_id: str | None = None,
        facility_id: int | None = None,
    ) -> str:
        """Write one event to the outbox in the caller's transaction; its ``msg_…`` id.

        A facility's event without a customer names the customer its kross integration
        links it to (none: only the team's subscriptions receive it).
        """
        if student_id is None and facility_id is not None:
            linked = await facilities_with_customer(
                self._session,
                CustomerIntegration.student_id,
                where=[CustomerIntegration.facility_id == facility_id],
            )
            student_id = linked[0][1] if linked else None
        event_id = new_event_id()
        self._session.add(
            WebhookEvent(
                id=event_id,
                type=event_type,
                student_id=student_id,
                facility_id=facility_id,
                payload=dict(data),
                occurred_at=occurred_at,
            )
        )
        await self._session.flush()
        return event_id

    async def events_to_fan_out(self, limit: int) -> list[EventView]:
        """Events whose deliveries are not planned yet, oldest first (locked on PostgreSQL,
        skipping those another replica is planning)."""
        rows = await self._session.scalars(
            _skip_locked(
                select(WebhookEvent)
                .where(WebhookEvent.fanned_out_at.is_(None))
                .order_by(WebhookEvent.occurred_at, WebhookEvent.id)
                .limit(limit)
            )
        )
        return [view_of(EventView, row, payload=dict(row.payload or {})) for row in rows]

    async def event(self, event_id: str) -> EventView | None:
        """One event, or None."""
        row = await self._session.get(WebhookEvent, event_id)
        return None if row is None else view_of(EventView, row, payload=dict(row.payload or {}))

    async def subscribers(self, event_type: str, student_id: str | None) -> list[int]:
        """The enabled subscriptions wanting an event: the team's, and its customer's."""
        owners: ColumnElement[bool] = WebhookSubscription.student_id.is_(None)
        if student_id is not None:
            owners = or_(owners, WebhookSubscription.student_id == student_id)
        rows = await self._session.execute(
            select(WebhookSubscription.id, WebhookSubscription.events).where(
                WebhookSubscription.enabled, owners
            )
        )
        return [row[0] for row in rows if event_type in (row[1] or [])]

    async def plan_deliveries(
        self, event_id: str, subscription_ids: Sequence[int], now: datetime
    ) -> int:
        """One pending delivery of the event per subscription (kept when one exists), and the
        event marked fanned out; how many deliveries were new."""
        added = 0
        if subscription_ids:
            result: CursorResult[Any] = await self._session.execute(  # type: ignore[assignment]
                dialect_insert(self._session, WebhookDelivery.__table__)
                .values(
                    [
                        {
                            "event_id": event_id,
                            "subscription_id": subscription_id,
                            "status": "pending",
                            "attempts": 0,
                            "next_attempt_at": now,
                            "created_at": now,
                            "updated_at": now,
                        }
                        for subscription_id in subscription_ids
                    ]
                )
                .on_conflict_do_nothing(index_elements=["event_id", "subscription_id"])
            )
            added = max(0, result.rowcount)
        await self._session.execute(
            update(WebhookEvent)
            .where(WebhookEvent.id == event_id, WebhookEvent.fanned_out_at.is_(None))
            .values(fanned_out_at=now)
        )
        return added

    # --- deliveries ------------------------------------------------------------------------

    async def due_deliveries(self, now: datetime, limit: int) -> list[int]:
        """Ids of pending deliveries due now and held by no replica (on PostgreSQL, rows
        another transaction is claiming are skipped)."""
        rows = await self._session.scalars(
            _skip_locked(
                select(WebhookDelivery.id)
                .where(_claimable(now))
                .order_by(WebhookDelivery.next_attempt_at, WebhookDelivery.id)
                .limit(limit)
            )
        )
        return list(rows)

    async def claim(self, delivery_id: int, now: datetime, until: datetime) -> bool:
        """Hold a due delivery until ``until``; False when it is not claimable any more."""
        result: CursorResult[Any] = await self._session.execute(  # type: ignore[assignment]
            update(WebhookDelivery)
            .where(WebhookDelivery.id == delivery_id, _claimable(now))
            .values(claimed_until=until, updated_at=now)
        )
        return result.rowcount == 1

    async def settle(self, delivery_id: int, lease: datetime, values: Mapping[str, Any]) -> bool:
        """Record an attempt's outcome, only while still holding the lease ``lease``."""
        result: CursorResult[Any] = await self._session.execute(  # type: ignore[assignment]
            update(WebhookDelivery)
            .where(
                WebhookDelivery.id == delivery_id,
                WebhookDelivery.status == "pending",
                WebhookDelivery.claimed_until == lease,
            )
            .values(claimed_until=None, **values)
        )
        return result.rowcount == 1

    async def replay(self, delivery_id: int, now: datetime) -> bool:
        """Send a delivery again from its first attempt, now; False when it is not there."""
        result: CursorResult[Any] = await self._session.execute(  # type: ignore[assignment]
            update(WebhookDelivery)
            .where(WebhookDelivery.id == delivery_id)
            .values(
                status="pending",
                attempts=0,
                next_attempt_at=now,
                claimed_until=None,
                response_status=None,
                last_error=None,
                delivered_at=None,
                updated_at=now,
            )
        )
        return result.rowcount == 1

    async def delivery(self, delivery_id: int) -> DeliveryView | None:
        """One delivery, or None."""
        found = await self.deliveries(EVERY_OWNER, delivery_id=delivery_id, limit=1)
        return found[0] if found else None

    async def deliveries(
        self,
        student_id: str | None,
        *,
        subscription_id: int | None = None,
        delivery_id: int | None = None,
        status: str | None = None,
        limit: int = 100,
    ) -> list[DeliveryView]:
        """Deliveries, newest first, of one owner's subscriptions (see :meth:`subscriptions`)."""
        query = (
            select(WebhookDelivery, WebhookEvent.type, WebhookSubscription)
            .join(WebhookEvent, WebhookEvent.id == WebhookDelivery.event_id)
            .join(WebhookSubscription, WebhookSubscription.id == WebhookDelivery.subscription_id)
            .where(_owned_by(student_id))
            .order_by(WebhookDelivery.created_at.desc(), WebhookDelivery.id.desc())
            .limit(limit)
        )
        if subscription_id is not None:
            query = query.where(WebhookDelivery.subscription_id == subscription_id)
        if delivery_id is not None:
            query = query.where(WebhookDelivery.id == delivery_id)
        if status is not None:
            query = query.where(WebhookDelivery.status == status)
        return [
            view_of(
                DeliveryView,
                row[0],
                event_type=row[1],
                student_id=row[2].student_id,
                url=row[2].url,
            )
            for row in (await self._session.execute(query)).all()
        ]


def _sealed(value: str | None) -> Ciphertext | None:
    return None if value is None else Ciphertext(value)


def _skip_locked(query: Select[Any]) -> Select[Any]:
    """``FOR UPDATE SKIP LOCKED`` on PostgreSQL (SQLite, one writer at a time, renders none)."""
    return query.with_for_update(skip_locked=True)
