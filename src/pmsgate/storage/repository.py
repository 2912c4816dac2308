"""What every repository of this package is: queries run in the caller's session.

A repository never commits: the service that opened the session owns the transaction.
"""

from __future__ import annotations

from typing import TypeVar

from sqlalchemy.ext.asyncio import AsyncSession

Row = TypeVar("Row")


class Repository:
    """Queries on some tables, run in the caller's session; never commits."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def _add(self, row: Row) -> Row:
        """Add ``row`` to the session and flush, so what the database gives it (its id) is set."""
        self._session.add(row)
        await self._session.flush()
        return row
