"""Stored rows as the frozen views the repositories return.

A repository's view is a dataclass whose fields mostly mirror the row's columns by name;
:func:`view_of` copies those, and the caller passes the few that are computed (a JSON
column copied into a new dict, a joined value, a rounded amount). :func:`json_fields` is
the way back out: a view's fields as JSON values, for exports and ``--json`` output.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import fields
from datetime import date
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

View = TypeVar("View", bound="DataclassInstance")


def view_of(view: type[View], row: object, **computed: Any) -> View:
    """``view`` of ``row``: each field from ``computed`` if named there, else from the
    row's attribute of the same name."""
    values = {
        field.name: computed[field.name] if field.name in computed else getattr(row, field.name)
        for field in fields(view)
    }
    return view(**values)


def json_fields(view: DataclassInstance, *, leave_out: Collection[str] = ()) -> dict[str, Any]:
    """The fields of ``view`` but ``leave_out``, in their order, as JSON values: dates and
    times in ISO 8601, everything else as it is."""
    return {
        field.name: _json_value(getattr(view, field.name))
        for field in fields(view)
        if field.name not in leave_out
    }


def _json_value(value: Any) -> Any:
    return value.isoformat() if isinstance(value, date) else value
