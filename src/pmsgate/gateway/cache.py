"""The read cache: bounded staleness, coalesced refills, the last good answer on failure.

Storage is cashews (``mem://`` in one process, Redis when replicas share it),
with the JSON pickler: values must be JSON-serialisable, every read returns a
fresh copy (a caller cannot mutate the cache), and nothing from Redis is ever
unpickled. Freshness is judged on the injected :class:`~pmsgate.clock.Clock`
from the stored ``fetched_at``; cashews' own TTL (real time, ``keep_s``) only
bounds how long an entry is kept for the stale fallback.

A refill is coalesced twice: in the process (:class:`~pmsgate.gateway.locks.SingleFlight`,
so 100 concurrent callers share one fetch and its outcome) and across replicas
(a cashews lock on the key, then a re-check of the store before fetching).

Hot path: each entry also has a small *version* key (unique per write). A read
fetches only the version; when this process already holds the decoded entry of
that version (a bounded in-process map), it is returned as is, without decoding
the value again. Values returned by the cache are shared: callers treat them as
read-only. (cashews' own memory backend copies every value, which is exactly the
cost this avoids, hence the small map.) Without Redis that map *is* the store: nothing
is kept in cashews besides it, so a window is held once, not twice.

Memory is bounded by two caps (PMSGATE_CACHE_MAX_ENTRIES, PMSGATE_CACHE_MAX_PARSED):
the decoded entries this process holds (least recently used dropped first), and the
parsed forms of some of them (:meth:`ReadCache.parsed`, e.g. a reservation window as
models, also least recently used first). A parsed form lives only as long as its
entry: it is dropped when the entry is replaced, evicted or invalidated, so it never
keeps an old value alive.

When Redis is away (:mod:`pmsgate.gateway.shared_state`), the cache keeps answering
from that in-process map: an entry this process holds is served with its real age
(``stale`` once older than the caller's bound), a miss is fetched (within the limiter's
outage budget) and kept in the process only, refills are coalesced in the process
alone, and an invalidation drops the process's own copies at once and is applied to
Redis when it is back (before anything is read from it again). Nothing from
``cashews`` is suppressed: its errors mark Redis down once instead of logging a
traceback per call.

Invalidation works on ``:``-separated keys: ``invalidate("123")`` drops the key
``123`` and every key under ``123:``. A refill that was already fetching when
an invalidation touched its key returns its answer but does not store it, so a
read racing a write cannot put pre-write data back into the cache.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
import warnings
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypeVar

from cachetools import LRUCache
from cashews import Cache

from pmsgate.clock import Clock
from pmsgate.gateway.locks import SingleFlight
from pmsgate.gateway.shared_state import RedisHealth, SharedStateUnavailable

T = TypeVar("T")
CacheSource = Literal["upstream", "cache"]
_SEPARATOR = ":"
_UNREACHABLE: Any = object()


@dataclass(frozen=True)
class Cached:
    """A value with its provenance: when it was fetched, how old it is, whether it is stale."""

    value: Any
    fetched_at: datetime
    age_s: float
    stale: bool
    source: CacheSource


@dataclass(frozen=True)
class _Entry:
    value: Any
    fetched_at: datetime


class ReadCache:
    """Cached reads with a per-call freshness bound, shared by replicas through Redis."""

    def __init__(
        self,
        *,
        clock: Clock,
        redis_url: str | None = None,
        namespace: str = "pmsgate",
        keep_s: float = 86400,
        lock_ttl_s: float = 30.0,
        lock_poll_s: float = 0.02,
        max_entries: int = 10_000,
        max_parsed: int = 1_000,
        health: RedisHealth | None = None,
        redis_timeout_s: float = 1.0,
    ) -> None:
        self._clock = clock
        self._namespace = namespace
        self._keep_s = keep_s
        self._lock_ttl_s = lock_ttl_s
        self._lock_poll_s = lock_poll_s
        self._flights: SingleFlight[Cached] = SingleFlight()
        self._decoded: OrderedDict[str, tuple[str, _Entry]] = OrderedDict()
        self._decoded_max = max_entries
        # key → (the held value, its parsed form); only for values held in _decoded.
        self._parsed: LRUCache[str, tuple[Any, Any]] = LRUCache(maxsize=max_parsed)
        self._pending_invalidations: set[str] = set()
        self._cache = Cache(name=f"{namespace}-read-cache")
        self._health = health if health is not None or not redis_url else RedisHealth(clock)
        if redis_url:
            # suppress=False: an outage reaches RedisHealth once (suppress=True would log a
            # traceback per command and answer "missing" for everything).
            self._cache.setup(
                redis_url,
                pickle_type="json",
                suppress=False,
                socket_connect_timeout=redis_timeout_s,
                socket_timeout=redis_timeout_s,
            )
        else:
            self._cache.setup("mem://", pickle_type="json", size=max_entries)
        self.backend: Literal["redis", "memory"] = "redis" if redis_url else "memory"

    def __repr__(self) -> str:
        return f"ReadCache(backend={self.backend}, namespace={self._namespace!r})"

    async def get(
        self,
        key: str,
        *,
        max_age_s: float,
        fetch: Callable[[], Awaitable[Any]],
        stale_on: tuple[type[BaseException], ...] = (),
    ) -> Cached:
        """The value of ``key`` if at most ``max_age_s`` old, else fetched once for all callers.

        When ``fetch`` raises one of ``stale_on`` and an earlier value exists, that value
        is returned with ``stale=True`` and its age; otherwise the error propagates.
        """
        _check_key(key)
        entry = await self._read(key)
        if entry is not None and self._age(entry) <= max_age_s:
            return self._hit(entry, stale=False)
        # Callers with different bounds must not share a flight: a looser bound could
        # accept an entry too old for a stricter one. The lock below still serialises them.
        return await self._flights.run(
            f"{key}\x00{max_age_s!r}",
            lambda: self._refill(key, max_age_s, fetch, stale_on),
        )

    async def peek(self, key: str, *, max_age_s: float | None = None) -> Cached | None:
        """The stored value without fetching; ``stale`` when older than ``max_age_s``."""
        _check_key(key)
        entry = await self._read(key)
        if entry is None:
            return None
        stale = max_age_s is not None and self._age(entry) > max_age_s
        return self._hit(entry, stale=stale)

    def parsed(self, key: str, value: Any, parse: Callable[[Any], T]) -> T:
        """``parse(value)``, computed once while ``value`` is the entry this process holds.

        ``value`` is what :meth:`get` or :meth:`peek` returned for ``key``. The parsed form
        is kept (at most ``max_parsed`` of them, least recently used dropped first) only
        while ``value`` is the held entry of ``key``, and dropped with it; a value the
        process does not hold (a refill raced by an invalidation) is parsed and not kept.
        """
        held = self._decoded.get(key)
        if held is None or held[1].value is not value:
            return parse(value)
        memo = self._parsed.get(key)
        if memo is not None and memo[0] is value:
            result: T = memo[1]
            return result
        result = parse(value)
        self._parsed[key] = (value, result)
        return result

    async def invalidate(self, key_or_prefix: str) -> None:
        """Drop ``key_or_prefix`` and every key under ``key_or_prefix:`` (e.g. one facility)."""
        prefix = key_or_prefix.rstrip(_SEPARATOR)
        _check_key(prefix)
        for held in [k for k in self._decoded if k == prefix or k.startswith(prefix + _SEPARATOR)]:
            self._forget(held)
        self._pending_invalidations.add(prefix)
        await self._shared("invalidate the cache", self._apply_invalidations, None)

    async def _apply_invalidations(self) -> None:
        """Apply the invalidations the store has not seen yet (all of them once Redis is back)."""
        while self._pending_invalidations:
            prefix = next(iter(self._pending_invalidations))
            # Marker first, then delete: a refill already fetching sees the marker change
            # and does not store its (possibly pre-write) answer.
            await self._cache.set(
                self._marker_key(prefix), uuid.uuid4().hex, expire=self._lock_ttl_s + 60
            )
            for stored in (self._entry_key(prefix), self._version_key(prefix)):
                await self._cache.delete(stored)
                await self._cache.delete_match(_glob_prefix(stored + _SEPARATOR) + "*")
            self._pending_invalidations.discard(prefix)

    async def close(self) -> None:
        """Stop refills in flight and close the store's connections."""
        await self._flights.cancel_all()
        with warnings.catch_warnings():
            # cashews 7.x closes its redis-py client with the deprecated close(); not ours to fix.
            warnings.simplefilter("ignore", DeprecationWarning)
            await self._cache.close()

    # --- internals ------------------------------------------------------------------------

    async def _refill(
        self,
        key: str,
        max_age_s: float,
        fetch: Callable[[], Awaitable[Any]],
        stale_on: tuple[type[BaseException], ...],
    ) -> Cached:
        async with self._refill_lock(key):
            # Re-check: another replica (or a flight with another bound) may have just refilled.
            entry = await self._read(key)
            if entry is not None and self._age(entry) <= max_age_s:
                return self._hit(entry, stale=False)
            markers = await self._markers(key)
            started = self._clock.now()
            try:
                value = await fetch()
            except stale_on:
                if entry is None:
                    raise
                return self._hit(entry, stale=True)
            if await self._markers(key) == markers:
                await self._write(key, value, started)
            return Cached(
                value=value,
                fetched_at=started,
                age_s=max(0.0, (self._clock.now() - started).total_seconds()),
                stale=False,
                source="upstream",
            )

    async def _shared(self, what: str, work: Callable[[], Awaitable[T]], fallback: T) -> T:
        """``work()`` on the store, or ``fallback`` when Redis is unreachable."""
        if self._health is None:
            return await work()
        try:
            with self._health.use(what):
                return await work()
        except SharedStateUnavailable:
            return fallback

    @asynccontextmanager
    async def _refill_lock(self, key: str) -> AsyncIterator[None]:
        """The store's lock on ``key``; without Redis, the in-process single flight only.

        Taken and released with cashews' ``set_lock`` / ``unlock`` commands, not its
        ``lock()`` context manager: that one is an async generator, and a release skipped
        because Redis went away left it suspended until the garbage collector finalised it,
        whose ``finally`` then tried Redis in a task nobody awaited ("Task exception was
        never retrieved … CacheBackendInteractionError"). Two commands leave
        nothing behind: an unreleased lock expires in Redis after ``lock_ttl_s``.
        """
        name, owner = self._lock_key(key), uuid.uuid4().hex
        taken = await self._shared(
            "lock a cache refill", lambda: self._take_lock(name, owner), False
        )
        try:
            yield
        finally:
            if taken:
                await self._shared(
                    "unlock a cache refill", lambda: self._cache.unlock(name, owner), None
                )

    async def _take_lock(self, name: str, owner: str) -> bool:
        """Wait until the lock is ours (polling every ``lock_poll_s``, as cashews does)."""
        while True:
            if await self._cache.set_lock(name, owner, expire=self._lock_ttl_s):
                return True
            await asyncio.sleep(self._lock_poll_s)

    async def _read(self, key: str) -> _Entry | None:
        entry = await self._shared("read the cache", lambda: self._read_stored(key), _UNREACHABLE)
        if entry is _UNREACHABLE:
            # Redis is away: what this process holds is all there is.
            held = self._decoded.get(key)
            entry = held[1] if held is not None else None
        # Also bounded on our clock, so keep_s means the same in tests and in production.
        if entry is None or self._age(entry) > self._keep_s:
            return None
        return entry

    async def _read_stored(self, key: str) -> _Entry | None:
        if self._pending_invalidations:
            await self._apply_invalidations()
        if self.backend == "memory":
            # This process is the store's only writer: every entry it holds went through
            # _write (or an earlier read) into the decoded map, with the same bound, and an
            # invalidation drops it from both. Asking cashews for the version too would be
            # the same answer at ~15 % of a cached call's CPU (bench/README.md).
            held = self._decoded.get(key)
            if held is None:
                return None
            self._decoded.move_to_end(key)
            return held[1]
        version = await self._cache.get(self._version_key(key))
        if not isinstance(version, str):
            return None
        held = self._decoded.get(key)
        if held is not None and held[0] == version:
            self._decoded.move_to_end(key)
            return held[1]
        raw = await self._cache.get(self._entry_key(key))
        if not isinstance(raw, dict) or "fetched_at" not in raw:
            return None
        entry = _Entry(value=raw.get("value"), fetched_at=datetime.fromisoformat(raw["fetched_at"]))
        self._remember(key, str(raw.get("version")), entry)
        return entry

    async def _write(self, key: str, value: Any, fetched_at: datetime) -> None:
        # Unique per write: two fetches at the same instant must still differ.
        version = f"{fetched_at.isoformat()}/{uuid.uuid4().hex[:12]}"
        record = {"value": value, "fetched_at": fetched_at.isoformat(), "version": version}
        # Fail here, in memory mode too, rather than only once Redis is configured.
        json.dumps(record)

        async def store() -> None:
            await self._cache.set(self._entry_key(key), record, expire=self._keep_s)
            # The version last: a reader that sees it finds the record it names.
            await self._cache.set(self._version_key(key), version, expire=self._keep_s)

        # Without Redis the answer is kept in this process only (the module docstring);
        # the memory backend keeps it in the decoded map alone (its only reader).
        if self.backend == "redis":
            await self._shared("store in the cache", store, None)
        self._remember(key, version, _Entry(value=value, fetched_at=fetched_at))

    def _remember(self, key: str, version: str, entry: _Entry) -> None:
        self._forget(key)
        self._decoded[key] = (version, entry)
        while len(self._decoded) > self._decoded_max:
            self._forget(next(iter(self._decoded)))

    def _forget(self, key: str) -> None:
        """Drop the held entry of ``key`` and its parsed form."""
        self._decoded.pop(key, None)
        self._parsed.pop(key, None)

    async def _markers(self, key: str) -> tuple[Any, ...]:
        parts = key.split(_SEPARATOR)
        keys = [self._marker_key(_SEPARATOR.join(parts[: i + 1])) for i in range(len(parts))]
        # Without Redis, no replica's invalidation can be seen: the process's own ones
        # already dropped its copies.
        return tuple(await self._shared("read the cache", lambda: self._cache.get_many(*keys), ()))

    def _age(self, entry: _Entry) -> float:
        return max(0.0, (self._clock.now() - entry.fetched_at).total_seconds())

    def _hit(self, entry: _Entry, *, stale: bool) -> Cached:
        return Cached(
            value=entry.value,
            fetched_at=entry.fetched_at,
            age_s=self._age(entry),
            stale=stale,
            source="cache",
        )

    def _entry_key(self, key: str) -> str:
        return f"{self._namespace}:cache:{key}"

    def _version_key(self, key: str) -> str:
        return f"{self._namespace}:cache-ver:{key}"

    def _lock_key(self, key: str) -> str:
        return f"{self._namespace}:cache-lock:{key}"

    def _marker_key(self, key: str) -> str:
        return f"{self._namespace}:cache-inval:{key}"


def _check_key(key: str) -> None:
    # "*" would turn a prefix invalidation into a wildcard; empty keys invalidate everything.
    if not key or "*" in key:
        raise ValueError("cache keys must be non-empty and must not contain '*'")


def _glob_prefix(text: str) -> str:
    """``text`` escaped so that both matchers cashews uses read it literally.

    The memory backend turns the pattern into a regular expression (``*`` → ``.*``),
    Redis reads it as a glob; a backslash before a character is literal in both.
    """
    return re.escape(text)
