"""Key changes reach every replica at once: published through Redis, the cache the fallback.

Each gateway process remembers a checked gateway key for ``PMSGATE_GATEWAY_KEY_CACHE_S``
(:class:`~pmsgate.gateway.key_check.KeyCheck`), so a cached tool call needs no
database query. A key revoked, expired (a rotation's ``--grace 0m``), given other scopes,
or a facility whose limits or status changed, must not keep working on another replica for
those seconds. So every such change is **published** on a Redis channel
(``<namespace>:gateway-keys-changed``) after its transaction commits, and every process —
replicas, and the CLI's own container — listens on it and drops its remembered key checks
when a message arrives. Redis delivers a message in milliseconds; the measured delay is in
docs/gateway.md.

Why pub/sub and not a version key read per request: a version key costs a Redis round trip
on every call, the cached ones included, which the key cache exists to avoid; a published
message costs nothing per call. What pub/sub loses — a message sent while a listener was
disconnected — is covered twice: a listener that (re)subscribes drops everything it
remembers (it may have missed a change), and the key cache's own expiry still bounds how
long a missed change can go unseen. While Redis is away, a change is seen by the other
replicas within ``PMSGATE_GATEWAY_KEY_CACHE_S``, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

import anyio
from cachetools import TTLCache
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import Clock, Sleep
from pmsgate.gateway.pubsub import RedisChannel
from pmsgate.storage.records import Records

# Credentials whose check is remembered, per process (gateway keys, OAuth access tokens).
CHECK_CACHE_SIZE = 10_000
Checked = TypeVar("Checked")


class KeyChanges(RedisChannel):
    """Publishes "gateway keys changed" to every process and applies what others publish.

    ``forget`` is what a message does here: the facility service's key cache clear.
    Without Redis it does nothing: one process, whose own changes clear its cache directly.
    """

    not_published = "gateway_key_change_not_published"
    unheard = "gateway_key_changes_unheard"
    heard_again = "gateway_key_changes_heard_again"

    def __init__(
        self,
        redis: Redis | None,
        *,
        namespace: str = "pmsgate",
        retry_interval_s: float = 2.0,
        poll_s: float = 1.0,
        sleep: Sleep = anyio.sleep,
    ) -> None:
        super().__init__(
            redis,
            f"{namespace}:gateway-keys-changed",
            retry_interval_s=retry_interval_s,
            poll_s=poll_s,
            sleep=sleep,
        )
        self._forget: list[Callable[[], None]] = []

    def on_change(self, forget: Callable[[], None]) -> None:
        """Call ``forget`` when another process (or this one) publishes a change."""
        self._forget.append(forget)

    def _heard(self, data: str) -> None:
        self._apply()

    def _subscribed(self) -> None:
        # Changes published while this process was not subscribed are unknown: forget all.
        self._apply()

    def _apply(self) -> None:
        for forget in self._forget:
            forget()


class CheckMemory(Generic[Checked]):
    """Checked credentials (by their SHA-256) remembered for ``cache_s`` of the clock (0:
    none), all forgotten when a key change is heard or made here (:class:`KeyChanges`).

    Refusals are never remembered: a credential issued a moment ago works at once.
    """

    def __init__(self, clock: Clock, cache_s: float, key_changes: KeyChanges | None = None) -> None:
        self._cache: TTLCache[str, Checked] | None = None
        if cache_s > 0:
            # Expiry on the injected clock (a test advances it), in seconds.
            seconds = lambda: clock.now().timestamp()  # noqa: E731
            self._cache = TTLCache(maxsize=CHECK_CACHE_SIZE, ttl=cache_s, timer=seconds)
        # Changes published and heard through Redis; None alone (one process).
        self.key_changes = key_changes
        if key_changes is not None:
            key_changes.on_change(self.forget)

    def __repr__(self) -> str:
        return f"CheckMemory(on={self.on})"

    @property
    def on(self) -> bool:
        return self._cache is not None

    def get(self, digest: str) -> Checked | None:
        """What was remembered for a credential, if anything."""
        return None if self._cache is None else self._cache.get(digest)

    def keep(self, digest: str, checked: Checked) -> None:
        """Remember a credential's successful check."""
        if self._cache is not None:
            self._cache[digest] = checked

    def forget(self) -> None:
        """Drop everything remembered in this process."""
        if self._cache is not None:
            self._cache.clear()

    async def changed(self) -> None:
        """A change was committed: forgotten here at once, and published to every process."""
        self.forget()
        if self.key_changes is not None:
            await self.key_changes.publish()


class CachedCheck(Records, Generic[Checked]):
    """A check of presented credentials (gateway keys, OAuth access tokens) that remembers
    its successes for ``cache_s`` (:class:`CheckMemory`), forgotten on every key change."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        clock: Clock,
        *,
        cache_s: float = 0.0,
        key_changes: KeyChanges | None = None,
    ) -> None:
        super().__init__(sessions, clock)
        self._memory = CheckMemory[Checked](clock, cache_s, key_changes)
        self.key_changes = key_changes

    async def changed(self) -> None:
        """A change was committed: forgotten here at once, and published to every process."""
        await self._memory.changed()
