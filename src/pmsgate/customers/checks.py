"""The checks services run on values before they store them, and the caller-facing error of
a broken constraint.

The database constraints are the final guard of every rule; a service checks the values
first only to give its caller a precise error code (and a hint) before any SQL runs, and
turns a constraint violation that still happens (a concurrent writer) into the same code
by the constraint's name (:func:`pmsgate.storage.integrity.violated_constraint`, identical
on SQLite and PostgreSQL). The repositories in ``storage/`` raise none of these errors: the
messages and hints a user reads are written here and in the services.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from sqlalchemy import Table
from sqlalchemy.exc import IntegrityError

from pmsgate.errors import InvalidInput, NotFound, PmsgateError
from pmsgate.storage.customers import MAX_STUDENT_ID
from pmsgate.storage.integrity import FOREIGN_KEY, violated_constraint

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


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


def student_id_value(student_id: str) -> str:
    """A student_id as stored; an InvalidInput when blank or too long."""
    return required_text(student_id, "student_id", MAX_STUDENT_ID)


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
    """The error for a student_id that is not a registered customer (read or written)."""
    return NotFound(
        f"No customer with student_id {student_id}.",
        code="customer_not_found",
        hint="Register it first (`pmsgate customers add`, or onboarding); "
        "`pmsgate customers list` shows the registered customers.",
    )


def translate_integrity_error(
    error: IntegrityError,
    table: Table,
    errors: dict[str, Callable[[], PmsgateError]],
) -> PmsgateError:
    """The service's error for the violated constraint (a generic conflict when unknown).

    ``errors`` maps constraint names of ``table`` (and
    :data:`pmsgate.storage.integrity.FOREIGN_KEY`) to the error the caller gets.
    """
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


def refused_on_customer(
    error: IntegrityError,
    model: type[Any],
    student_id: str,
    errors: dict[str, Callable[[], PmsgateError]],
) -> PmsgateError:
    """:func:`translate_integrity_error` on the table of ``model``, a customer's record:
    a ``student_id`` no customer has (the foreign key) is ``customer_not_found``."""
    return translate_integrity_error(
        error, model.__table__, {FOREIGN_KEY: lambda: customer_not_found(student_id), **errors}
    )
