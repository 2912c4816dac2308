"""The column and constraint shapes the migrations repeat, one short call each.

Each helper returns exactly what the long form ``sa.Column(name, type, nullable=...)`` or
``sa.…Constraint(..., name=op.f(...))`` returns, with the names the naming convention of
``pmsgate.storage.db`` gives (``pk_<table>``, ``fk_<table>_<column>_<referred table>``,
``ck_<table>_<name>``, ``uq_<table>_<first column>``, ``ix_<table>_<columns>``): a migration
written with them emits the same DDL on SQLite and PostgreSQL. A new migration uses them::

    from pmsgate.storage.migrations import columns as col

    def upgrade() -> None:
        op.create_table(
            "things",
            col.string("student_id", 64),
            col.json("details", nullable=True),
            col.foreign_key("things", "student_id", "customers.student_id", ondelete="CASCADE"),
            col.primary_key("things", "student_id"),
        )
        col.create_index("things", ["details"], where="details IS NOT NULL")

    def downgrade() -> None:
        col.drop_table("things", "ix_things_details")
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op


def column(name: str, type_: Any, *, nullable: bool = False, **options: Any) -> sa.Column[Any]:
    """``sa.Column(name, type_, nullable=...)``: NOT NULL unless ``nullable``."""
    return sa.Column(name, type_, nullable=nullable, **options)


def integer(name: str, *, nullable: bool = False) -> sa.Column[Any]:
    return column(name, sa.Integer(), nullable=nullable)


def string(name: str, length: int, *, nullable: bool = False) -> sa.Column[Any]:
    return column(name, sa.String(length=length), nullable=nullable)


def text(name: str, *, nullable: bool = False) -> sa.Column[Any]:
    return column(name, sa.Text(), nullable=nullable)


def timestamp(name: str, *, nullable: bool = False) -> sa.Column[Any]:
    """A moment, always with its time zone."""
    return column(name, sa.DateTime(timezone=True), nullable=nullable)


def boolean(name: str, *, nullable: bool = False) -> sa.Column[Any]:
    return column(name, sa.Boolean(), nullable=nullable)


def json(name: str, *, nullable: bool = False) -> sa.Column[Any]:
    return column(name, sa.JSON(), nullable=nullable)


def student_id(*, nullable: bool = False) -> sa.Column[Any]:
    """The customer a row belongs to (``customers.student_id``, 64 characters)."""
    return string("student_id", 64, nullable=nullable)


def facility_id(*, nullable: bool = False) -> sa.Column[Any]:
    """The facility a row belongs to (``facilities.id``)."""
    return integer("facility_id", nullable=nullable)


def timestamps() -> list[sa.Column[Any]]:
    """``created_at`` then ``updated_at``: when a row was made and when it last changed."""
    return [timestamp("created_at"), timestamp("updated_at")]


def expiring(*, used: bool = False) -> list[sa.Column[Any]]:
    """``created_at``, ``expires_at`` and, when ``used``, ``used_at`` (NULL until spent):
    the life of a one-time secret (a link, a code, a token)."""
    spent = [timestamp("used_at", nullable=True)] if used else []
    return [timestamp("created_at"), timestamp("expires_at"), *spent]


def primary_key(table: str, *columns: str) -> sa.PrimaryKeyConstraint:
    """``pk_<table>`` on ``columns`` (``id`` when none are named)."""
    return sa.PrimaryKeyConstraint(*(columns or ("id",)), name=op.f(f"pk_{table}"))


def foreign_key(
    table: str, column_name: str, target: str, *, ondelete: str | None = None
) -> sa.ForeignKeyConstraint:
    """``column_name`` refers to ``target`` (``"<table>.<column>"``)."""
    referred = target.split(".", 1)[0]
    return sa.ForeignKeyConstraint(
        [column_name],
        [target],
        name=op.f(f"fk_{table}_{column_name}_{referred}"),
        ondelete=ondelete,
    )


def customer_key(table: str, *, ondelete: str | None = None) -> sa.ForeignKeyConstraint:
    """``student_id`` refers to ``customers.student_id``."""
    return foreign_key(table, "student_id", "customers.student_id", ondelete=ondelete)


def facility_key(table: str, *, ondelete: str = "CASCADE") -> sa.ForeignKeyConstraint:
    """``facility_id`` refers to ``facilities.id`` (its rows go with the facility unless
    ``ondelete`` says otherwise)."""
    return foreign_key(table, "facility_id", "facilities.id", ondelete=ondelete)


def check(table: str, name: str, condition: str) -> sa.CheckConstraint:
    """``ck_<table>_<name>``: ``condition`` holds on every row."""
    return sa.CheckConstraint(condition, name=op.f(f"ck_{table}_{name}"))


def unique(table: str, *columns: str, name: str | None = None) -> sa.UniqueConstraint:
    """``uq_<table>_<name or first column>`` on ``columns``."""
    return sa.UniqueConstraint(*columns, name=op.f(f"uq_{table}_{name or columns[0]}"))


def create_id_table(table: str, *items: sa.Column[Any] | sa.Constraint) -> None:
    """``op.create_table`` of a table keyed by an integer ``id``: ``id`` is its first column
    and ``pk_<table>`` its key; ``items`` are the other columns and constraints, in order."""
    op.create_table(table, integer("id"), *items, primary_key(table))


def add_columns(table: str, *columns: sa.Column[Any]) -> None:
    """Add ``columns`` to ``table`` (one batch: SQLite recreates the table once)."""
    with op.batch_alter_table(table) as batch:
        for added in columns:
            batch.add_column(added)


def drop_columns(table: str, *names: str) -> None:
    """Drop the columns ``names`` of ``table``, in that order (one batch)."""
    with op.batch_alter_table(table) as batch:
        for name in names:
            batch.drop_column(name)


def create_index(
    table: str,
    columns: Sequence[str],
    *,
    name: str | None = None,
    unique: bool = False,
    where: str | None = None,
) -> None:
    """An index named ``name`` (``ix_<table>_<columns joined by _>`` when none); ``where``
    makes it partial, on both dialects."""
    partial: dict[str, Any] = {}
    if where is not None:
        partial = {"sqlite_where": sa.text(where), "postgresql_where": sa.text(where)}
    index_name = name or f"ix_{table}_{'_'.join(columns)}"
    op.create_index(op.f(index_name), table, list(columns), unique=unique, **partial)


def create_indexes(table: str, *columns: str) -> None:
    """One index ``ix_<table>_<column>`` on each of ``columns``, created in that order."""
    for column_name in columns:
        create_index(table, [column_name])


def drop_table(table: str, *indexes: str) -> None:
    """Drop ``indexes`` (full names, in that order), then ``table``."""
    for index in indexes:
        op.drop_index(op.f(index), table_name=table)
    op.drop_table(table)
