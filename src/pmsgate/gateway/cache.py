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
import math
import re
import time
import uuid
import warnings
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypeVar

from cachetools import LRUCache
from cashews import Cache
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from pmsgate.clock import Clock
from pmsgate.gateway.locks import SingleFlight
from pmsgate.gateway.pubsub import RedisChannel
from pmsgate.gateway.shared_state import RedisHealth, SharedStateUnavailable

T = TypeVar("T")
CacheSource = Literal["upstream", "cache"]
_SEPARATOR = ":"
_UNREACHABLE: Any = object()


@dataclass(frozen=True)
class Cached:
    """A value with its provenance: when it was fetched, how old it is, whether it is stale.

    ``version`` names the stored entry the value is (unique per write), None when the
    value is not held by this process (a refill raced by an invalidation): what an answer
    rendered from it may be kept by (:class:`pmsgate.gateway.tools.Tools`).
    """

    value: Any
    fetched_at: datetime
    age_s: float
    stale: bool
    source: CacheSource
    version: str | None = None


@dataclass(frozen=True, slots=True)
class _Entry:
    value: Any
    fetched_at: datetime
    version: str


class _Held:
    """An entry this process holds, and when Redis last confirmed it is the latest
    (:func:`time.monotonic`; ``-inf``: to be checked on its next read)."""

    __slots__ = ("confirmed", "entry")

    def __init__(self, entry: _Entry, confirmed: float) -> None:
        self.entry = entry
        self.confirmed = confirmed


class CacheChanges(RedisChannel):
    """The read cache's writes and invalidations, heard by every other replica's cache.

    A message is ``<origin> <w|i> <key>``: ``w``, a new entry of ``key`` was stored (the held
    one is checked against Redis on its next read); ``i``, ``key`` and every key under it
    were invalidated (the held ones are dropped). A process ignores its own messages.
    """

    not_published = "cache_change_not_published"
    unheard = "cache_changes_unheard"
    heard_again = "cache_changes_heard_again"

    def __init__(self, cache: ReadCache, redis: Redis, channel: str, retry_interval_s: float):
        super().__init__(redis, channel, retry_interval_s=retry_interval_s)
        self._cache = cache

    def _heard(self, data: str) -> None:
        origin, _, rest = data.partition(" ")
        kind, _, key = rest.partition(" ")
        self._cache._changed(origin, kind, key)

    def _subscribed(self) -> None:
        self._cache._resubscribed()


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
        trust_s: float = 2.0,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self._namespace = namespace
        self._keep_s = keep_s
        self._lock_ttl_s = lock_ttl_s
        self._lock_poll_s = lock_poll_s
        self._flights: SingleFlight[Cached] = SingleFlight()
        # One store read per key at a time (see _read).
        self._reads: SingleFlight[Any] = SingleFlight()
        self._decoded: OrderedDict[str, _Held] = OrderedDict()
        self._decoded_max = max_entries
        self.max_entries = max_entries
        # With Redis: a held entry is served without asking Redis for its version while the
        # cache's channel is heard and Redis confirmed it at most trust_s ago (see listen()).
        self._trust_s = trust_s
        self._timer = timer
        self._changes: CacheChanges | None = None
        self._trusted_since = math.inf  # the last (re)subscription; nothing trusted before
        self._heard = 0  # changes heard: a read that overlapped one confirms nothing
        self._origin = uuid.uuid4().hex[:16]
        self._stack = AsyncExitStack()
        # Reads sent to Redis for a held or wanted entry (its version, its record): what a
        # hit costs when it is not served from the held entry alone (tests, benchmarks).
        self.store_reads = 0
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
                # A connection dropped by a Redis restart is re-opened once, at once (as the
                # container's client): a replica whose hits never touched Redis during an
                # outage would otherwise find its pooled connection dead on the first read.
                retry=Retry(ExponentialBackoff(cap=0.05, base=0.01), retries=1),
            )
        else:
            self._cache.setup("mem://", pickle_type="json", size=max_entries)
        self.backend: Literal["redis", "memory"] = "redis" if redis_url else "memory"

    def __repr__(self) -> str:
        return f"ReadCache(backend={self.backend}, namespace={self._namespace!r})"

    async def listen(self, redis: Redis | None, *, retry_interval_s: float = 2.0) -> None:
        """Hear the other replicas' writes and invalidations until :meth:`close`.

        While heard, a cache hit costs no Redis round trip: the held entry is served as it
        is, checked against Redis at most every ``trust_s`` seconds (a bound on how long a
        lost message can go unseen). A write elsewhere makes the held entry be checked on
        its next read; an invalidation drops it at once. While not heard (before the first
        subscription, after a fault until subscribed again), every read asks Redis for the
        entry's version, as without this. Without Redis, nothing to hear: this process is
        the only writer.
        """
        if self.backend != "redis" or redis is None or self._changes is not None:
            return
        self._changes = await self._stack.enter_async_context(
            CacheChanges(
                self, redis, f"{self._namespace}:cache-changed", retry_interval_s=retry_interval_s
            )
        )

    @property
    def heard(self) -> CacheChanges | None:
        """The channel this cache listens on (None when it does not)."""
        return self._changes

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
        if held is None or held.entry.value is not value:
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
        self._forget_under(prefix)
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
            await self._publish("i", prefix)
            self._pending_invalidations.discard(prefix)

    async def close(self) -> None:
        """Stop refills in flight and listening, close the store's connections."""
        await self._flights.cancel_all()
        await self._reads.cancel_all()
        await self._stack.aclose()
        self._changes = None
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
            entry = await self._read(key, confirm=True)
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
            version = None
            if await self._markers(key) == markers:
                version = await self._write(key, value, started)
            return Cached(
                value=value,
                fetched_at=started,
                age_s=max(0.0, (self._clock.now() - started).total_seconds()),
                stale=False,
                source="upstream",
                version=version,
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

    async def _read(self, key: str, *, confirm: bool = False) -> _Entry | None:
        held = self._decoded.get(key)
        entry: Any
        if held is not None and not confirm and self._trusted(held):
            self._decoded.move_to_end(key)
            entry = held.entry
        elif confirm:
            entry = await self._read_from_store(key)
        else:
            # The hits that find the held entry due (trust_s ran out, a write heard) share
            # one read: under load every hit in flight at that moment would otherwise ask
            # Redis at once, and the last of them waits for all the round trips before it.
            entry = await self._reads.run(key, lambda: self._read_from_store(key))
        if entry is _UNREACHABLE:
            # Redis is away: what this process holds is all there is.
            held = self._decoded.get(key)
            entry = held.entry if held is not None else None
        # Also bounded on our clock, so keep_s means the same in tests and in production.
        if entry is None or self._age(entry) > self._keep_s:
            return None
        return entry

    async def _read_from_store(self, key: str) -> Any:
        """The stored entry of ``key`` (None when absent), or _UNREACHABLE."""
        return await self._shared("read the cache", lambda: self._read_stored(key), _UNREACHABLE)

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
            return held.entry
        heard = self._heard
        self.store_reads += 1
        version = await self._cache.get(self._version_key(key))
        if not isinstance(version, str):
            return None
        # Confirmed now, unless a change was heard while Redis answered (it may be newer).
        confirmed = self._timer() if heard == self._heard else -math.inf
        held = self._decoded.get(key)
        if held is not None and held.entry.version == version:
            self._decoded.move_to_end(key)
            held.confirmed = confirmed
            return held.entry
        self.store_reads += 1
        raw = await self._cache.get(self._entry_key(key))
        if not isinstance(raw, dict) or "fetched_at" not in raw:
            return None
        entry = _Entry(
            value=raw.get("value"),
            fetched_at=datetime.fromisoformat(raw["fetched_at"]),
            version=str(raw.get("version")),
        )
        self._remember(key, entry, confirmed if entry.version == version else -math.inf)
        return entry

    def _trusted(self, held: _Held) -> bool:
        """Whether ``held`` may be served without asking Redis (see :meth:`listen`)."""
        if self.backend == "memory":
            return True  # this process is the store's only writer
        changes = self._changes
        return (
            changes is not None
            and changes.listening
            and not self._pending_invalidations
            and held.confirmed >= self._trusted_since
            and self._timer() - held.confirmed <= self._trust_s
        )

    def _changed(self, origin: str, kind: str, key: str) -> None:
        """Another replica stored ``key`` (``w``) or invalidated it and the keys under it."""
        if origin == self._origin or not key:
            return
        self._heard += 1
        if kind == "i":
            self._forget_under(key)
        else:
            held = self._decoded.get(key)
            if held is not None:
                held.confirmed = -math.inf

    def _resubscribed(self) -> None:
        """What was published while this process was not listening is unknown."""
        self._heard += 1
        self._trusted_since = self._timer()

    async def _publish(self, kind: str, key: str) -> None:
        if self._changes is not None:
            await self._changes.publish(f"{self._origin} {kind} {key}")

    async def _write(self, key: str, value: Any, fetched_at: datetime) -> str:
        # Unique per write: two fetches at the same instant must still differ.
        version = f"{fetched_at.isoformat()}/{uuid.uuid4().hex[:12]}"
        record = {"value": value, "fetched_at": fetched_at.isoformat(), "version": version}
        # Fail here, in memory mode too, rather than only once Redis is configured.
        json.dumps(record)

        async def store() -> None:
            await self._cache.set(self._entry_key(key), record, expire=self._keep_s)
            # The version last: a reader that sees it finds the record it names.
            await self._cache.set(self._version_key(key), version, expire=self._keep_s)
            await self._publish("w", key)

        # Without Redis the answer is kept in this process only (the module docstring);
        # the memory backend keeps it in the decoded map alone (its only reader).
        if self.backend == "redis":
            await self._shared("store in the cache", store, None)
        entry = _Entry(value=value, fetched_at=fetched_at, version=version)
        self._remember(key, entry, self._timer())
        return version

    def _remember(self, key: str, entry: _Entry, confirmed: float) -> None:
        self._forget(key)
        self._decoded[key] = _Held(entry, confirmed)
        while len(self._decoded) > self._decoded_max:
            self._forget(next(iter(self._decoded)))

    def _forget_under(self, prefix: str) -> None:
        """Drop the held entries of ``prefix`` and of every key under ``prefix:``."""
        for held in [k for k in self._decoded if k == prefix or k.startswith(prefix + _SEPARATOR)]:
            self._forget(held)

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
            version=entry.version,
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
