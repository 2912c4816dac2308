"""Tool answers kept rendered: a cache hit is bytes out, not a new answer.

A tool's answer is a function of its arguments, the day (defaults such as "today") and the
cached reads it was made from. So the JSON bytes of an answer are kept per (facility,
tool, request body, day) together with the *versions* of the reads it was made from
(:attr:`pmsgate.gateway.cache.Cached.version`, unique per stored entry). The next call with
the same body is answered with those bytes as long as every read is still the entry of
that version, fresh, and not yet due for its background refresh; only the answer's
``meta.age_s`` is written anew. Anything else — a read replaced, invalidated, evicted,
stale or due for refresh, a facility in ``error`` — and the answer is made again (and
kept again), exactly as without this: so a kept answer goes out of date with its reads,
never on its own.

Bounded: at most ``max_answers`` answers (``PMSGATE_CACHE_MAX_ENTRIES``, the same cap as
the entries the read cache holds), least recently used dropped first; a body longer than
:data:`MAX_KEPT_BODY` bytes is never kept (real tool arguments are tens of bytes). The
bytes are those :class:`starlette.responses.JSONResponse` would send for the answer.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Hashable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from cachetools import LRUCache

from pmsgate.gateway.cache import Cached, ReadCache

# The longest request body whose answer is kept.
MAX_KEPT_BODY = 1024
# The meta fields written anew on every answer (the first three, in this order).
_LIVE_META = ("source", "age_s", "stale")


def render_json(content: Any) -> bytes:
    """``content`` as :class:`~starlette.responses.JSONResponse` renders it."""
    return json.dumps(
        content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
    ).encode("utf-8")


class Rendered:
    """An answer as the bytes of its HTTP body, with its ``meta`` and its arguments."""

    __slots__ = ("arguments", "body", "meta")

    def __init__(self, body: bytes, meta: dict[str, Any], arguments: dict[str, Any]) -> None:
        self.body = body
        self.meta = meta
        self.arguments = arguments


class _Read:
    """A cached read an answer was made from."""

    __slots__ = ("key", "max_age_s", "version")

    def __init__(self, key: str, max_age_s: float, version: str) -> None:
        self.key = key
        self.max_age_s = max_age_s
        self.version = version


@dataclass(slots=True, eq=False)
class _Kept:
    """A kept answer: its bytes around ``age_s``, its reads, the read its age is from."""

    head: bytes
    tail: bytes
    reads: tuple[_Read, ...]
    aged: int
    meta: dict[str, Any]
    arguments: dict[str, Any]


class _Recording:
    """The cached reads of one answer being made, and the one its ``meta`` came from."""

    __slots__ = ("meta_from", "reads")

    def __init__(self) -> None:
        self.reads: list[tuple[str, float, Cached]] = []
        self.meta_from: Cached | None = None


_RECORDING: ContextVar[_Recording | None] = ContextVar("pmsgate_answer_reads", default=None)


def record_read(key: str, max_age_s: float, cached: Cached) -> None:
    """A tool read ``key`` (the cache's full key) for the answer being made, if recorded."""
    recording = _RECORDING.get()
    if recording is not None:
        recording.reads.append((key, max_age_s, cached))


def record_meta(cached: Cached) -> None:
    """The answer being made takes its ``meta`` (source, age, stale) from ``cached``."""
    recording = _RECORDING.get()
    if recording is not None:
        recording.meta_from = cached


class RenderedAnswers:
    """The kept answers of one process (see the module docstring)."""

    def __init__(
        self,
        cache: ReadCache,
        *,
        max_answers: int,
        refresh_ahead_ratio: float,
        on_hit: Callable[[int], None],
    ) -> None:
        self._cache = cache
        self._kept: LRUCache[Hashable, _Kept] = LRUCache(maxsize=max_answers)
        self._refresh_ahead_ratio = refresh_ahead_ratio
        self._on_hit = on_hit  # the reads answered from the cache, as each read would count

    def __len__(self) -> int:
        return len(self._kept)

    async def answer(self, key: Hashable) -> Rendered | None:
        """The kept answer of ``key`` if every read it was made from still stands."""
        kept = self._kept.get(key)
        if kept is None:
            return None
        age = 0.0
        for index, read in enumerate(kept.reads):
            cached = await self._cache.peek(read.key)
            if cached is None or cached.version != read.version:
                self._kept.pop(key, None)
                return None
            if cached.age_s >= min(read.max_age_s, self._refresh_ahead_ratio * read.max_age_s):
                return None  # due for a refresh (or stale): made again, which refreshes it
            if index == kept.aged:
                age = round(cached.age_s, 1)
        self._on_hit(len(kept.reads))
        meta = {"source": "cache", "age_s": age, "stale": False, **kept.meta}
        return Rendered(kept.head + repr(age).encode() + kept.tail, meta, kept.arguments)

    async def make(
        self,
        key: Hashable | None,
        arguments: dict[str, Any],
        make: Callable[[], Awaitable[tuple[dict[str, Any], dict[str, Any]]]],
    ) -> Rendered:
        """The answer ``make()`` returns (data, meta), rendered; kept under ``key`` when it
        was made from fresh reads this process holds (``key`` None: never kept)."""
        recording = _Recording()
        token = _RECORDING.set(recording)
        try:
            data, meta = await make()
        finally:
            _RECORDING.reset(token)
        body = render_json({"data": data, "meta": meta})
        if key is not None:
            kept = _keep(data, meta, recording, arguments)
            if kept is not None:
                self._kept[key] = kept
        return Rendered(body, meta, arguments)


def _keep(
    data: dict[str, Any], meta: dict[str, Any], recording: _Recording, arguments: dict[str, Any]
) -> _Kept | None:
    """What to keep of an answer, or None when it may not be kept."""
    if tuple(meta)[: len(_LIVE_META)] != _LIVE_META or meta["stale"]:
        return None
    reads: list[_Read] = []
    aged = -1
    for key, max_age_s, cached in recording.reads:
        if cached.version is None or cached.stale:
            return None
        if cached is recording.meta_from:
            aged = len(reads)
        reads.append(_Read(key, max_age_s, cached.version))
    if aged < 0:
        return None
    rest = {name: value for name, value in meta.items() if name not in _LIVE_META}
    head = b'{"data":' + render_json(data) + b',"meta":{"source":"cache","age_s":'
    tail = b',"stale":false' + (b"," + render_json(rest)[1:-1] if rest else b"") + b"}}"
    return _Kept(head, tail, tuple(reads), aged, rest, arguments)
