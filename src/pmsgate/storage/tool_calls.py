"""The tool-call log (``tool_calls``) and each facility's upstream health (``upstream_health``).

Rows are appended in batches (every replica its own; a call's row is never updated) and
read newest first, ``(at, id)`` descending, paged by keyset like the audit trail: a page's
cursor is the position of its last row, so a page never shifts while calls are added. The
only removals are the retention purge (:meth:`ToolCallRepository.purge_before`) and the
per-facility bound (:meth:`ToolCallRepository.trim_to`). The caller key's label is read
from ``gateway_keys`` (its display prefix within the facility) when rows are read: the log
stores the prefix, never the key.

``upstream_health`` holds, per facility, the latest successful and the latest failed
booking-system request any replica saw; a write keeps whichever is later, so replicas
flushing in any order converge.

Both repositories work in the caller's session and never commit;
:class:`pmsgate.gateway.call_log.CallLog` owns the transactions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, case, delete, func, insert, or_, select

from pmsgate.storage.integrity import dialect_insert
from pmsgate.storage.keyset import Keyset, cursor_at, given
from pmsgate.storage.models import Facility, GatewayKey, ToolCall, UpstreamHealth
from pmsgate.storage.repository import Repository
from pmsgate.storage.views import json_fields, view_of

# Rows per INSERT: 14 bound values each stays far below SQLite's limit on variables.
ROWS_PER_STATEMENT = 200


@dataclass(slots=True)
class NewToolCall:
    """One call as the gateway recorded it, before it is stored (slots, not frozen: built
    on every call's path, where a frozen dataclass's slower ``__init__`` would show)."""

    facility_id: int
    at: datetime
    latency_ms: float
    kind: str
    name: str
    transport: str
    key_prefix: str | None
    outcome: str
    error_code: str | None
    status: int | None
    source: str | None
    age_s: float | None
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolCallView:
    """One stored call, with its key's current label (empty when the key has none)."""

    id: int
    at: datetime
    kind: str
    name: str
    transport: str
    key_prefix: str | None
    key_label: str
    outcome: str
    error_code: str | None
    status: int | None
    source: str | None
    age_s: float | None
    latency_ms: float
    arguments: dict[str, Any]

    @property
    def cursor(self) -> str:
        """The keyset position of this row (the next page starts with the next older one)."""
        return cursor_at(self.at, self.id)

    def as_json(self) -> dict[str, Any]:
        """The call as an export line carries it."""
        return json_fields(self, leave_out={"id"})


@dataclass(frozen=True)
class ToolCallFilter:
    """Which calls of one facility a read returns (every given condition must hold)."""

    facility_id: int
    since: datetime | None = None
    until: datetime | None = None  # exclusive
    name: str | None = None
    outcome: str | None = None


@dataclass(frozen=True)
class ToolCallPage:
    """One page of calls, newest first, and the cursor of the next (older) page if any."""

    calls: list[ToolCallView]
    next_cursor: str | None


@dataclass(frozen=True)
class CallCounts:
    """A facility's calls since some moment: all, failed, stale answers, served from cache."""

    calls: int = 0
    errors: int = 0
    stale: int = 0
    from_cache: int = 0


@dataclass(frozen=True)
class UpstreamHealthView:
    """A facility's latest successful and failed booking-system request."""

    last_success_at: datetime | None
    last_failure_at: datetime | None
    last_failure_code: str | None


def _label() -> Any:
    """The label of the row's key: the facility's key with the row's display prefix."""
    return (
        select(GatewayKey.label)
        .where(
            GatewayKey.facility_id == ToolCall.facility_id,
            GatewayKey.prefix == ToolCall.key_prefix,
        )
        .order_by(GatewayKey.id.desc())
        .limit(1)
        .scalar_subquery()
    )


_NEWEST_FIRST = Keyset(ToolCall.at, ToolCall.id)


def _view(row: ToolCall, label: str | None) -> ToolCallView:
    return view_of(ToolCallView, row, key_label=label or "", arguments=dict(row.arguments or {}))


def _conditions(where: ToolCallFilter) -> list[ColumnElement[bool]]:
    return [
        ToolCall.facility_id == where.facility_id,
        *_NEWEST_FIRST.between(where.since, where.until),
        *given((ToolCall.name, where.name), (ToolCall.outcome, where.outcome)),
    ]


class ToolCallRepository(Repository):
    """Appends, reads and purges logged calls in the caller's session; never commits."""

    async def add(self, calls: Sequence[NewToolCall]) -> int:
        """Store the calls of facilities that still exist; how many were stored.

        A facility removed between a call and the flush drops its rows (its log went with
        it) instead of failing the whole batch on the foreign key.
        """
        if not calls:
            return 0
        wanted = {call.facility_id for call in calls}
        existing = set(
            (await self._session.scalars(select(Facility.id).where(Facility.id.in_(wanted)))).all()
        )
        rows = [
            {
                "facility_id": call.facility_id,
                "at": call.at,
                "kind": call.kind,
                "name": call.name,
                "transport": call.transport,
                "key_prefix": call.key_prefix,
                "outcome": call.outcome,
                "error_code": call.error_code,
                "status": call.status,
                "source": call.source,
                "age_s": call.age_s,
                "latency_ms": call.latency_ms,
                "arguments": dict(call.arguments),
            }
            for call in calls
            if call.facility_id in existing
        ]
        for start in range(0, len(rows), ROWS_PER_STATEMENT):
            await self._session.execute(insert(ToolCall), rows[start : start + ROWS_PER_STATEMENT])
        return len(rows)

    async def query(
        self, where: ToolCallFilter, *, limit: int = 50, after: str | None = None
    ) -> ToolCallPage:
        """The calls matching ``where`` after the cursor ``after``, newest first."""
        calls, next_cursor = await _NEWEST_FIRST.page(
            self._session,
            select(ToolCall, _label()).where(*_conditions(where)),
            lambda row: _view(*row),
            limit=limit,
            after=after,
        )
        return ToolCallPage(calls=calls, next_cursor=next_cursor)

    async def counts(
        self, facility_id: int, periods: Mapping[str, datetime]
    ) -> dict[str, CallCounts]:
        """Per named period (``name → since``), the facility's calls since then, one query."""
        if not periods:
            return {}
        first = min(periods.values())
        columns: list[Any] = []
        for since in periods.values():
            recent = ToolCall.at >= since
            columns += [
                func.coalesce(func.sum(case((recent, 1), else_=0)), 0),
                func.coalesce(
                    func.sum(case((and_(recent, ToolCall.outcome == "error"), 1), else_=0)), 0
                ),
                func.coalesce(
                    func.sum(case((and_(recent, ToolCall.outcome == "stale"), 1), else_=0)), 0
                ),
                func.coalesce(
                    func.sum(case((and_(recent, ToolCall.source == "cache"), 1), else_=0)), 0
                ),
            ]
        values = (
            await self._session.execute(
                select(*columns).where(ToolCall.facility_id == facility_id, ToolCall.at >= first)
            )
        ).one()
        found: dict[str, CallCounts] = {}
        for index, name in enumerate(periods):
            calls, errors, stale, from_cache = (int(v) for v in values[index * 4 : index * 4 + 4])
            found[name] = CallCounts(calls, errors, stale, from_cache)
        return found

    async def purge_before(self, cutoff: datetime) -> int:
        """Remove every call made before ``cutoff`` (retention); how many went."""
        result = await self._session.execute(delete(ToolCall).where(ToolCall.at < cutoff))
        return int(getattr(result, "rowcount", 0) or 0)

    async def trim_to(self, max_rows: int) -> int:
        """Keep at most the newest ``max_rows`` calls of each facility; how many went."""
        over = await self._session.execute(
            select(ToolCall.facility_id)
            .group_by(ToolCall.facility_id)
            .having(func.count() > max_rows)
        )
        removed = 0
        for facility_id in over.scalars().all():
            # The newest row that goes: it and everything older than it.
            boundary = (
                await self._session.execute(
                    select(ToolCall.at, ToolCall.id)
                    .where(ToolCall.facility_id == facility_id)
                    .order_by(ToolCall.at.desc(), ToolCall.id.desc())
                    .offset(max_rows)
                    .limit(1)
                )
            ).one_or_none()
            if boundary is None:
                continue
            when, call_id = boundary
            result = await self._session.execute(
                delete(ToolCall).where(
                    ToolCall.facility_id == facility_id,
                    or_(ToolCall.at < when, and_(ToolCall.at == when, ToolCall.id <= call_id)),
                )
            )
            removed += int(getattr(result, "rowcount", 0) or 0)
        return removed


class UpstreamHealthRepository(Repository):
    """Each facility's latest booking-system success and failure; never commits."""

    async def record(
        self,
        successes: Mapping[int, datetime],
        failures: Mapping[int, tuple[datetime, str]],
    ) -> int:
        """Keep the later of the stored and the given times per facility; facilities touched."""
        ids = sorted(set(successes) | set(failures))
        if not ids:
            return 0
        existing = set(
            (await self._session.scalars(select(Facility.id).where(Facility.id.in_(ids)))).all()
        )
        rows = [
            {
                "facility_id": facility_id,
                "last_success_at": successes.get(facility_id),
                "last_failure_at": failures[facility_id][0] if facility_id in failures else None,
                "last_failure_code": failures[facility_id][1] if facility_id in failures else None,
            }
            for facility_id in ids
            if facility_id in existing
        ]
        if not rows:
            return 0
        statement = dialect_insert(self._session, UpstreamHealth).values(rows)
        excluded = statement.excluded
        newer_success = or_(
            UpstreamHealth.last_success_at.is_(None),
            excluded.last_success_at > UpstreamHealth.last_success_at,
        )
        newer_failure = or_(
            UpstreamHealth.last_failure_at.is_(None),
            excluded.last_failure_at > UpstreamHealth.last_failure_at,
        )
        statement = statement.on_conflict_do_update(
            index_elements=[UpstreamHealth.facility_id],
            set_={
                "last_success_at": case(
                    (
                        and_(excluded.last_success_at.is_not(None), newer_success),
                        excluded.last_success_at,
                    ),
                    else_=UpstreamHealth.last_success_at,
                ),
                "last_failure_at": case(
                    (
                        and_(excluded.last_failure_at.is_not(None), newer_failure),
                        excluded.last_failure_at,
                    ),
                    else_=UpstreamHealth.last_failure_at,
                ),
                "last_failure_code": case(
                    (
                        and_(excluded.last_failure_at.is_not(None), newer_failure),
                        excluded.last_failure_code,
                    ),
                    else_=UpstreamHealth.last_failure_code,
                ),
            },
        )
        await self._session.execute(statement)
        return len(rows)

    async def get(self, facility_id: int) -> UpstreamHealthView | None:
        """The facility's latest success and failure, if any was recorded."""
        row = await self._session.get(UpstreamHealth, facility_id)
        if row is None:
            return None
        return UpstreamHealthView(
            last_success_at=row.last_success_at,
            last_failure_at=row.last_failure_at,
            last_failure_code=row.last_failure_code,
        )
