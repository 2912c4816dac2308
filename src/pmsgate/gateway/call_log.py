"""The tool-call log: what each facility's callers asked and how the gateway answered.

This answers "what did the assistant see?" when a guest says the assistant was wrong:
per call the time, the tool or operation, the calling key's display prefix (its label is
shown from ``gateway_keys``), the transport (HTTP or MCP), the outcome and error code,
whether the answer came from the cache or the booking system, **how old the answer was**
and the latency. Never the answer, and never an argument that could carry personal data:
:func:`argument_shape` keeps only dates and an apartment id (docs/gateway.md, "The tool-call
log").

The calls are recorded where their outcome, cache source and latency are all known: the
HTTP tool and operation routes (:mod:`pmsgate.gateway.http`) and the MCP tool handler
(:mod:`pmsgate.gateway.mcp`), each around one ``Tools.call`` / ``Operations.call``.
Recording costs the hot path a clock read and an append to a bounded in-memory buffer (no
I/O, no await); :meth:`CallLog.flush` writes the buffer in one transaction on the
``flush-gateway-usage`` tick (every minute, and at shutdown), so a crashed process loses at
most the calls since its last flush. Each replica writes its own rows. A buffer that
outgrows ``max_pending`` (the database unreachable for long) drops its oldest calls, counted.

The same tick writes each facility's latest successful and failed booking-system request
(``upstream_health``), recorded by :class:`pmsgate.gateway.service.Gateway` for every
request it sends (background refreshes and the connection check included).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.catalogue.tools import ToolDefinition
from pmsgate.clock import Clock
from pmsgate.errors import PmsgateError
from pmsgate.storage.tool_calls import (
    CallCounts,
    NewToolCall,
    ToolCallFilter,
    ToolCallPage,
    ToolCallRepository,
    ToolCallView,
    UpstreamHealthRepository,
    UpstreamHealthView,
)

log = structlog.get_logger(__name__)

TRANSPORTS = ("http", "mcp")
OUTCOMES = ("ok", "stale", "replayed", "error")
SOURCES = ("cache", "upstream")
# The only argument kept by name besides dates: it names a room type, never a person.
LOGGED_PARAMETERS = frozenset({"apartment_id"})
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_MAX_ID = 10**12
# Rows per read of an export (keyset pages, so memory stays bounded whatever the range).
EXPORT_PAGE = 500


def argument_shape(tool: ToolDefinition | None, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The non-personal part of a tool's arguments: its dates and apartment id, if well formed.

    Only parameters the tool declares are looked at (an unknown key could be anything), a
    date only when written YYYY-MM-DD and an apartment id only as a whole number. A
    reservation id is never kept: it leads to a guest.
    """
    if tool is None:
        return {}
    shape: dict[str, Any] = {}
    for name, parameter in tool.parameters.items():
        value = arguments.get(name)
        if value is None:
            continue
        if parameter.format == "date":
            if isinstance(value, str) and _DATE.fullmatch(value):
                shape[name] = value
        elif (
            name in LOGGED_PARAMETERS
            and isinstance(value, int)
            and not isinstance(value, bool)
            and 0 <= value < _MAX_ID
        ):
            shape[name] = value
    return shape


@dataclass(slots=True)
class CallStart:
    """A call under way: who called which tool, when; finished by :meth:`CallLog.answered`
    or :meth:`CallLog.failed`."""

    facility_id: int
    kind: str
    name: str
    transport: str
    key_prefix: str | None
    at: datetime
    started: float
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FlushResult:
    """What one flush wrote: calls, facilities' upstream health, calls dropped since the last."""

    calls: int
    facilities: int
    dropped: int


class CallLog:
    """Buffers calls and upstream outcomes in memory; writes, reads and purges the log."""

    def __init__(
        self,
        clock: Clock,
        sessions: async_sessionmaker[AsyncSession] | None = None,
        *,
        retention_days: int = 30,
        max_rows_per_facility: int = 100_000,
        max_pending: int = 50_000,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._clock = clock
        self._sessions = sessions
        self.retention = timedelta(days=retention_days)
        self.max_rows_per_facility = max_rows_per_facility
        self._max_pending = max_pending
        self._timer = timer
        self._calls: deque[NewToolCall] = deque(maxlen=max_pending)
        self._dropped = 0
        self._successes: dict[int, datetime] = {}
        self._failures: dict[int, tuple[datetime, str]] = {}
        self._flushing = asyncio.Lock()

    def __repr__(self) -> str:
        return f"CallLog(pending={len(self._calls)})"

    # --- the hot path: no I/O ---------------------------------------------------------------

    def start(
        self,
        facility_id: int,
        *,
        kind: str,
        name: str,
        transport: str,
        key_prefix: str | None,
    ) -> CallStart:
        """A call begins now (its arguments' shape may be set on the result later)."""
        return CallStart(
            facility_id=facility_id,
            kind=kind,
            name=name,
            transport=transport,
            key_prefix=key_prefix,
            at=self._clock.now(),
            started=self._timer(),
        )

    def answered(
        self, call: CallStart, meta: Mapping[str, Any] | None, *, status: int = 200
    ) -> None:
        """The call was answered: its source and age from the answer's ``meta``."""
        meta = meta or {}
        source = meta.get("source")
        age = meta.get("age_s")
        self._append(
            call,
            outcome="stale" if meta.get("stale") else "ok",
            error_code=None,
            status=status,
            source=source if source in SOURCES else None,
            age_s=float(age) if isinstance(age, int | float) else None,
        )

    def written(self, call: CallStart, *, status: int, error_code: str | None) -> None:
        """A write was answered by the booking system (fresh, so age 0) or refused by it."""
        self._append(
            call,
            outcome="error" if status >= 400 else "ok",
            error_code=error_code,
            status=status,
            source="upstream",
            age_s=0.0 if status < 400 else None,
        )

    def replayed(self, call: CallStart, *, status: int, error_code: str | None) -> None:
        """A write's stored answer was given again (nothing was sent)."""
        self._append(
            call,
            outcome="replayed",
            error_code=error_code,
            status=status,
            source=None,
            age_s=None,
        )

    def failed(self, call: CallStart, error: BaseException) -> None:
        """The call ended with an error: its code (``cancelled`` when the caller went away)."""
        if isinstance(error, PmsgateError):
            code, status = error.code, error.status
        elif isinstance(error, Exception):
            code, status = PmsgateError.code, PmsgateError.status
        else:
            code, status = "cancelled", None
        self._append(call, outcome="error", error_code=code, status=status, source=None, age_s=None)

    def upstream_succeeded(self, facility_id: int) -> None:
        """A booking-system request of the facility was answered."""
        self._successes[facility_id] = self._clock.now()

    def upstream_failed(self, facility_id: int, code: str) -> None:
        """A booking-system request of the facility failed (``code``: the upstream error's)."""
        self._failures[facility_id] = (self._clock.now(), code[:64])

    def _append(
        self,
        call: CallStart,
        *,
        outcome: str,
        error_code: str | None,
        status: int | None,
        source: str | None,
        age_s: float | None,
    ) -> None:
        if len(self._calls) == self._max_pending:
            self._dropped += 1  # the deque drops the oldest
        self._calls.append(
            NewToolCall(
                facility_id=call.facility_id,
                at=call.at,
                kind=call.kind,
                name=call.name[:80],
                transport=call.transport,
                key_prefix=call.key_prefix,
                outcome=outcome,
                error_code=error_code[:64] if error_code else None,
                status=status,
                source=source,
                age_s=round(age_s, 1) if age_s is not None else None,
                latency_ms=round(max(0.0, self._timer() - call.started) * 1000, 3),
                arguments=call.arguments,
            )
        )

    def pending(self) -> list[NewToolCall]:
        """The calls held in memory, not written yet (oldest first)."""
        return list(self._calls)

    # --- the flush: one transaction per tick ------------------------------------------------

    async def flush(self) -> FlushResult:
        """Write the buffered calls and upstream outcomes in one transaction.

        A failed write puts them back (the newest kept within the bound), so the next flush
        writes them with whatever came since.
        """
        async with self._flushing:
            calls, self._calls = self._calls, deque(maxlen=self._max_pending)
            successes, self._successes = self._successes, {}
            failures, self._failures = self._failures, {}
            dropped, self._dropped = self._dropped, 0
            if dropped:
                log.warning("tool_calls_dropped", dropped=dropped, bound=self._max_pending)
            if self._sessions is None or not (calls or successes or failures):
                return FlushResult(0, 0, dropped)
            try:
                async with self._sessions.begin() as session:
                    written = await ToolCallRepository(session).add(list(calls))
                    touched = await UpstreamHealthRepository(session).record(successes, failures)
            except BaseException:
                self._restore(calls, successes, failures)
                raise
            return FlushResult(written, touched, dropped)

    async def aclose(self) -> None:
        """Write what is still in memory (shutdown); a failure is logged, not raised."""
        try:
            await self.flush()
        except Exception as error:  # shutdown goes on: at worst the last batch is lost
            log.warning("tool_calls_not_flushed", error=type(error).__name__)

    def _restore(
        self,
        calls: deque[NewToolCall],
        successes: Mapping[int, datetime],
        failures: Mapping[int, tuple[datetime, str]],
    ) -> None:
        later = self._calls
        self._calls = deque(calls, maxlen=self._max_pending)
        self._calls.extend(later)
        for facility_id, when in successes.items():
            self._successes.setdefault(facility_id, when)
        for facility_id, failure in failures.items():
            self._failures.setdefault(facility_id, failure)

    # --- retention ----------------------------------------------------------------------------

    async def purge(self, now: datetime) -> dict[str, int]:
        """Remove the calls older than the retention and beyond each facility's bound."""
        sessions = self._require_sessions()
        async with sessions.begin() as session:
            repository = ToolCallRepository(session)
            expired = await repository.purge_before(now - self.retention)
            trimmed = await repository.trim_to(self.max_rows_per_facility)
        return {"expired": expired, "trimmed": trimmed}

    # --- reads (the console) --------------------------------------------------------------------

    async def page(
        self, where: ToolCallFilter, *, limit: int = 50, after: str | None = None
    ) -> ToolCallPage:
        """A page of a facility's calls, newest first."""
        async with self._require_sessions()() as session:
            return await ToolCallRepository(session).query(where, limit=limit, after=after)

    async def export(self, where: ToolCallFilter) -> AsyncIterator[ToolCallView]:
        """Every call of the selection, newest first, read a page at a time."""
        after: str | None = None
        while True:
            page = await self.page(where, limit=EXPORT_PAGE, after=after)
            for call in page.calls:
                yield call
            if page.next_cursor is None:
                return
            after = page.next_cursor

    async def counts(
        self, facility_id: int, periods: Mapping[str, datetime]
    ) -> dict[str, CallCounts]:
        """The facility's calls, errors, stale answers and cache hits per period."""
        async with self._require_sessions()() as session:
            return await ToolCallRepository(session).counts(facility_id, periods)

    async def upstream_health(self, facility_id: int) -> UpstreamHealthView | None:
        """The facility's latest successful and failed booking-system request (flushed)."""
        async with self._require_sessions()() as session:
            return await UpstreamHealthRepository(session).get(facility_id)

    def _require_sessions(self) -> async_sessionmaker[AsyncSession]:
        if self._sessions is None:
            raise RuntimeError("this call log keeps no database (built without sessions)")
        return self._sessions
