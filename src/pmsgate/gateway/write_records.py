"""The idempotency records of gateway writes as :class:`pmsgate.gateway.operations.Operations`
uses them: each call is one transaction over
:class:`pmsgate.storage.idempotency.IdempotencyRepository`.

Claiming a key is insert-or-read: the insert that loses to a concurrent one reads the
winner's record, and claims again if that record was released in between.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Unpack

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.storage.idempotency import IdempotencyRepository, RecordOutcome, WriteRecord


class WriteRecords:
    """Claims, completes and releases write records; the unique key makes claims atomic."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def claim(
        self,
        *,
        facility_id: int,
        key: str,
        operation: str,
        body_hash: str,
        now: datetime,
        owner: str | None = None,
    ) -> tuple[WriteRecord, bool]:
        """Insert an in-flight record, or return the existing one; True when this call made it."""
        while True:
            try:
                async with self._sessions.begin() as session:
                    record = await IdempotencyRepository(session).insert(
                        facility_id=facility_id,
                        key=key,
                        operation=operation,
                        body_hash=body_hash,
                        now=now,
                        owner=owner,
                    )
                return record, True
            except IntegrityError:
                existing = await self.get(facility_id=facility_id, key=key)
                if existing is not None:
                    return existing, False
                # Released between our insert and read: claim again.

    async def get(self, *, facility_id: int, key: str) -> WriteRecord | None:
        """The record for this facility and key, if any."""
        async with self._sessions() as session:
            return await IdempotencyRepository(session).get(facility_id=facility_id, key=key)

    async def unresolved_twins(self, record: WriteRecord) -> list[WriteRecord]:
        """Other records of the same facility, operation and body still in flight or unknown."""
        async with self._sessions() as session:
            return await IdempotencyRepository(session).unresolved_twins(record)

    async def finish(
        self, record_id: int, *, owner: str | None = None, **outcome: Unpack[RecordOutcome]
    ) -> bool:
        """Store the outcome, only while ``owner`` still owns the record; False otherwise."""
        async with self._sessions.begin() as session:
            return await IdempotencyRepository(session).finish(record_id, owner=owner, **outcome)

    async def take_over(self, record: WriteRecord, *, owner: str | None, now: datetime) -> bool:
        """Make ``owner`` run an unsettled write, if its state and owner are still ``record``'s."""
        async with self._sessions.begin() as session:
            return await IdempotencyRepository(session).take_over(record, owner=owner, now=now)

    async def remember_read(
        self, record_id: int, read_before: dict[str, Any], *, owner: str | None
    ) -> None:
        """Keep what the read just before sending showed (compared by the read-back)."""
        async with self._sessions.begin() as session:
            await IdempotencyRepository(session).remember_read(record_id, read_before, owner=owner)

    async def release(self, record_id: int, *, owner: str | None = None) -> None:
        """Forget a write the upstream certainly did not apply, so the key can be used again."""
        async with self._sessions.begin() as session:
            await IdempotencyRepository(session).release(record_id, owner=owner)

    async def all_rows(self) -> list[WriteRecord]:
        """Every record (for admin views and tests)."""
        async with self._sessions() as session:
            return await IdempotencyRepository(session).all_rows()
