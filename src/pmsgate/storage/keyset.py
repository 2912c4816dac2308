"""Newest-first pages read by keyset, as the audit trail and the tool-call log read theirs.

Rows are ordered by ``(time, id)`` descending; a page's cursor is the position of its
last row (``<microseconds>.<id>``), so a page never shifts while rows are added. A
malformed cursor reads from the newest row: it can never widen the caller's filter.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from sqlalchemy import ColumnElement, Select, and_, or_
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


class Positioned(Protocol):
    """A view of a row that knows its keyset position (:func:`cursor_at` of its row)."""

    @property
    def cursor(self) -> str: ...


View = TypeVar("View", bound=Positioned)


@dataclass(frozen=True)
class Keyset:
    """A table's newest-first order: its time column, then its id column."""

    at: InstrumentedAttribute[datetime]
    row_id: InstrumentedAttribute[int]

    def between(self, since: datetime | None, until: datetime | None) -> list[ColumnElement[bool]]:
        """Rows at or after ``since`` and before ``until`` (None: no bound on that side)."""
        bounds = [self.at >= since] if since is not None else []
        return bounds + ([self.at < until] if until is not None else [])

    async def page(
        self,
        session: AsyncSession,
        statement: Select[Any],
        view: Callable[[Any], View],
        *,
        limit: int,
        after: str | None,
    ) -> tuple[list[View], str | None]:
        """Up to ``limit`` (1..MAX_PAGE) rows of ``statement`` older than the cursor
        ``after``, newest first, each as ``view`` makes it; and the cursor of the next
        (older) page, None when no row follows."""
        limit = max(1, min(limit, MAX_PAGE))
        position = parse_cursor(after) if after else None
        if position is not None:
            when, last_id = position
            statement = statement.where(
                or_(self.at < when, and_(self.at == when, self.row_id < last_id))
            )
        statement = statement.order_by(self.at.desc(), self.row_id.desc()).limit(limit + 1)
        rows = (await session.execute(statement)).all()
        views = [view(row) for row in rows[:limit]]
        return views, views[-1].cursor if len(rows) > limit else None


def given(*pairs: tuple[Any, object]) -> list[ColumnElement[bool]]:
    """``column == value`` for each ``(column, value)`` whose value is given (not None or
    empty): a list filter's optional equalities."""
    return [column == value for column, value in pairs if value]
