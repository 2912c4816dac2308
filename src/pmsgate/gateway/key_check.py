"""The check of a presented gateway key, on every call: its facility, scopes and expiry.

:meth:`KeyCheck.authenticate` finds the key by its SHA-256 (:mod:`pmsgate.gateway.keys`)
and refuses an unknown, revoked or expired key, or one without the scope asked. A checked
key is remembered for ``key_cache_s`` so a cached tool call needs no database query; every
committed change of keys, limits or status makes every process forget
(:meth:`KeyCheck.changed`, through :class:`~pmsgate.gateway.key_cache.KeyChanges`). The
uses of keys are kept in memory and written in one transaction per flush
(:meth:`KeyCheck.flush_uses`: the usage flush job's tick, and shutdown).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import Clock
from pmsgate.errors import Unauthorized
from pmsgate.gateway.facilities import FacilityView
from pmsgate.gateway.key_cache import CachedCheck, KeyChanges
from pmsgate.gateway.keys import hash_key, is_well_formed
from pmsgate.gateway.scopes import TOOLS_READ, scope_missing
from pmsgate.storage.facilities import GatewayKeyRepository

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class KeyGrant:
    """What a presented key may do: its facility, scopes and expiry (cached together)."""

    facility: FacilityView
    key_id: int
    prefix: str
    scopes: frozenset[str]
    expires_at: datetime | None


def _invalid_gateway_key() -> Unauthorized:
    return Unauthorized(
        "The gateway key is not valid.",
        code="invalid_gateway_key",
        hint="Send `Authorization: Bearer <gateway key>` with an unrevoked key of the facility.",
    )


def _expired_gateway_key(prefix: str) -> Unauthorized:
    return Unauthorized(
        f"The gateway key {prefix}… has expired.",
        code="gateway_key_expired",
        hint="Use the facility's newer key, or ask an admin for one "
        "(`pmsgate facilities rotate-key HOTEL_ID KEY_ID` or `mint-key`).",
    )


class KeyCheck(CachedCheck[KeyGrant]):
    """Checks presented gateway keys (remembered a while) and records their uses."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        clock: Clock,
        *,
        key_cache_s: float = 0.0,
        key_changes: KeyChanges | None = None,
    ) -> None:
        # Key hash → grant, for key_cache_s of the clock (0: every check reads the
        # database). It takes the database off a cached tool call's path. Another process's
        # revocation, scopes, expiry or status change reaches it through key_changes (Redis
        # pub/sub: at once); without Redis, up to key_cache_s late (pmsgate.gateway.key_cache).
        super().__init__(sessions, clock, cache_s=key_cache_s, key_changes=key_changes)
        # Key id → its latest accepted call, not yet written: flush_uses writes them in
        # one transaction (the usage flush job's tick, and shutdown), never once per call.
        self._uses: dict[int, datetime] = {}

    def __repr__(self) -> str:
        return f"KeyCheck(cached={self._memory.on})"

    # --- checking -----------------------------------------------------------------------

    async def authenticate(self, raw_key: str, scope: str = TOOLS_READ) -> FacilityView:
        """The facility of a presented key that holds ``scope``; anything else is refused.

        Unknown or revoked keys: 401 invalid_gateway_key; expired: 401 gateway_key_expired;
        a key without ``scope``: 403 scope_missing. Checked before anything is sent, a
        permit taken or an idempotency record written. The default scope is the least one.
        """
        grant = await self._grant(raw_key)
        now = self._clock.now()
        # Checked on every call, cached or not: an expiry takes effect to the second.
        if grant.expires_at is not None and grant.expires_at <= now:
            raise _expired_gateway_key(grant.prefix)
        if scope not in grant.scopes:
            raise scope_missing(scope, grant.prefix)
        self._uses[grant.key_id] = now
        return grant.facility

    async def _grant(self, raw_key: str) -> KeyGrant:
        # A malformed key is refused before the database: nothing to look up.
        if not is_well_formed(raw_key):
            raise _invalid_gateway_key()
        key_hash = hash_key(raw_key)
        if cached := self._memory.get(key_hash):
            return cached
        async with self._sessions() as session:
            found = await GatewayKeyRepository(session).unrevoked_with_facility(key_hash)
        if found is None:
            # Refusals are not cached: a key minted a moment ago works at once.
            raise _invalid_gateway_key()
        key, row = found
        grant = KeyGrant(
            facility=FacilityView.of(row),
            key_id=key.id,
            prefix=key.prefix,
            scopes=frozenset(key.scopes or ()),
            expires_at=key.expires_at,
        )
        self._memory.keep(key_hash, grant)
        return grant

    # --- uses ---------------------------------------------------------------------------

    def pending_uses(self) -> dict[int, datetime]:
        """Key uses seen since the last flush (key id → latest call)."""
        return dict(self._uses)

    async def flush_uses(self) -> int:
        """Write the key uses seen since the last flush, in one transaction; how many keys.

        Runs on the usage flush job's tick and at shutdown. A failed write puts the uses
        back, so the next flush writes them (with whatever came since).
        """
        uses, self._uses = self._uses, {}
        if not uses:
            return 0
        try:
            async with self._sessions.begin() as session:
                await GatewayKeyRepository(session).record_last_use(uses)
        except BaseException:
            for key_id, when in uses.items():
                later = self._uses.get(key_id)
                self._uses[key_id] = when if later is None or later < when else later
            raise
        return len(uses)

    async def aclose(self) -> None:
        """Flush the key uses still in memory (shutdown); a failure is logged, not raised."""
        try:
            await self.flush_uses()
        except Exception as error:  # shutdown goes on: at worst a last use is lost
            log.warning("key_uses_not_flushed", error=type(error).__name__)
