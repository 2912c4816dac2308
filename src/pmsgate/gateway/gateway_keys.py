"""The gateway keys' lifecycle: mint, list, revoke, scopes, rotation and expiry.

:class:`GatewayKeys` hands a raw key back once (:meth:`GatewayKeys.mint`,
:meth:`GatewayKeys.rotate`); only its SHA-256 is stored (:mod:`pmsgate.gateway.keys`).
Every change is one transaction with its audit event, and once committed every process's
key check forgets what it remembered (:meth:`pmsgate.gateway.key_check.KeyCheck.changed`).
Checking a presented key is :mod:`pmsgate.gateway.key_check`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.audit.actions import Actor, AuditAction
from pmsgate.audit.trail import AuditTrail
from pmsgate.clock import Clock
from pmsgate.errors import InvalidInput
from pmsgate.gateway.facilities import (
    CLI_ACTOR,
    MAX_LABEL,
    FacilityPart,
    KeyView,
    KeyViews,
    check_length,
    key_not_found,
    require_facility,
)
from pmsgate.gateway.key_check import KeyCheck
from pmsgate.gateway.keys import MintedKey, mint_key
from pmsgate.gateway.scopes import DEFAULT_SCOPES, check_scopes
from pmsgate.storage.facilities import GatewayKeyRepository
from pmsgate.storage.models import Facility, GatewayKey

log = structlog.get_logger(__name__)


def _check_expiry(expires_at: datetime | None, now: datetime) -> datetime | None:
    if expires_at is None:
        return None
    if expires_at.tzinfo is None:
        raise InvalidInput(
            "The expiry needs a time zone.",
            code="invalid_expiry",
            hint="Give an ISO 8601 time with its offset, e.g. 2027-01-31T00:00:00Z.",
        )
    if expires_at <= now:
        raise InvalidInput(
            "The expiry is in the past.",
            code="invalid_expiry",
            hint="Give a time in the future, or a duration such as --expires-in 30d.",
        )
    return expires_at


async def _store_new_key(
    keys: GatewayKeyRepository,
    facility_id: int,
    label: str,
    scopes: list[str],
    now: datetime,
    expires_at: datetime | None = None,
) -> tuple[GatewayKey, MintedKey]:
    minted = mint_key()
    key = GatewayKey(
        facility_id=facility_id,
        prefix=minted.prefix,
        key_hash=minted.key_hash,
        label=label,
        created_at=now,
        scopes=scopes,
        expires_at=expires_at,
    )
    return await keys.add(key), minted


class GatewayKeys(FacilityPart):
    """Issues, changes and checks the gateway keys of the facilities."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        clock: Clock,
        audit: AuditTrail,
        check: KeyCheck,
    ) -> None:
        # Every change is forgotten by the key checks of every process (KeyCheck.changed).
        super().__init__(sessions, clock, audit, check.changed)
        self._check = check

    # --- issuing ------------------------------------------------------------------------

    async def add_in(
        self,
        session: AsyncSession,
        facility_id: int,
        *,
        label: str,
        scopes: list[str],
        actor: Actor,
        how: str,
        now: datetime,
        expires_at: datetime | None = None,
    ) -> tuple[GatewayKey, MintedKey]:
        """A new key of the facility, stored and recorded (``key.minted``) in ``session``."""
        key, minted = await _store_new_key(
            GatewayKeyRepository(session), facility_id, label, scopes, now, expires_at
        )
        details = {
            "label": key.label,
            "scopes": list(key.scopes or []),
            "expires_at": key.expires_at,
            "how": how,
        }
        await self._record(session, AuditAction.KEY_MINTED, actor, key, details)
        return key, minted

    async def mint(
        self,
        hotel_id: str,
        label: str = "",
        *,
        scopes: Iterable[str] = DEFAULT_SCOPES,
        expires_at: datetime | None = None,
        actor: Actor = CLI_ACTOR,
    ) -> tuple[KeyView, str]:
        """A new gateway key for the facility; the raw key is returned only here.

        ``scopes`` default to ``tools:read``; unknown names are refused (422 invalid_scope).
        """
        label = label.strip()
        check_length(label, MAX_LABEL, "label", "invalid_label")
        granted = check_scopes(scopes)
        now = self._clock.now()
        expires_at = _check_expiry(expires_at, now)
        async with self._sessions.begin() as session:
            row = await require_facility(session, hotel_id)
            key, minted = await self.add_in(
                session,
                row.id,
                label=label,
                scopes=granted,
                actor=actor,
                how="minted",
                now=now,
                expires_at=expires_at,
            )
            view = KeyView.of(key, row.hotel_id)
        log.info(
            "gateway_key_minted",
            hotel_id=hotel_id,
            key_id=view.id,
            key_prefix=view.prefix,
            scopes=granted,
            expires_at=expires_at.isoformat() if expires_at else None,
        )
        return view, minted.raw

    async def list(self, hotel_id: str) -> KeyViews:
        """Every key of the facility, revoked ones included."""
        async with self._sessions() as session:
            row = await require_facility(session, hotel_id)
            keys = await GatewayKeyRepository(session).for_facility(row.id)
            return [self._view(key, row.hotel_id) for key in keys]

    # --- changing -----------------------------------------------------------------------

    async def revoke(self, hotel_id: str, key_id: int, *, actor: Actor = CLI_ACTOR) -> KeyView:
        """Revoke one key of the facility (revoking twice changes nothing, records nothing)."""
        async with self._sessions.begin() as session:
            row, keys, key = await _facility_key(session, hotel_id, key_id)
            already = key.revoked_at is not None
            view = KeyView.of(await keys.revoke(key, self._clock.now()), row.hotel_id)
            if not already:
                details = {"label": view.label}
                await self._record(session, AuditAction.KEY_REVOKED, actor, key, details)
        await self._logged("gateway_key_revoked", hotel_id, view)
        return view

    async def set_scopes(
        self,
        hotel_id: str,
        key_id: int,
        scopes: Iterable[str],
        *,
        add: bool = False,
        actor: Actor = CLI_ACTOR,
    ) -> KeyView:
        """Replace a key's scopes (or, with ``add``, widen them); the key itself is unchanged.

        How an admin restores a key migrated to ``tools:read`` to full power (``all_scopes()``).
        """
        given = check_scopes(scopes)
        async with self._sessions.begin() as session:
            row, _, key = await _facility_key(session, hotel_id, key_id)
            if key.revoked_at is not None:
                raise InvalidInput(
                    f"Gateway key {key_id} of facility {hotel_id} is revoked.",
                    code="gateway_key_revoked",
                    hint="A revoked key stays revoked: mint a new one with the scopes needed.",
                )
            before = list(key.scopes or [])
            key.scopes = check_scopes([*key.scopes, *given]) if add else given
            await session.flush()
            view = self._view(key, row.hotel_id)
            if view.scopes != before:
                details = {"from": before, "to": view.scopes}
                await self._record(session, AuditAction.KEY_SCOPES_CHANGED, actor, key, details)
        await self._logged("gateway_key_scopes_set", hotel_id, view, scopes=view.scopes)
        return view

    async def rotate(
        self, hotel_id: str, key_id: int, grace: timedelta, *, actor: Actor = CLI_ACTOR
    ) -> tuple[KeyView, KeyView, str]:
        """A new key with the old one's scopes; the old one expires after ``grace``.

        Both work during the grace, so a caller can switch without an outage. Returns the
        old key's view, the new key's and the new raw key (shown only here). An old key
        that already expires sooner keeps its earlier expiry.
        """
        if grace < timedelta(0):
            raise InvalidInput(
                "The grace period cannot be negative.",
                code="invalid_duration",
                hint="Give --grace 0m to end the old key at once, or e.g. --grace 7d.",
            )
        now = self._clock.now()
        async with self._sessions.begin() as session:
            row, keys, old = await _facility_key(session, hotel_id, key_id)
            if old.revoked_at is not None or (old.expires_at is not None and old.expires_at <= now):
                raise InvalidInput(
                    f"Gateway key {key_id} of facility {hotel_id} no longer works.",
                    code="gateway_key_inactive",
                    hint="Rotate a working key, or mint a new one with `pmsgate facilities "
                    "mint-key`.",
                )
            ends = now + grace
            if old.expires_at is None or old.expires_at > ends:
                old.expires_at = ends
            new, minted = await _store_new_key(keys, row.id, old.label, list(old.scopes), now)
            old_view = self._view(old, row.hotel_id)
            new_view = KeyView.of(new, row.hotel_id)
            details = {
                "new_key_id": new_view.id,
                "new_key_prefix": new_view.prefix,
                "old_key_expires_at": old_view.expires_at,
                "scopes": new_view.scopes,
            }
            await self._record(session, AuditAction.KEY_ROTATED, actor, old, details)
        await self._logged(
            "gateway_key_rotated",
            hotel_id,
            old_view,
            new_key_id=new_view.id,
            new_key_prefix=new_view.prefix,
            old_expires_at=old_view.expires_at.isoformat() if old_view.expires_at else None,
        )
        return old_view, new_view, minted.raw

    # --- shared by the changes ----------------------------------------------------------

    def _view(self, key: GatewayKey, hotel_id: str) -> KeyView:
        """The key's view, with the uses its check has counted but not yet written."""
        return KeyView.of(key, hotel_id, self._check.pending_uses().get(key.id))

    async def _record(
        self,
        session: AsyncSession,
        action: AuditAction,
        actor: Actor,
        key: GatewayKey,
        details: Mapping[str, Any],
    ) -> None:
        """The change's audit event in ``session``: about ``key:<prefix>`` of its facility."""
        await self._audit.record_in(
            session,
            action,
            actor=actor,
            subject=f"key:{key.prefix}",
            details={"key_id": key.id, **details},
            facility_id=key.facility_id,
        )

    async def _logged(self, event: str, hotel_id: str, view: KeyView, **fields: Any) -> None:
        """After the commit: every process's key check forgets, and the change is logged."""
        await self._changed()
        log.info(event, hotel_id=hotel_id, key_id=view.id, key_prefix=view.prefix, **fields)


async def _facility_key(
    session: AsyncSession, hotel_id: str, key_id: int
) -> tuple[Facility, GatewayKeyRepository, GatewayKey]:
    """The facility, its keys and its key ``key_id`` (404 when either is unknown)."""
    row = await require_facility(session, hotel_id)
    keys = GatewayKeyRepository(session)
    key = await keys.get(row.id, key_id)
    if key is None:
        raise key_not_found(hotel_id, key_id)
    return row, keys, key
