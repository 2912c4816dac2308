"""What the repositories share about integrity: upserts and the name of a violated constraint.

The database constraints are the final guard of every rule. A repository lets the
database's ``IntegrityError`` through; :func:`violated_constraint` names the constraint
it reports, identically on SQLite and PostgreSQL, so the service that owns the call can
turn it into the caller-facing error (:func:`pmsgate.customers.checks.translate_integrity_error`).
The value checks and their messages are the services' (:mod:`pmsgate.customers.checks`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import CursorResult, PrimaryKeyConstraint, Table, UniqueConstraint
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

# SQLite names no foreign key in its message; a service maps this to its own error.
FOREIGN_KEY = "foreign_key"

_POSTGRES_CONSTRAINT = re.compile(r'constraint "([^"]+)"')
_SQLITE_UNIQUE = re.compile(r"UNIQUE constraint failed: ([^\n]+)")
_SQLITE_CHECK = re.compile(r"CHECK constraint failed: (\w+)")


def dialect_insert(session: AsyncSession, table: Any) -> Any:
    """An INSERT supporting ``on_conflict_do_update``/``_do_nothing`` on the session's backend."""
    insert = postgresql_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    return insert(table)


async def insert_unless_taken(
    session: AsyncSession, model: Any, unique: Sequence[str], **values: Any
) -> bool:
    """INSERT ``values`` into ``model``'s table unless a row already holds the same
    ``unique`` columns (another replica's insert wins); whether this one went in."""
    statement = (
        dialect_insert(session, model)
        .values(**values)
        .on_conflict_do_nothing(index_elements=unique)
    )
    return bool(cast(CursorResult[Any], await session.execute(statement)).rowcount)


def violated_constraint(error: IntegrityError, table: Table) -> str | None:
    """The name of the constraint of ``table`` the error reports, if it can be told.

    PostgreSQL names the constraint; SQLite names a CHECK constraint but only the
    columns of a UNIQUE one, which are matched against the table's unique
    constraints and indexes; a foreign key is :data:`FOREIGN_KEY` on both.
    """
    message = str(error.orig)
    if "foreign key" in message.lower():
        return FOREIGN_KEY
    if found := _POSTGRES_CONSTRAINT.search(message):
        return found.group(1)
    if found := _SQLITE_CHECK.search(message):
        return found.group(1)
    if found := _SQLITE_UNIQUE.search(message):
        columns = {part.strip().rpartition(".")[2] for part in found.group(1).split(",")}
        return _unique_named(table, columns)
    return None


def _unique_named(table: Table, columns: set[str]) -> str | None:
    for constraint in table.constraints:
        if (
            isinstance(constraint, UniqueConstraint | PrimaryKeyConstraint)
            and {column.name for column in constraint.columns} == columns
        ):
            return str(constraint.name)
    for index in table.indexes:
        if index.unique and {column.name for column in index.columns} == columns:
            return str(index.name)
    return None
