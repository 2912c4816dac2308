"""Newest-first pages read by keyset, as the audit trail and the tool-call log read theirs.

Rows are ordered by ``(time, id)`` descending; a page's cursor is the position of its
last row (``<microseconds>.<id>``), so a page never shifts while rows are added. A
malformed cursor reads from the newest row: it can never widen the caller's filter.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Select, and_, or_
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute

MAX_PAGE = 500
_CURSOR = re.compile(r"(-?\d{1,20})\.(\d{1,20})")


def cursor_at(when: datetime, row_id: int) -> str:
    """The cursor of the row at ``(when, row_id)``: the next page starts after it."""
    return f"{int(when.timestamp() * 1_000_000)}.{row_id}"


def parse_cursor(cursor: str) -> tuple[datetime, int] | None:
    """The keyset position a cursor names, or None for a malformed one."""
    found = _CURSOR.fullmatch(cursor)
    if found is None:
        return None
    try:
        when = datetime.fromtimestamp(int(found.group(1)) / 1_000_000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return when, int(found.group(2))


async def newest_first(
    session: AsyncSession,
    statement: Select[Any],
    at: InstrumentedAttribute[datetime],
    row_id: InstrumentedAttribute[int],
    *,
    limit: int,
    after: str | None,
) -> tuple[Sequence[Any], bool]:
    """Up to ``limit`` (1..MAX_PAGE) rows of ``statement`` older than the cursor ``after``,
    newest first, and whether more follow."""
    limit = max(1, min(limit, MAX_PAGE))
    position = parse_cursor(after) if after else None
    if position is not None:
        when, last_id = position
        statement = statement.where(or_(at < when, and_(at == when, row_id < last_id)))
    statement = statement.order_by(at.desc(), row_id.desc()).limit(limit + 1)
    rows = (await session.execute(statement)).all()
    return rows[:limit], len(rows) > limit
