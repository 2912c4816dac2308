"""What the repositories share about integrity: upserts and the name of a violated constraint.

The database constraints are the final guard of every rule. A repository lets the
database's ``IntegrityError`` through; :func:`violated_constraint` names the constraint
it reports, identically on SQLite and PostgreSQL, so the service that owns the call can
turn it into the caller-facing error (:func:`pmsgate.customers.checks.translate_integrity_error`).
The value checks and their messages are the services' (:mod:`pmsgate.customers.checks`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from sqlalchemy import PrimaryKeyConstraint, Table, UniqueConstraint
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from pmsgate.errors import InvalidInput, NotFound, PmsgateError

# SQLite names no foreign key in its message; a service maps this to its own error.
FOREIGN_KEY = "foreign_key"

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_POSTGRES_CONSTRAINT = re.compile(r'constraint "([^"]+)"')
_SQLITE_UNIQUE = re.compile(r"UNIQUE constraint failed: ([^\n]+)")
_SQLITE_CHECK = re.compile(r"CHECK constraint failed: (\w+)")


def dialect_insert(session: AsyncSession, table: Any) -> Any:
    """An INSERT supporting ``on_conflict_do_update``/``_do_nothing`` on the session's backend."""
    insert = postgresql_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    return insert(table)


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


# --- Left for knowledge/records.py only: these checks and errors are the services' and live in
# pmsgate.customers.checks; delete them once knowledge/records.py imports them from there.


def required_text(value: str, field: str, limit: int) -> str:
    """The value stripped; an InvalidInput when it is blank or longer than the column."""
    cleaned = value.strip()
    if not cleaned:
        raise InvalidInput(
            f"{field} is required.", code=f"invalid_{field}", hint=f"Give a non-empty {field}."
        )
    return optional_text(cleaned, field, limit) or cleaned


def optional_text(value: str | None, field: str, limit: int) -> str | None:
    """The value stripped (None when blank); an InvalidInput when longer than the column."""
    if value is None:
        return None
    cleaned = value.strip()
    if len(cleaned) > limit:
        # PostgreSQL would refuse it with a DataError and SQLite would keep it: refuse both.
        raise InvalidInput(
            f"{field} is longer than {limit} characters.",
            code=f"invalid_{field}",
            hint=f"Shorten {field} to at most {limit} characters.",
        )
    return cleaned or None


def email_address(value: str) -> str:
    """The address lower-cased; an InvalidInput when it does not look like one."""
    cleaned = required_text(value, "email", 320).lower()
    if not _EMAIL.match(cleaned):
        raise InvalidInput(
            "email is not an e-mail address.",
            code="invalid_email",
            hint="Give an address of the form name@domain.tld.",
        )
    return cleaned


def one_of(value: str, allowed: tuple[str, ...], field: str) -> str:
    """The value when it is one of ``allowed``; an InvalidInput naming them otherwise."""
    if value not in allowed:
        raise InvalidInput(
            f"{field} must be one of: {', '.join(allowed)}.",
            code=f"invalid_{field}",
            hint=f"Use one of: {', '.join(allowed)}.",
        )
    return value


def customer_not_found(student_id: str) -> NotFound:
    """The error for a record written for a customer that is not registered."""
    return NotFound(
        f"No customer with student_id {student_id}.",
        code="customer_not_found",
        hint="Register the customer first (its record carries the student_id).",
    )


def translate_integrity_error(
    error: IntegrityError,
    table: Table,
    errors: dict[str, Callable[[], PmsgateError]],
) -> PmsgateError:
    """The repository's error for the violated constraint (a generic conflict when unknown)."""
    name = violated_constraint(error, table)
    if name is not None and name in errors:
        return errors[name]()
    # Say which rule broke without the statement or its values (they may hold secrets).
    return PmsgateError(
        f"The change breaks a rule of table {table.name} ({name or 'unknown constraint'}).",
        code="constraint_violated",
        status=409,
        hint="Read the current record and retry with consistent values.",
    )
