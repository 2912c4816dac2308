"""Repositories of facilities and their gateway keys: every query on those tables lives here.

Repositories work inside a session the caller opened, so a service decides what
one transaction is (e.g. a facility and its first key are written together).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import CursorResult, case, delete, func, literal, select, update

from pmsgate.storage.models import (
    CustomerIntegration,
    Facility,
    FacilityToken,
    GatewayKey,
    UtcDateTime,
)
from pmsgate.storage.repository import Repository


class FacilityRepository(Repository):
    """Facilities, their stored tokens (for reconnect and key rotation)."""

    async def by_hotel_id(self, hotel_id: str) -> Facility | None:
        """The facility with this hotel_id, if any."""
        result = await self._session.execute(select(Facility).where(Facility.hotel_id == hotel_id))
        return result.scalar_one_or_none()

    async def exists(self, hotel_id: str) -> bool:
        """True when a facility with this hotel_id is registered."""
        result = await self._session.execute(
            select(func.count()).select_from(Facility).where(Facility.hotel_id == hotel_id)
        )
        return bool(result.scalar_one())

    async def all(self) -> list[Facility]:
        """Every facility, oldest first."""
        result = await self._session.execute(select(Facility).order_by(Facility.id))
        return list(result.scalars())

    async def add(self, facility: Facility) -> Facility:
        """Insert a facility (its id is set on return); a taken hotel_id raises IntegrityError."""
        await self._add(facility)
        return facility

    async def update(self, hotel_id: str, **values: Any) -> bool:
        """Set columns of one facility in a single statement; False when it does not exist."""
        result = cast(
            CursorResult[Any],
            await self._session.execute(
                update(Facility).where(Facility.hotel_id == hotel_id).values(**values)
            ),
        )
        return result.rowcount > 0

    async def set_integration_status(
        self, facility_id: int, status: str, last_error: str | None, when: datetime
    ) -> None:
        """Give the facility's linked kross integration row its status (docs/requirements.md R11.1).

        ``status_changed_at`` moves only when the status really changes; no linked row, no-op.
        """
        await self._session.execute(
            update(CustomerIntegration)
            .where(CustomerIntegration.facility_id == facility_id)
            .values(
                status_changed_at=case(
                    # Typed, so the UTC conversion of the column type applies to the value.
                    (CustomerIntegration.status != status, literal(when, UtcDateTime())),
                    else_=CustomerIntegration.status_changed_at,
                ),
                status=status,
                last_error=last_error if status == "error" else None,
                updated_at=when,
            )
        )

    async def delete_token(self, facility_id: int) -> None:
        """Forget the facility's stored booking-system token, so a new one is fetched."""
        await self._session.execute(
            delete(FacilityToken).where(FacilityToken.facility_id == facility_id)
        )

    async def tokens_with_hotel_ids(self) -> list[tuple[FacilityToken, str]]:
        """Every stored token with its facility's hotel_id (the vault context needs it)."""
        result = await self._session.execute(
            select(FacilityToken, Facility.hotel_id)
            .join(Facility, Facility.id == FacilityToken.facility_id)
            .order_by(FacilityToken.facility_id)
        )
        return [(token, hotel_id) for token, hotel_id in result.all()]


class GatewayKeyRepository(Repository):
    """Gateway keys: stored by hash, looked up by hash, revoked by time stamp."""

    async def add(self, key: GatewayKey) -> GatewayKey:
        """Insert a key (its id is set on return)."""
        await self._add(key)
        return key

    async def for_facility(self, facility_id: int) -> list[GatewayKey]:
        """Every key of the facility, revoked ones included, oldest first."""
        result = await self._session.execute(
            select(GatewayKey).where(GatewayKey.facility_id == facility_id).order_by(GatewayKey.id)
        )
        return list(result.scalars())

    async def get(self, facility_id: int, key_id: int) -> GatewayKey | None:
        """The key with this id if it belongs to the facility."""
        result = await self._session.execute(
            select(GatewayKey).where(GatewayKey.id == key_id, GatewayKey.facility_id == facility_id)
        )
        return result.scalar_one_or_none()

    async def revoke(self, key: GatewayKey, when: datetime) -> GatewayKey:
        """Mark the key revoked (a key already revoked keeps its first revocation time)."""
        if key.revoked_at is None:
            key.revoked_at = when
            await self._session.flush()
        return key

    async def facility_of_active_key(self, key_hash: str) -> Facility | None:
        """The facility an unrevoked key with this hash belongs to, if any."""
        found = await self.unrevoked_with_facility(key_hash)
        return found[1] if found is not None else None

    async def unrevoked_with_facility(self, key_hash: str) -> tuple[GatewayKey, Facility] | None:
        """The unrevoked key with this hash and its facility (expired keys included)."""
        result = await self._session.execute(
            select(GatewayKey, Facility)
            .join(Facility, GatewayKey.facility_id == Facility.id)
            .where(GatewayKey.key_hash == key_hash, GatewayKey.revoked_at.is_(None))
        )
        row = result.one_or_none()
        return (row[0], row[1]) if row is not None else None

    async def unrevoked(self) -> list[GatewayKey]:
        """Every unrevoked key of every facility, oldest first."""
        result = await self._session.execute(
            select(GatewayKey).where(GatewayKey.revoked_at.is_(None)).order_by(GatewayKey.id)
        )
        return list(result.scalars())

    async def record_last_use(self, uses: dict[int, datetime]) -> int:
        """Move each key's ``last_used_at`` forward to the time given (never back); how many."""
        changed = 0
        for key_id, when in sorted(uses.items()):
            stamp = literal(when, UtcDateTime())
            result = cast(
                CursorResult[Any],
                await self._session.execute(
                    update(GatewayKey)
                    .where(GatewayKey.id == key_id)
                    .where((GatewayKey.last_used_at.is_(None)) | (GatewayKey.last_used_at < stamp))
                    .values(last_used_at=stamp)
                ),
            )
            changed += result.rowcount
        return changed
