"""One Redis pub/sub channel shared by every gateway process (:class:`RedisChannel`).

Used where a change made by one process must reach the others at once without a Redis
round trip per request: gateway-key changes (:mod:`pmsgate.gateway.key_cache`) and the read
cache's writes and invalidations (:mod:`pmsgate.gateway.cache`). Pub/sub delivers at most
once: a message sent while a listener was disconnected is lost, so each user also bounds
how long it trusts what it holds, and a (re)subscription assumes anything changed.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import KW_ONLY, dataclass, field
from typing import Self

import anyio
import structlog
from redis.asyncio import Redis

from pmsgate.clock import Sleep
from pmsgate.gateway.shared_state import REDIS_ERRORS

log = structlog.get_logger(__name__)


@dataclass(repr=False, eq=False)
class RedisChannel:
    """One Redis pub/sub channel: publish a line to every process, hear what others publish.

    Used as an async context manager, it listens in a task of its own until the context
    ends; after a fault it subscribes again every ``retry_interval_s``. Subclasses say what a
    message does (:meth:`_heard`) and what a (re)subscription does (:meth:`_subscribed`):
    messages published while a process was not subscribed are lost, so a subscription must
    assume anything changed. :attr:`listening` is True only while subscribed with no fault
    seen since. Without Redis it does nothing.
    """

    # The log lines of this channel (a subclass names its own).
    not_published = "redis_channel_not_published"
    unheard = "redis_channel_unheard"
    heard_again = "redis_channel_heard_again"

    redis: Redis | None
    channel: str
    _: KW_ONLY
    retry_interval_s: float = 2.0
    poll_s: float = 1.0
    sleep: Sleep = anyio.sleep
    _task: asyncio.Task[None] | None = field(default=None, init=False)
    _down: bool = field(default=False, init=False)
    listening: bool = field(default=False, init=False)
    # Messages applied since start, and an event set at each (tests wait on it).
    applied: int = field(default=0, init=False)
    _applied_event: anyio.Event = field(default_factory=anyio.Event, init=False)
    subscribed: anyio.Event = field(default_factory=anyio.Event, init=False)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(channel={self.channel!r}, listening={self.listening})"

    async def publish(self, text: str = "1") -> None:
        """Send ``text`` to every process; a Redis fault is logged, never raised (what
        changed is committed; the listeners' own expiry covers a lost message)."""
        if self.redis is None:
            return
        try:
            await self.redis.publish(self.channel, text)
        except REDIS_ERRORS as error:
            log.warning(self.not_published, error_type=type(error).__name__)

    async def wait_applied(self, count: int) -> None:
        """Return once ``count`` messages have been applied in this process."""
        while self.applied < count:
            await self._applied_event.wait()

    async def __aenter__(self) -> Self:
        if self.redis is not None:
            self._task = asyncio.get_running_loop().create_task(
                self._listen(), name=f"listen:{self.channel}"
            )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.listening = False
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _heard(self, data: str) -> None:
        """A message from any process (this one included)."""

    def _subscribed(self) -> None:
        """Subscribed (again): what was published meanwhile is unknown."""

    async def _listen(self) -> None:
        """Subscribe, apply every message; after a fault, subscribe again."""
        assert self.redis is not None
        while True:
            try:
                async with self.redis.pubsub() as pubsub:
                    await pubsub.subscribe(self.channel)
                    while True:
                        message = await pubsub.get_message(timeout=self.poll_s)
                        if message is not None:
                            self._received(message["type"], message.get("data"))
            except REDIS_ERRORS as error:
                self.listening = False
                if not self._down:
                    self._down = True
                    log.warning(self.unheard, error_type=type(error).__name__)
                await self.sleep(self.retry_interval_s)
            finally:
                self.listening = False

    def _received(self, kind: str | bytes, data: object) -> None:
        kind = kind.decode() if isinstance(kind, bytes) else kind
        if kind == "subscribe":
            self._subscribed()
            self.listening = True
            if self._down:
                self._down = False
                log.info(self.heard_again)
            self.subscribed.set()
        elif kind == "message":
            text = data.decode() if isinstance(data, bytes) else str(data)
            self._heard(text)
            self.applied += 1
            event, self._applied_event = self._applied_event, anyio.Event()
            event.set()
