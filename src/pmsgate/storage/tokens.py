"""Stored booking-system tokens: the token manager's queries on ``facility_tokens``.

Rows hold vault ciphertext only; the repository never sees a plaintext token.
A facility has at most one row (its primary key is the facility id), written
with an upsert so that concurrent writers never fail on a duplicate. The repository
works in the caller's session and never commits; :class:`pmsgate.gateway.tokens.TokenManager`
owns the transactions.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from pmsgate.storage.models import Ciphertext, Facility, FacilityToken
from pmsgate.storage.repository import Repository


@dataclass(frozen=True)
class StoredToken:
    """A facility's token as stored: ciphertext and validity."""

    hotel_id: str
    token_enc: str
    expires_at: datetime
    obtained_at: datetime


class TokenRepository(Repository):
    """Reads, upserts and compare-and-deletes a facility's stored token (by hotel_id), in the
    caller's session; never commits."""

    async def get(self, hotel_id: str) -> StoredToken | None:
        """The facility's stored token, if any."""
        row = (
            await self._session.execute(
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
        self, hotel_id: str, *, token_enc: Ciphertext, expires_at: datetime, obtained_at: datetime
    ) -> bool:
        """Store the facility's token, replacing any earlier one; False when no such facility."""
        facility_id = (
            await self._session.execute(select(Facility.id).where(Facility.hotel_id == hotel_id))
        ).scalar_one_or_none()
        if facility_id is None:
            return False
        values = {
            "facility_id": int(facility_id),
            "token_enc": token_enc,
            "expires_at": expires_at,
            "obtained_at": obtained_at,
        }
        changes = {k: v for k, v in values.items() if k != "facility_id"}
        insert: Any = (
            postgresql_insert
            if self._session.get_bind().dialect.name == "postgresql"
            else sqlite_insert
        )
        await self._session.execute(
            insert(FacilityToken)
            .values(**values)
            .on_conflict_do_update(index_elements=[FacilityToken.facility_id], set_=changes)
        )
        return True

    async def delete_if(self, hotel_id: str, token_enc: str) -> bool:
        """Delete the stored token only if it is still ``token_enc``; True when deleted."""
        facility_ids = select(Facility.id).where(Facility.hotel_id == hotel_id)
        result = await self._session.execute(
            delete(FacilityToken).where(
                FacilityToken.facility_id == facility_ids.scalar_subquery(),
                FacilityToken.token_enc == token_enc,
            )
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def delete(self, hotel_id: str) -> None:
        """Forget the facility's stored token, whatever it is."""
        facility_ids = select(Facility.id).where(Facility.hotel_id == hotel_id)
        await self._session.execute(
            delete(FacilityToken).where(FacilityToken.facility_id == facility_ids.scalar_subquery())
        )
