"""Idempotency records of gateway writes: the only queries on ``idempotency_records``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.storage.models import IdempotencyRecord


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


def _snapshot(row: IdempotencyRecord) -> WriteRecord:
    return WriteRecord(
        id=row.id,
        facility_id=row.facility_id,
        key=row.key,
        operation=row.operation,
        body_hash=row.body_hash,
        state=row.state,
        status_code=row.status_code,
        response=row.response,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


class IdempotencyRepository:
    """Claims, completes and releases write records; the unique key makes claims atomic."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def claim(
        self, *, facility_id: int, key: str, operation: str, body_hash: str, now: datetime
    ) -> tuple[WriteRecord, bool]:
        """Insert an in-flight record, or return the existing one; True when this call made it."""
        row = IdempotencyRecord(
            facility_id=facility_id,
            key=key,
            operation=operation,
            body_hash=body_hash,
            state="in_flight",
            created_at=now,
            updated_at=now,
        )
        try:
            async with self._sessions.begin() as session:
                session.add(row)
            return _snapshot(row), True
        except IntegrityError:
            existing = await self.get(facility_id=facility_id, key=key)
            if existing is None:  # released between our insert and read: claim again
                return await self.claim(
                    facility_id=facility_id,
                    key=key,
                    operation=operation,
                    body_hash=body_hash,
                    now=now,
                )
            return existing, False

    async def get(self, *, facility_id: int, key: str) -> WriteRecord | None:
        """The record for this facility and key, if any."""
        async with self._sessions() as session:
            row = (
                await session.execute(
                    select(IdempotencyRecord).where(
                        IdempotencyRecord.facility_id == facility_id, IdempotencyRecord.key == key
                    )
                )
            ).scalar_one_or_none()
            return _snapshot(row) if row else None

    async def finish(
        self,
        record_id: int,
        *,
        state: str,
        status_code: int | None,
        response: dict[str, Any] | None,
        now: datetime,
        expected_state: str | None = None,
    ) -> bool:
        """Store the outcome; with expected_state, only if the record is still in it."""
        statement = update(IdempotencyRecord).where(IdempotencyRecord.id == record_id)
        if expected_state is not None:
            statement = statement.where(IdempotencyRecord.state == expected_state)
        async with self._sessions.begin() as session:
            result = await session.execute(
                statement.values(
                    state=state, status_code=status_code, response=response, updated_at=now
                )
            )
            return bool(result.rowcount)  # type: ignore[attr-defined]

    async def release(self, record_id: int) -> None:
        """Forget a write the upstream certainly did not apply, so the key can be used again."""
        async with self._sessions.begin() as session:
            await session.execute(
                delete(IdempotencyRecord).where(IdempotencyRecord.id == record_id)
            )

    async def all_rows(self) -> list[WriteRecord]:
        """Every record (for admin views and tests)."""
        async with self._sessions() as session:
            rows = (await session.execute(select(IdempotencyRecord))).scalars().all()
            return [_snapshot(r) for r in rows]
