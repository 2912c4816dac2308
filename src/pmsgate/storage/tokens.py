"""Stored booking-system tokens: the token manager's queries on ``facility_tokens``.

Rows hold vault ciphertext only; the repository never sees a plaintext token.
A facility has at most one row (its primary key is the facility id), written
with an upsert so that concurrent writers never fail on a duplicate.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.errors import NotFound
from pmsgate.storage.models import Facility, FacilityToken


@dataclass(frozen=True)
class StoredToken:
    """A facility's token as stored: ciphertext and validity."""

    hotel_id: str
    token_enc: str
    expires_at: datetime
    obtained_at: datetime


class TokenRepository:
    """Reads, upserts and compare-and-deletes a facility's stored token (by hotel_id)."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def get(self, hotel_id: str) -> StoredToken | None:
        """The facility's stored token, if any."""
        async with self._sessions() as session:
            row = (
                await session.execute(
                    select(FacilityToken)
                    .join(Facility, Facility.id == FacilityToken.facility_id)
                    .where(Facility.hotel_id == hotel_id)
                )
            ).scalar_one_or_none()
        if row is None:
            return None
        return StoredToken(
            hotel_id=hotel_id,
            token_enc=row.token_enc,
            expires_at=row.expires_at,
            obtained_at=row.obtained_at,
        )

    async def put(
        self, hotel_id: str, *, token_enc: str, expires_at: datetime, obtained_at: datetime
    ) -> None:
        """Store the facility's token, replacing any earlier one."""
        async with self._sessions.begin() as session:
            facility_id = await self._facility_id(session, hotel_id)
            values = {
                "facility_id": facility_id,
                "token_enc": token_enc,
                "expires_at": expires_at,
                "obtained_at": obtained_at,
            }
            changes = {k: v for k, v in values.items() if k != "facility_id"}
            insert: Any = (
                postgresql_insert
                if session.get_bind().dialect.name == "postgresql"
                else sqlite_insert
            )
            await session.execute(
                insert(FacilityToken)
                .values(**values)
                .on_conflict_do_update(index_elements=[FacilityToken.facility_id], set_=changes)
            )

    async def delete_if(self, hotel_id: str, token_enc: str) -> bool:
        """Delete the stored token only if it is still ``token_enc``; True when deleted."""
        async with self._sessions.begin() as session:
            facility_ids = select(Facility.id).where(Facility.hotel_id == hotel_id)
            result = await session.execute(
                delete(FacilityToken).where(
                    FacilityToken.facility_id == facility_ids.scalar_subquery(),
                    FacilityToken.token_enc == token_enc,
                )
            )
            return bool(result.rowcount)  # type: ignore[attr-defined]

    async def delete(self, hotel_id: str) -> None:
        """Forget the facility's stored token, whatever it is."""
        async with self._sessions.begin() as session:
            facility_ids = select(Facility.id).where(Facility.hotel_id == hotel_id)
            await session.execute(
                delete(FacilityToken).where(
                    FacilityToken.facility_id == facility_ids.scalar_subquery()
                )
            )

    @staticmethod
    async def _facility_id(session: AsyncSession, hotel_id: str) -> int:
        facility_id = (
            await session.execute(select(Facility.id).where(Facility.hotel_id == hotel_id))
        ).scalar_one_or_none()
        if facility_id is None:
            raise NotFound(
                f"No facility with hotel_id {hotel_id} is registered.",
                code="facility_not_found",
                hint="Register it with `pmsgate facilities add`.",
            )
        return int(facility_id)
