"""Key changes reach every replica at once: published through Redis, the cache the fallback.

Each gateway process remembers a checked gateway key for ``PMSGATE_GATEWAY_KEY_CACHE_S``
(:class:`~pmsgate.gateway.facilities.FacilityService`), so a cached tool call needs no
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

import asyncio
import contextlib
from collections.abc import Callable
from types import TracebackType

import anyio
import structlog
from redis.asyncio import Redis

from pmsgate.clock import Sleep
from pmsgate.gateway.shared_state import REDIS_ERRORS

log = structlog.get_logger(__name__)


class KeyChanges:
    """Publishes "gateway keys changed" to every process and applies what others publish.

    ``forget`` is what a message does here: the facility service's key cache clear. Used as
    an async context manager, it listens in a task of its own until the context ends.
    Without Redis it does nothing: one process, whose own changes clear its cache directly.
    """

    def __init__(
        self,
        redis: Redis | None,
        *,
        namespace: str = "pmsgate",
        retry_interval_s: float = 2.0,
        poll_s: float = 1.0,
        sleep: Sleep = anyio.sleep,
    ) -> None:
        self._redis = redis
        self.channel = f"{namespace}:gateway-keys-changed"
        self._retry_interval_s = retry_interval_s
        self._poll_s = poll_s
        self._sleep = sleep
        self._forget: list[Callable[[], None]] = []
        self._task: asyncio.Task[None] | None = None
        self._down = False
        # Messages applied since start, and an event set at each (tests wait on it).
        self.applied = 0
        self._applied_event = anyio.Event()
        self.subscribed = anyio.Event()

    def __repr__(self) -> str:
        return f"KeyChanges(channel={self.channel!r}, listening={self._task is not None})"

    def on_change(self, forget: Callable[[], None]) -> None:
        """Call ``forget`` when another process (or this one) publishes a change."""
        self._forget.append(forget)

    async def publish(self) -> None:
        """Tell every process that keys changed; a Redis fault is logged, never raised (the
        change is committed; the others' key caches expire meanwhile)."""
        if self._redis is None:
            return
        try:
            await self._redis.publish(self.channel, "1")
        except REDIS_ERRORS as error:
            log.warning("gateway_key_change_not_published", error_type=type(error).__name__)

    async def wait_applied(self, count: int) -> None:
        """Return once ``count`` messages have been applied in this process."""
        while self.applied < count:
            await self._applied_event.wait()

    async def __aenter__(self) -> KeyChanges:
        if self._redis is not None:
            self._task = asyncio.get_running_loop().create_task(
                self._listen(), name="gateway-key-changes"
            )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _apply(self) -> None:
        for forget in self._forget:
            forget()

    async def _listen(self) -> None:
        """Subscribe, apply every message; after a fault, subscribe again (and forget all)."""
        assert self._redis is not None
        while True:
            try:
                async with self._redis.pubsub() as pubsub:
                    await pubsub.subscribe(self.channel)
                    while True:
                        message = await pubsub.get_message(timeout=self._poll_s)
                        if message is not None:
                            self._received(message["type"])
            except REDIS_ERRORS as error:
                if not self._down:
                    self._down = True
                    log.warning("gateway_key_changes_unheard", error_type=type(error).__name__)
                await self._sleep(self._retry_interval_s)

    def _received(self, kind: str | bytes) -> None:
        kind = kind.decode() if isinstance(kind, bytes) else kind
        if kind == "subscribe":
            # Changes published while this process was not subscribed are unknown: forget all.
            self._apply()
            if self._down:
                self._down = False
                log.info("gateway_key_changes_heard_again")
            self.subscribed.set()
        elif kind == "message":
            self._apply()
            self.applied += 1
            event, self._applied_event = self._applied_event, anyio.Event()
            event.set()
