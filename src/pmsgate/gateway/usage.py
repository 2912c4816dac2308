"""Hourly gateway usage: tool calls and upstream requests per facility, kept until flushed.

The gateway counts on its hot path here (one dict lookup and an increment, no I/O,
no await: the event loop runs one increment at a time); the ``flush-gateway-usage``
job (:mod:`pmsgate.jobs.usage`) drains the counts every minute and adds them to
``gateway_usage_hours`` (:class:`UsageHistory` over
:class:`pmsgate.storage.gateway_usage.GatewayUsageRepository`), where every replica's
counts add up. The console charts tool calls against upstream requests per hour from
that table, and sums a week of upstream requests as the facility's budget use.

Durable as they happen (docs/gateway.md, When Redis is away). With Redis configured, the
counts of one event-loop tick are written to Redis by one background task started on the
tick's first count (one pipeline of ``HINCRBY`` into a hash per facility and hour), so a
killed process loses at most the counts of its last tick instead of a minute's. The flush job then
takes every hash — each in one ``MULTI`` (``HGETALL`` + ``DEL``), so two replicas
flushing at once never count a hash twice — and adds them to the table. Without Redis,
or while it is unreachable (:mod:`pmsgate.gateway.shared_state`), the counts stay in
memory and the job (and the last run at shutdown) writes them to the database as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime

import structlog
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import Clock
from pmsgate.errors import InvalidInput, require_aware
from pmsgate.gateway.shared_state import RedisHealth, SharedStateUnavailable
from pmsgate.storage.gateway_usage import (
    HOUR,
    GatewayUsageRepository,
    HourCounts,
    HourUsage,
    UsageTotal,
    hour_start,
)

log = structlog.get_logger(__name__)

# A usage hash nobody drains (every process stopped) is dropped after this long.
_HASH_KEEP_S = 7 * 86400
_HOUR_FORMAT = "%Y%m%dT%H"


# (hotel_id, start of the UTC hour) -> counts
UsageCounts = dict[tuple[str, datetime], HourCounts]


def add_counts(into: UsageCounts, counts: Mapping[tuple[str, datetime], HourCounts]) -> None:
    """Add ``counts`` to ``into``, hour by hour."""
    for key, value in counts.items():
        held = into.get(key)
        if held is None:
            into[key] = HourCounts(value.tool_calls, value.upstream_calls)
        else:
            held.add(value)


class UsageCounter:
    """Counts per (hotel_id, UTC hour) since the last :meth:`drain` (and Redis, if configured)."""

    def __init__(
        self,
        clock: Clock,
        *,
        redis: Redis | None = None,
        health: RedisHealth | None = None,
        namespace: str = "pmsgate",
    ) -> None:
        self._clock = clock
        self._counts: UsageCounts = {}
        self._redis = redis
        self._health = health if health is not None else RedisHealth(clock)
        self._namespace = namespace
        self._push: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"UsageCounter(pending={len(self._counts)})"

    def tool_call(self, hotel_id: str) -> None:
        """Count one tool or operation call of the facility."""
        self._slot(hotel_id).tool_calls += 1
        self._schedule_push()

    def upstream_call(self, hotel_id: str) -> None:
        """Count one request sent to the booking system for the facility (token requests too)."""
        self._slot(hotel_id).upstream_calls += 1
        self._schedule_push()

    def pending(self) -> UsageCounts:
        """A copy of the counts held in this process (not in Redis, not drained yet)."""
        return {key: HourCounts(c.tool_calls, c.upstream_calls) for key, c in self._counts.items()}

    def drain(self) -> UsageCounts:
        """The counts held in this process, and start again from zero."""
        counts, self._counts = self._counts, {}
        return counts

    def restore(self, counts: Mapping[tuple[str, datetime], HourCounts]) -> None:
        """Put drained counts back (a flush failed): they are added to what came since."""
        add_counts(self._counts, counts)

    async def settle(self) -> None:
        """Wait for the write to Redis under way, if any (before a flush, at shutdown)."""
        if self._push is not None:
            await asyncio.gather(self._push, return_exceptions=True)

    async def take_shared(self) -> UsageCounts:
        """Take every count written to Redis (by any replica); empty without Redis."""
        taken: UsageCounts = {}
        if self._redis is None:
            return taken
        redis = self._redis
        prefix = f"{self._namespace}:usage:"
        try:
            with self._health.use("read the usage counts"):
                for raw in await redis.smembers(self._index_key()):
                    name = raw.decode() if isinstance(raw, bytes) else str(raw)
                    async with redis.pipeline(transaction=True) as pipe:
                        pipe.hgetall(name)
                        pipe.delete(name)
                        pipe.srem(self._index_key(), name)
                        fields, _, _ = await pipe.execute()
                    hour, _, hotel_id = name.removeprefix(prefix).partition(":")
                    start = datetime.strptime(hour, _HOUR_FORMAT).replace(tzinfo=UTC)
                    values = {k.decode(): int(v) for k, v in fields.items()}
                    add_counts(
                        taken,
                        {
                            (hotel_id, start): HourCounts(
                                values.get("tool_calls", 0), values.get("upstream_calls", 0)
                            )
                        },
                    )
        except SharedStateUnavailable:
            pass  # what was taken so far is returned; the rest stays in Redis for later
        return taken

    # --- internals ------------------------------------------------------------------------

    def _schedule_push(self) -> None:
        if self._redis is None or self._push is not None or not self._health.available:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no event loop (a synchronous caller): the flush job writes them
        self._push = loop.create_task(self._push_counts(), name="usage-to-redis")

    async def _push_counts(self) -> None:
        """Write the counts of this tick (and any that came meanwhile) to Redis."""
        assert self._redis is not None
        try:
            while self._counts and self._health.available:
                batch, self._counts = self._counts, {}
                try:
                    with self._health.use("record usage"):
                        async with self._redis.pipeline(transaction=False) as pipe:
                            for (hotel_id, hour), counts in batch.items():
                                name = self._hash_key(hotel_id, hour)
                                pipe.hincrby(name, "tool_calls", counts.tool_calls)
                                pipe.hincrby(name, "upstream_calls", counts.upstream_calls)
                                pipe.expire(name, _HASH_KEEP_S)
                                pipe.sadd(self._index_key(), name)
                            await pipe.execute()
                except BaseException:
                    # Unreachable (or cancelled at shutdown): the counts stay in memory, and
                    # the flush job writes them to the database.
                    self.restore(batch)
                    raise
        except SharedStateUnavailable:
            pass
        except Exception as error:  # never lose a count silently, never fail a caller
            log.warning("usage_not_recorded_in_redis", error_type=type(error).__name__)
        finally:
            self._push = None

    def _hash_key(self, hotel_id: str, hour: datetime) -> str:
        return f"{self._namespace}:usage:{hour.strftime(_HOUR_FORMAT)}:{hotel_id}"

    def _index_key(self) -> str:
        return f"{self._namespace}:usage-hours"

    def _slot(self, hotel_id: str) -> HourCounts:
        key = (hotel_id, hour_start(self._clock.now()))
        counts = self._counts.get(key)
        if counts is None:
            counts = self._counts[key] = HourCounts()
        return counts


# A console asks for days, never years: a bound keeps a mistyped range from building a huge list.
MAX_SERIES_HOURS = 24 * 366


def _aware(when: datetime, field: str) -> datetime:
    return hour_start(require_aware(when, field))


class UsageHistory:
    """The hourly table as the jobs, the limiter and the console use it: one transaction a call."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def add(self, counts: Mapping[tuple[str, datetime], HourCounts]) -> int:
        """Add the counts to their hours (one transaction); returns the number of hours touched."""
        for _, hour in counts:
            _aware(hour, "hour")
        async with self._sessions.begin() as session:
            return await GatewayUsageRepository(session).add(counts)

    async def series(self, hotel_id: str, since: datetime, until: datetime) -> list[HourUsage]:
        """Every hour from the one holding ``since`` to the one holding ``until``, oldest first."""
        first, last = _aware(since, "since"), _aware(until, "until")
        if last < first:
            return []
        if (last - first) / HOUR >= MAX_SERIES_HOURS:
            raise InvalidInput(
                f"A usage series covers at most {MAX_SERIES_HOURS} hours.",
                code="invalid_usage_range",
                hint="Ask for a shorter period.",
            )
        async with self._sessions() as session:
            return await GatewayUsageRepository(session).series(hotel_id, first, last)

    async def total(
        self, hotel_id: str, since: datetime | None = None, until: datetime | None = None
    ) -> UsageTotal:
        """Sums over the hours from the one holding ``since`` to the one holding ``until``."""
        first = _aware(since, "since") if since is not None else None
        last = _aware(until, "until") if until is not None else None
        async with self._sessions() as session:
            return await GatewayUsageRepository(session).total(hotel_id, first, last)
