"""Idempotency records of gateway writes: the only queries on ``idempotency_records``.

A record belongs to the process running its write (``owner``, the gateway instance id)
while it is ``in_flight``. Every change a process makes to a record is conditional on
still owning it, so a process that was taken for dead and comes back late cannot
overwrite what another process settled meanwhile (docs/gateway.md "Writes").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict

from sqlalchemy import delete, select, update

from pmsgate.storage.models import IdempotencyRecord
from pmsgate.storage.repository import Repository
from pmsgate.storage.views import view_of

# States in which the outcome of a write is not settled yet.
UNRESOLVED = ("in_flight", "unknown")


class RecordOutcome(TypedDict):
    """How a write ended, as :meth:`IdempotencyRepository.finish` stores it."""

    state: str
    status_code: int | None
    response: dict[str, Any] | None
    now: datetime


@dataclass(frozen=True)
class WriteRecord:
    """A snapshot of one idempotency record."""

    id: int
    facility_id: int
    key: str
    operation: str
    body_hash: str
    state: str
    status_code: int | None
    response: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    owner: str | None = None
    read_before: dict[str, Any] | None = None


def _snapshot(row: IdempotencyRecord) -> WriteRecord:
    return view_of(WriteRecord, row)


class IdempotencyRepository(Repository):
    """Inserts, changes and releases write records in the caller's session; never commits.

    The unique (facility, key) makes a claim atomic: :meth:`insert` raises the database's
    ``IntegrityError`` when the key is taken (:class:`pmsgate.gateway.write_records.WriteRecords`
    then reads the existing record).
    """

    async def insert(
        self, *, now: datetime, owner: str | None = None, **columns: Any
    ) -> WriteRecord:
        """Insert an in-flight record given its ``facility_id``, ``key``, ``operation`` and
        ``body_hash`` (flushed: ``IntegrityError`` when the key is taken)."""
        row = IdempotencyRecord(
            **columns, state="in_flight", owner=owner, created_at=now, updated_at=now
        )
        await self._add(row)
        return _snapshot(row)

    async def get(self, *, facility_id: int, key: str) -> WriteRecord | None:
        """The record for this facility and key, if any."""
        row = (
            await self._session.execute(
                select(IdempotencyRecord).where(
                    IdempotencyRecord.facility_id == facility_id, IdempotencyRecord.key == key
                )
            )
        ).scalar_one_or_none()
        return _snapshot(row) if row else None

    async def unresolved_twins(self, record: WriteRecord) -> list[WriteRecord]:
        """Other records of the same facility, operation and body still in flight or unknown."""
        rows = (
            (
                await self._session.execute(
                    select(IdempotencyRecord)
                    .where(
                        IdempotencyRecord.facility_id == record.facility_id,
                        IdempotencyRecord.operation == record.operation,
                        IdempotencyRecord.body_hash == record.body_hash,
                        IdempotencyRecord.state.in_(UNRESOLVED),
                        IdempotencyRecord.id != record.id,
                    )
                    .order_by(IdempotencyRecord.id)
                )
            )
            .scalars()
            .all()
        )
        return [_snapshot(r) for r in rows]

    async def finish(
        self,
        record_id: int,
        *,
        state: str,
        status_code: int | None,
        response: dict[str, Any] | None,
        now: datetime,
        owner: str | None = None,
    ) -> bool:
        """Store the outcome, only while ``owner`` still owns the record; False otherwise."""
        result = await self._session.execute(
            update(IdempotencyRecord)
            .where(
                IdempotencyRecord.id == record_id,
                IdempotencyRecord.owner.is_not_distinct_from(owner),
            )
            .values(state=state, status_code=status_code, response=response, updated_at=now)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def take_over(self, record: WriteRecord, *, owner: str | None, now: datetime) -> bool:
        """Make ``owner`` run an unsettled write, if its state and owner are still ``record``'s.

        Atomic: of several processes taking over the same record, one succeeds.
        """
        result = await self._session.execute(
            update(IdempotencyRecord)
            .where(
                IdempotencyRecord.id == record.id,
                IdempotencyRecord.state == record.state,
                IdempotencyRecord.owner.is_not_distinct_from(record.owner),
            )
            .values(state="in_flight", owner=owner, status_code=None, response=None, updated_at=now)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def remember_read(
        self, record_id: int, read_before: dict[str, Any], *, owner: str | None
    ) -> None:
        """Keep what the read just before sending showed (compared by the read-back)."""
        await self._session.execute(
            update(IdempotencyRecord)
            .where(
                IdempotencyRecord.id == record_id,
                IdempotencyRecord.owner.is_not_distinct_from(owner),
            )
            .values(read_before=read_before)
        )

    async def release(self, record_id: int, *, owner: str | None = None) -> None:
        """Forget a write the upstream certainly did not apply, so the key can be used again."""
        await self._session.execute(
            delete(IdempotencyRecord).where(
                IdempotencyRecord.id == record_id,
                IdempotencyRecord.owner.is_not_distinct_from(owner),
            )
        )

    async def all_rows(self) -> list[WriteRecord]:
        """Every record (for admin views and tests)."""
        rows = (await self._session.execute(select(IdempotencyRecord))).scalars().all()
        return [_snapshot(r) for r in rows]
