"""The token manager: one booking-system token per facility, obtained once for everyone.

A token is reused until ``refresh_ahead_s`` before it expires (or until the
booking system rejects it). Getting a new one is single-flight at two levels:

1. in the process, concurrent callers of one facility share one attempt and its
   outcome (:class:`~pmsgate.gateway.locks.SingleFlight`) — a wrong password
   fails once for 1,000 callers instead of 1,000 times in a row;
2. across replicas, the attempt runs under a lock (Redis when configured), and
   the shared store (the database) is read again after the lock is taken, so a
   replica that waited uses the token another one just stored. Without Redis
   (:class:`~pmsgate.gateway.shared_state.RedisHealth` says it is away) the lock
   cannot be taken: a token still valid (held, or stored in the database) keeps
   being used, and a facility that has none gets ``shared_state_unavailable``
   (503, ``Retry-After``) rather than a token fetched uncoordinated — two replicas
   would each open one, and each new one may end the other's session.

Every ``auth/get-token`` first takes a permit (``acquire_permit``): it counts
against the facility's budget like any other request, and each one opens an
upstream session (at most 50 may be active, docs/requirements.md R3.4). Tokens are kept in memory
and, for other replicas, in the database encrypted by the vault (associated
data ``facility_context(hotel_id, "token")``). A token value is never logged.
"""

from __future__ import annotations

import hashlib
import hmac
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import InitVar, dataclass
from datetime import datetime, timedelta

import structlog
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import Clock
from pmsgate.errors import NotFound
from pmsgate.gateway.locks import LocalLocks, Locks, SingleFlight
from pmsgate.gateway.shared_state import RedisHealth, SharedStateUnavailable
from pmsgate.gateway.vault import Vault, VaultError, facility_context
from pmsgate.integrations.kross.client import KrossClient, Token
from pmsgate.integrations.kross.credentials import Credentials
from pmsgate.integrations.kross.errors import AuthenticationFailed
from pmsgate.storage.tokens import StoredToken, TokenRepository

log = structlog.get_logger(__name__)

# After a refresh ahead of expiry failed, the still-valid token is served this long before the
# next attempt, so a spent budget does not turn every call into another refresh attempt.
REFRESH_RETRY_S = 60.0


@dataclass(frozen=True)
class _Held:
    token: Token
    obtained_at: datetime


def _value(token: Token | str) -> str:
    return token.value.get_secret_value() if isinstance(token, Token) else token


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def _same(held: _Held, value: str) -> bool:
    return hmac.compare_digest(held.token.value.get_secret_value().encode(), value.encode())


@dataclass(repr=False, eq=False, kw_only=True)
class TokenManager:
    """Hands out each facility's current token, fetching a new one once when needed."""

    kross: KrossClient
    sessions: async_sessionmaker[AsyncSession]
    vault: Vault
    clock: Clock
    credentials: Callable[[str], Awaitable[Credentials]]
    acquire_permit: Callable[[str], Awaitable[None]]
    locks: InitVar[Locks | None] = None
    refresh_ahead_s: InitVar[float] = 3600.0
    health: InitVar[RedisHealth | None] = None

    def __post_init__(
        self, locks: Locks | None, refresh_ahead_s: float, health: RedisHealth | None
    ) -> None:
        self._locks: Locks = locks if locks is not None else LocalLocks()
        self._health = health if health is not None else RedisHealth(self.clock)
        self._refresh_ahead = timedelta(seconds=refresh_ahead_s)
        self._held: dict[str, _Held] = {}
        self._refreshes: SingleFlight[Token] = SingleFlight()
        self._invalidations: SingleFlight[None] = SingleFlight()
        # Digest of the last token the upstream rejected, per facility: never reload it from
        # the store while its compare-and-delete is still on the way.
        self._rejected: dict[str, str] = {}
        self._retry_after: dict[str, datetime] = {}

    def __repr__(self) -> str:
        return f"TokenManager(facilities_held={len(self._held)})"

    async def token(self, hotel_id: str) -> Token:
        """The facility's current token; a new one (one get-token for all callers) when due."""
        held = self._held.get(hotel_id)
        if held is not None and (self._fresh(held) or self._deferred(hotel_id, held)):
            return held.token
        return await self._refreshes.run(hotel_id, lambda: self._obtain(hotel_id))

    async def invalidate(self, hotel_id: str, rejected: Token | str) -> None:
        """Forget ``rejected`` after a 401, only if it is still the current token."""
        value = _value(rejected)
        digest = _digest(value)
        self._rejected[hotel_id] = digest
        held = self._held.get(hotel_id)
        if held is not None:
            if not _same(held, value):
                # We already hold a newer token; the stored one is at least as new.
                return
            del self._held[hotel_id]
        # Concurrent 401s for the same token share one compare-and-delete.
        await self._invalidations.run(
            f"{hotel_id}:{digest}", lambda: self._delete_stored(hotel_id, value)
        )

    async def adopt(self, hotel_id: str, token: Token, obtained_at: datetime) -> None:
        """Make ``token`` — obtained elsewhere, e.g. verifying new credentials — the current one.

        A token is a session upstream (at most 50 per facility): the one that proved new
        credentials serves the calls that follow instead of a second one being requested.
        """
        self._rejected.pop(hotel_id, None)
        self._retry_after.pop(hotel_id, None)
        self._held[hotel_id] = _Held(token, obtained_at)
        await self._store(hotel_id, token, obtained_at)

    async def forget(self, hotel_id: str) -> None:
        """Drop the facility's token everywhere (e.g. after its credentials changed)."""
        self._held.pop(hotel_id, None)
        async with self.sessions.begin() as session:
            await TokenRepository(session).delete(hotel_id)

    # --- internals ------------------------------------------------------------------------

    def _fresh(self, held: _Held) -> bool:
        # A token whose whole lifetime is shorter than the refresh margin would be renewed
        # on every call; never refresh earlier than half-way through its lifetime.
        lifetime = held.token.expires_at - held.obtained_at
        ahead = min(self._refresh_ahead, lifetime / 2)
        return self.clock.now() < held.token.expires_at - ahead

    def _deferred(self, hotel_id: str, held: _Held) -> bool:
        retry_after = self._retry_after.get(hotel_id)
        return retry_after is not None and self._valid(held) and self.clock.now() < retry_after

    def _valid(self, held: _Held | None) -> bool:
        return held is not None and not held.token.is_expired(self.clock.now())

    async def _obtain(self, hotel_id: str) -> Token:
        current = self._held.get(hotel_id)
        # Another replica may already have stored a fresh token: no need to queue for the lock.
        stored = await self._load(hotel_id)
        if stored is not None and self._fresh(stored):
            self._held[hotel_id] = stored
            return stored.token
        try:
            async with self._coordinated(hotel_id):
                # Re-check after taking the lock: the holder before us may have just stored one.
                stored = await self._load(hotel_id)
                if stored is not None and self._fresh(stored):
                    self._held[hotel_id] = stored
                    return stored.token
                return await self._fetch(hotel_id)
        except AuthenticationFailed:
            # The gateway service turns this into the facility's error state.
            raise
        except Exception as error:
            # Refreshing ahead of expiry failed (budget, upstream, lock): the current token is
            # still valid, so keep serving with it and try again on a later call.
            fallback = next((h for h in (current, stored) if self._valid(h)), None)
            if fallback is None:
                raise
            log.warning(
                "kross_token_refresh_deferred",
                hotel_id=hotel_id,
                error_type=type(error).__name__,
                expires_at=fallback.token.expires_at.isoformat(),
            )
            self._held[hotel_id] = fallback
            self._retry_after[hotel_id] = self.clock.now() + timedelta(seconds=REFRESH_RETRY_S)
            return fallback.token

    @asynccontextmanager
    async def _coordinated(self, hotel_id: str) -> AsyncIterator[None]:
        """The facility's token lock; SharedStateUnavailable when Redis cannot be asked."""
        held = self._locks.hold(f"token:{hotel_id}")
        with self._health.use("coordinate a token refresh across replicas"):
            await held.__aenter__()
        try:
            yield
        finally:
            try:
                with self._health.use("release the token lock"):
                    await held.__aexit__(*sys.exc_info())
            except SharedStateUnavailable:
                pass  # Redis went away meanwhile: the lock expires after its timeout

    async def _fetch(self, hotel_id: str) -> Token:
        await self.acquire_permit(hotel_id)
        credentials = await self.credentials(hotel_id)
        obtained_at = self.clock.now()
        token = await self.kross.get_token(credentials)
        self._held[hotel_id] = _Held(token, obtained_at)
        self._retry_after.pop(hotel_id, None)
        try:
            await self._store(hotel_id, token, obtained_at)
        except Exception as error:
            # The upstream session is open and the token works: use it here even if other
            # replicas cannot see it (they will get their own, well under the 50-session cap).
            log.warning(
                "kross_token_not_stored", hotel_id=hotel_id, error_type=type(error).__name__
            )
        log.info("kross_token_obtained", hotel_id=hotel_id, expires_at=token.expires_at.isoformat())
        return token

    async def _store(self, hotel_id: str, token: Token, obtained_at: datetime) -> None:
        token_enc = self.vault.encrypt(
            token.value.get_secret_value(), context=facility_context(hotel_id, "token")
        )
        async with self.sessions.begin() as session:
            stored = await TokenRepository(session).put(
                hotel_id, token_enc=token_enc, expires_at=token.expires_at, obtained_at=obtained_at
            )
        if not stored:
            raise NotFound(
                f"No facility with hotel_id {hotel_id} is registered.",
                code="facility_not_found",
                hint="Register it with `pmsgate facilities add`.",
            )

    async def _stored(self, hotel_id: str) -> StoredToken | None:
        async with self.sessions() as session:
            return await TokenRepository(session).get(hotel_id)

    async def _load(self, hotel_id: str) -> _Held | None:
        stored = await self._stored(hotel_id)
        if stored is None:
            return None
        try:
            value = self.vault.decrypt(
                stored.token_enc, context=facility_context(hotel_id, "token")
            )
        except VaultError:
            # E.g. its key was removed from PMSGATE_SECRET_KEYS: fetch a new token instead.
            log.warning("kross_token_unreadable", hotel_id=hotel_id)
            return None
        if self._rejected.get(hotel_id) == _digest(value):
            return None
        token = Token(value=SecretStr(value), expires_at=stored.expires_at)
        return _Held(token, stored.obtained_at)

    async def _delete_stored(self, hotel_id: str, value: str) -> None:
        stored = await self._stored(hotel_id)
        if stored is None:
            return
        try:
            current = self.vault.decrypt(
                stored.token_enc, context=facility_context(hotel_id, "token")
            )
        except VaultError:
            current = None
        if current is not None and not hmac.compare_digest(current.encode(), value.encode()):
            return
        # Compare-and-delete on the ciphertext: a token stored meanwhile is kept.
        async with self.sessions.begin() as session:
            deleted = await TokenRepository(session).delete_if(hotel_id, stored.token_enc)
        if deleted:
            log.info("kross_token_invalidated", hotel_id=hotel_id)
