"""Incident notices and one-time sign-in links: the only queries on their tables.

``incident_notices``: one row per (facility, incident, kind, channel). Planning a notice
is an insert that does nothing when the row exists, so every replica can plan the same
notices and only one row is kept; sending one is a *claim* (a conditional update that
only one replica wins: the row is pending and nobody else's lease runs) followed by the
outcome. ``login_links``: the SHA-256 of a one-time token, its account, target, expiry
and use; using one is a conditional update too (unused and unexpired), so a link signs
in once even when two requests race.

Like every repository here: the caller's session, never a commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import CursorResult, and_, delete, func, or_, select, update

from pmsgate.storage.integrity import insert_unless_taken
from pmsgate.storage.kross_links import facilities_with_customer, status_since
from pmsgate.storage.models import (
    Customer,
    Facility,
    IncidentNotice,
    LoginLink,
    User,
)
from pmsgate.storage.repository import Repository
from pmsgate.storage.views import view_of


@dataclass(frozen=True)
class FacilityState:
    """A facility's status as the notifier reads it, with its customer (when linked)."""

    facility_id: int
    hotel_id: str
    name: str
    status: str
    status_changed_at: datetime
    last_error: str | None
    student_id: str | None
    customer_name: str | None
    customer_email: str | None
    customer_language: str | None
    customer_timezone: str | None = None


@dataclass(frozen=True)
class NoticeRecord:
    """One planned, sent, failed or skipped notice."""

    id: int
    facility_id: int
    incident_at: datetime
    kind: str
    channel: str
    recipient: str
    student_id: str | None
    status: str
    attempts: int
    last_error: str | None
    created_at: datetime
    sent_at: datetime | None


def _notice(row: IncidentNotice) -> NoticeRecord:
    return view_of(NoticeRecord, row)


def _unclaimed_pending(now: datetime) -> Any:
    return and_(
        IncidentNotice.status == "pending",
        or_(IncidentNotice.claimed_until.is_(None), IncidentNotice.claimed_until <= now),
    )


def _rowcount(result: Any) -> int:
    return int(cast(CursorResult[Any], result).rowcount or 0)


class IncidentNoticeRepository(Repository):
    """Plans, claims and settles incident notices in the caller's session; never commits."""

    async def facility_states(self) -> list[FacilityState]:
        """Every facility's status and when it changed, with its kross customer if linked."""
        rows = await facilities_with_customer(
            self._session,
            Facility.hotel_id,
            func.coalesce(Facility.name, ""),
            Facility.status,
            status_since(),
            Facility.last_error,
            Customer.student_id,
            Customer.name,
            Customer.email,
            Customer.language,
            Customer.timezone,
        )
        return [FacilityState(*row) for row in rows]

    async def plan(self, *, now: datetime, **columns: Any) -> bool:
        """Add the notice given its ``facility_id``, ``incident_at``, ``kind``, ``channel``,
        ``recipient`` and ``student_id``, unless it exists (another replica's plan wins);
        True when added."""
        return await insert_unless_taken(
            self._session,
            IncidentNotice,
            ["facility_id", "incident_at", "kind", "channel"],
            **columns,
            status="pending",
            attempts=0,
            created_at=now,
            updated_at=now,
        )

    async def of_incident(self, facility_id: int, incident_at: datetime) -> list[NoticeRecord]:
        """The notices of one incident, oldest first."""
        rows = (
            await self._session.execute(
                select(IncidentNotice)
                .where(
                    IncidentNotice.facility_id == facility_id,
                    IncidentNotice.incident_at == incident_at,
                )
                .order_by(IncidentNotice.id)
            )
        ).scalars()
        return [_notice(row) for row in rows]

    async def latest_incident(self, facility_id: int) -> datetime | None:
        """The facility's latest incident that has notices, if any."""
        found = (
            await self._session.execute(
                select(IncidentNotice.incident_at)
                .where(IncidentNotice.facility_id == facility_id)
                .order_by(IncidentNotice.incident_at.desc())
                .limit(1)
            )
        ).scalar_one_or_none()
        return found

    async def skip_pending(
        self, facility_id: int, incident_at: datetime, kind: str, now: datetime
    ) -> int:
        """Mark the incident's unsent notices of ``kind`` skipped (no longer true); how many.

        A notice a replica is sending right now (its lease runs) is left to that replica.
        """
        result = await self._session.execute(
            update(IncidentNotice)
            .where(
                IncidentNotice.facility_id == facility_id,
                IncidentNotice.incident_at == incident_at,
                IncidentNotice.kind == kind,
                _unclaimed_pending(now),
            )
            .values(status="skipped", updated_at=now)
        )
        return _rowcount(result)

    async def skip_pending_before(
        self, facility_id: int, incident_at: datetime, now: datetime
    ) -> int:
        """Mark unsent notices of the facility's older incidents skipped; how many."""
        result = await self._session.execute(
            update(IncidentNotice)
            .where(
                IncidentNotice.facility_id == facility_id,
                IncidentNotice.incident_at < incident_at,
                _unclaimed_pending(now),
            )
            .values(status="skipped", updated_at=now)
        )
        return _rowcount(result)

    async def pending(self, now: datetime) -> list[NoticeRecord]:
        """Pending notices nobody holds a lease on, oldest first."""
        rows = (
            await self._session.execute(
                select(IncidentNotice).where(_unclaimed_pending(now)).order_by(IncidentNotice.id)
            )
        ).scalars()
        return [_notice(row) for row in rows]

    async def claim(self, notice_id: int, now: datetime, until: datetime) -> bool:
        """Take the lease on a pending notice; False when another replica holds or sent it."""
        result = await self._session.execute(
            update(IncidentNotice)
            .where(IncidentNotice.id == notice_id, _unclaimed_pending(now))
            .values(claimed_until=until, updated_at=now)
        )
        return _rowcount(result) == 1

    async def settle(
        self,
        notice_id: int,
        *,
        status: str,
        attempts: int,
        last_error: str | None,
        now: datetime,
    ) -> None:
        """Record a delivery's outcome (sent, failed, or pending again) and drop the lease."""
        values: dict[str, Any] = {
            "status": status,
            "attempts": attempts,
            "last_error": last_error,
            "claimed_until": None,
            "updated_at": now,
        }
        if status == "sent":
            values["sent_at"] = now
        await self._session.execute(
            update(IncidentNotice).where(IncidentNotice.id == notice_id).values(**values)
        )

    async def all(self, facility_id: int | None = None) -> list[NoticeRecord]:
        """Every notice (of one facility), oldest first."""
        query = select(IncidentNotice).order_by(IncidentNotice.id)
        if facility_id is not None:
            query = query.where(IncidentNotice.facility_id == facility_id)
        return [_notice(row) for row in (await self._session.execute(query)).scalars()]


@dataclass(frozen=True)
class LoginLinkRecord:
    """A stored one-time sign-in link (its hash only)."""

    id: int
    user_id: int
    target: str
    purpose: str
    created_at: datetime
    expires_at: datetime
    used_at: datetime | None


def _link(row: LoginLink) -> LoginLinkRecord:
    return view_of(LoginLinkRecord, row)


class LoginLinkRepository(Repository):
    """Creates, reads and uses one-time sign-in links in the caller's session."""

    async def customer_login(self, student_id: str, preferred_email: str | None) -> int | None:
        """The console account a customer's link signs in: the one with the customer's
        e-mail address, else its oldest; None when the customer has none."""
        rows = (
            await self._session.execute(
                select(User.id, User.email)
                .where(User.student_id == student_id, User.role == "customer")
                .order_by(User.id)
            )
        ).all()
        if not rows:
            return None
        wanted = (preferred_email or "").strip().lower()
        for user_id, email in rows:
            if email == wanted:
                return int(user_id)
        return int(rows[0][0])

    async def create(self, **columns: Any) -> LoginLinkRecord:
        """Store a new, unused link given its columns (``token_hash``, ``user_id``,
        ``target``, ``purpose``, ``created_at``, ``expires_at``; flushed, so its id is known)."""
        row = LoginLink(**columns, used_at=None)
        await self._add(row)
        return _link(row)

    async def by_hash(self, token_hash: str) -> LoginLinkRecord | None:
        """The link with this token hash, used or not, expired or not."""
        row = (
            await self._session.execute(select(LoginLink).where(LoginLink.token_hash == token_hash))
        ).scalar_one_or_none()
        return None if row is None else _link(row)

    async def use(self, token_hash: str, now: datetime) -> bool:
        """Mark the link used when it is unused and unexpired; False otherwise (or raced)."""
        result = await self._session.execute(
            update(LoginLink)
            .where(
                LoginLink.token_hash == token_hash,
                LoginLink.used_at.is_(None),
                LoginLink.expires_at > now,
            )
            .values(used_at=now)
        )
        return _rowcount(result) == 1

    async def delete_older_than(self, when: datetime) -> int:
        """Remove links that expired before ``when``; how many."""
        result = await self._session.execute(delete(LoginLink).where(LoginLink.expires_at < when))
        return _rowcount(result)
