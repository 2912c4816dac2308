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

import anyio
from redis.asyncio import Redis

from pmsgate.clock import Sleep
from pmsgate.gateway.pubsub import RedisChannel


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
