"""Coordination primitives: in-process single-flight and locks shared by replicas.

* :class:`SingleFlight` makes concurrent callers of one key share one execution
  and its outcome (value *or* error), so 1,000 callers waiting for a token or a
  cache refill cause one upstream call, and a failing call fails once for all of
  them instead of being retried by each waiter in turn.
* :class:`RedisLocks` (redis-py's asyncio ``Lock``: SET NX PX + a Lua release
  that checks ownership) serialises work across replicas; :class:`LocalLocks`
  is the in-process stand-in when no Redis is configured (one process only).
* :class:`RedisLiveness` tells the replicas which of them are running: each
  process has an instance id and refreshes a short-lived Redis key while it
  runs, so a write left in flight by a process that died is known to be
  abandoned within seconds; :class:`LocalLiveness` is the stand-in without Redis
  (one process: any other owner is a process that has ended).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import KW_ONLY, dataclass
from typing import Generic, Protocol, TypeVar
from weakref import WeakValueDictionary

import anyio
import structlog
from redis.asyncio import Redis
from redis.exceptions import LockError, RedisError

from pmsgate.errors import PmsgateError

log = structlog.get_logger(__name__)

T = TypeVar("T")


class LockUnavailable(PmsgateError):
    """Another replica held a coordination lock for longer than we may wait."""

    code = "gateway_busy"
    status = 503
    hint = "Another gateway replica is doing the same work right now; retry in a few seconds."

    def __init__(self, name: str, wait_s: float) -> None:
        super().__init__(
            f"Could not get the {name.split(':', 1)[0]} lock within {wait_s:g} s.",
            headers={"Retry-After": "1"},
        )


class SingleFlight(Generic[T]):
    """One execution per key at a time; concurrent callers of that key share its outcome.

    cashews' ``thunder_protection`` does the same, but awaits the shared task
    without ``asyncio.shield``: one cancelled caller (a client hanging up) would
    cancel the work for every other waiter. Here the work runs in its own task,
    each caller waits on a shield, and the work finishes (filling the cache or
    the token store) even if every caller has gone.
    """

    def __init__(self) -> None:
        self._flights: dict[str, asyncio.Task[T]] = {}

    async def run(self, key: str, work: Callable[[], Awaitable[T]]) -> T:
        """The outcome of ``work()``, started now unless a call for ``key`` is in flight."""
        task = self._flights.get(key)
        if task is None:

            async def _run() -> T:
                return await work()

            task = asyncio.create_task(_run(), name=f"single-flight:{key}")
            self._flights[key] = task
            task.add_done_callback(lambda done: self._landed(key, done))
        return await asyncio.shield(task)

    async def cancel_all(self) -> None:
        """Cancel every call in flight and wait for them to end (on shutdown)."""
        tasks = list(self._flights.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _landed(self, key: str, task: asyncio.Task[T]) -> None:
        if self._flights.get(key) is task:
            del self._flights[key]
        # Mark the error as seen: every caller may have been cancelled before it landed.
        if not task.cancelled():
            task.exception()


class Locks(Protocol):
    """Named mutual exclusion; across replicas when backed by Redis."""

    def hold(self, name: str) -> AbstractAsyncContextManager[None]:
        """Hold the lock ``name`` for the duration of the ``async with`` block."""
        ...


class LocalLocks:
    """In-process locks by name: enough for one process, used when no Redis is configured."""

    def __init__(self) -> None:
        self._locks: WeakValueDictionary[str, anyio.Lock] = WeakValueDictionary()

    @asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[None]:
        """Hold the in-process lock ``name``."""
        lock = self._locks.get(name)
        if lock is None:
            lock = anyio.Lock()
            self._locks[name] = lock
        async with lock:
            yield


@dataclass(frozen=True)
class RedisLocks:
    """Locks shared by every replica on one Redis (redis-py asyncio ``Lock``).

    ``timeout_s`` bounds how long a crashed holder can block the others (the key
    expires); ``wait_s`` bounds how long a caller queues before giving up.
    """

    redis: Redis
    _: KW_ONLY
    namespace: str = "pmsgate"
    timeout_s: float = 30.0
    wait_s: float = 30.0
    poll_s: float = 0.02

    @asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[None]:
        """Hold the Redis lock ``name``; LockUnavailable when it stays taken for ``wait_s``."""
        lock = self.redis.lock(
            f"{self.namespace}:lock:{name}",
            timeout=self.timeout_s,
            sleep=self.poll_s,
            blocking_timeout=self.wait_s,
        )
        if not await lock.acquire():
            raise LockUnavailable(name, self.wait_s)
        try:
            yield
        finally:
            try:
                await lock.release()
            except LockError:
                # It expired while held (the work outlasted timeout_s); another replica may
                # already own it, and redis-py refuses to release a lock we no longer own.
                log.warning("lock_expired_while_held", lock=name, timeout_s=self.timeout_s)


def locks_for(
    redis: Redis | None,
    *,
    namespace: str = "pmsgate",
    timeout_s: float = 30.0,
    wait_s: float = 30.0,
) -> Locks:
    """Redis locks when Redis is configured, in-process locks otherwise."""
    if redis is None:
        return LocalLocks()
    return RedisLocks(redis, namespace=namespace, timeout_s=timeout_s, wait_s=wait_s)


def new_instance_id() -> str:
    """A fresh id for this process (a restarted process is another instance)."""
    return uuid.uuid4().hex


class Liveness(Protocol):
    """Which gateway processes are running; this process is ``instance_id``."""

    instance_id: str

    async def is_alive(self, instance_id: str) -> bool:
        """False only when ``instance_id`` is known to have stopped."""
        ...

    async def aclose(self) -> None:
        """Stop announcing this process."""
        ...


class LocalLiveness:
    """Without Redis there is one process: an owner other than this one has ended."""

    def __init__(self, instance_id: str | None = None) -> None:
        self.instance_id = instance_id or new_instance_id()

    async def is_alive(self, instance_id: str) -> bool:
        """True only for this process."""
        return instance_id == self.instance_id

    async def aclose(self) -> None:
        """Nothing to stop."""


class RedisLiveness:
    """A key per process, ``<namespace>:instance:<id>``, expiring ``ttl_s`` after its last refresh.

    A background task refreshes it every ``beat_s`` while the process runs; a process that
    is killed stops refreshing and its key expires. While Redis cannot be asked, every
    process counts as alive (the caller falls back to its timeout).
    """

    def __init__(
        self,
        redis: Redis,
        *,
        namespace: str = "pmsgate",
        ttl_s: float = 15.0,
        beat_s: float = 5.0,
        instance_id: str | None = None,
    ) -> None:
        self.instance_id = instance_id or new_instance_id()
        self._redis = redis
        self._namespace = namespace
        self._ttl_ms = int(ttl_s * 1000)
        self._beat_s = beat_s
        self._task: asyncio.Task[None] | None = None

    def _key(self, instance_id: str) -> str:
        return f"{self._namespace}:instance:{instance_id}"

    async def start(self) -> None:
        """Announce this process now and keep announcing it in the background."""
        await self._beat()
        self._task = asyncio.create_task(self._run(), name=f"liveness:{self.instance_id}")

    async def is_alive(self, instance_id: str) -> bool:
        """False when the process's key has expired (it stopped refreshing it)."""
        if instance_id == self.instance_id:
            return True
        try:
            return bool(await self._redis.exists(self._key(instance_id)))
        except RedisError:
            return True

    async def aclose(self) -> None:
        """Stop refreshing and withdraw the key: this process is no longer running writes."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        with contextlib.suppress(RedisError):  # otherwise the key expires by itself
            await self._redis.delete(self._key(self.instance_id))

    async def _run(self) -> None:
        while True:
            await anyio.sleep(self._beat_s)
            await self._beat()

    async def _beat(self) -> None:
        try:
            await self._redis.set(self._key(self.instance_id), "1", px=self._ttl_ms)
        except RedisError:
            log.debug("liveness_refresh_failed", instance_id=self.instance_id)


async def liveness_for(redis: Redis | None, *, namespace: str = "pmsgate") -> Liveness:
    """Redis liveness (started) when Redis is configured, in-process knowledge otherwise."""
    if redis is None:
        return LocalLiveness()
    liveness = RedisLiveness(redis, namespace=namespace)
    await liveness.start()
    return liveness
