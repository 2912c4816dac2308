"""Async engine, sessions and the schema (SQLite by default, PostgreSQL via asyncpg).

The schema changes only deliberately (docs/deploy.md, Upgrades): :func:`prepare_schema`
either applies the pending migrations under a database lock (``pmsgate db upgrade``, and
``serve``/``demo`` with PMSGATE_MIGRATE_ON_START) or only checks that this release can run
on the database as it is. A database *older* than the release is refused ("run `pmsgate db
upgrade`"); a *newer* one is accepted when every migration this release does not know was
recorded as backward compatible in ``schema_revisions`` (expand/contract: a previous
release keeps serving after an additive migration, so a rollback needs only its image).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext, MigrationInfo
from alembic.script import ScriptDirectory
from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    MetaData,
    String,
    Table,
    delete,
    event,
    func,
    insert,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import DeclarativeBase

MIGRATIONS_DIR = Path(__file__).parent / "migrations"

# Stable constraint names keep migrations identical on SQLite and PostgreSQL.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# The PostgreSQL advisory lock every migration holds ("pmsgate" in ASCII): two replicas
# starting together on an empty database migrate one after the other, never at once.
MIGRATION_LOCK_KEY = 0x706D7367617465

# The migrations' own bookkeeping, like alembic_version (not a table of the domain, so not
# on Base.metadata): one row per migration applied since it exists, and whether code that
# predates that migration may still run on the schema. Created by its own migration; an
# older release reads it to learn what it cannot know from its own migration files.
SCHEMA_REVISIONS = Table(
    "schema_revisions",
    MetaData(),
    Column("revision", String(32), primary_key=True),
    Column("backward_compatible", Boolean, nullable=False),
    Column("applied_at", DateTime(timezone=True), nullable=False),
)

T = TypeVar("T")


class Base(DeclarativeBase):
    """Declarative base of every table."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class SchemaMismatch(Exception):
    """This release cannot run on the database's schema as it is.

    ``kind``: ``outdated`` (older than this release: run the migrations), ``incompatible``
    (newer, and ``breaking`` lists the migrations not marked backward compatible) or
    ``unknown`` (newer, and the database records nothing of its compatibility). The
    service's words for it are the composition root's (``pmsgate.container.SchemaError``):
    storage lets the facts through.
    """

    def __init__(
        self, kind: str, *, current: str | None, head: str, breaking: tuple[str, ...] = ()
    ) -> None:
        super().__init__(f"schema {kind}: the database is at {current}, this release at {head}")
        self.kind = kind
        self.current = current
        self.head = head
        self.breaking = breaking


@dataclass(frozen=True)
class SchemaStatus:
    """Where the database's schema stands against this release's migrations."""

    current: str | None
    head: str
    # Migrations the database has and this release does not know (a newer release's, all
    # recorded as backward compatible, or this would have been refused).
    newer: tuple[str, ...] = ()

    def line(self) -> str:
        """The status in words, e.g. for `pmsgate db upgrade` and `pmsgate db check`."""
        if self.newer:
            return (
                f"database at revision {self.current}, newer than this release's {self.head} "
                f"(migrations {', '.join(self.newer)}: backward compatible)"
            )
        return f"database at revision {self.current}"


def create_engine(url: str) -> AsyncEngine:
    """An async engine for the URL; creates the SQLite file's directory when needed."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(url, connect_args={"timeout": 30})
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    return create_async_engine(url, pool_pre_ping=True)


def _sqlite_pragmas(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions that keep objects usable after commit."""
    return async_sessionmaker(engine, expire_on_commit=False)


def alembic_config(
    connection: Connection | None = None, *, script_location: Path | None = None
) -> Config:
    """Alembic configuration pointing at the packaged migrations (or ``script_location``)."""
    config = Config()
    config.set_main_option("script_location", str(script_location or MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def migration_scripts(script_location: Path | None = None) -> ScriptDirectory:
    """This release's migration files (``script_location``: another release's, in tests)."""
    return ScriptDirectory.from_config(alembic_config(script_location=script_location))


def record_revision(
    ctx: MigrationContext, step: MigrationInfo, heads: Collection[Any], run_args: Mapping[str, Any]
) -> None:
    """Alembic's ``on_version_apply``: note each migration in ``schema_revisions``.

    An upgrade records the revision with its module's ``backward_compatible`` (true unless
    the file says otherwise: additive migrations are the rule); a downgrade removes it.
    Migrations applied before the table exists are known to every release that reads it.
    """
    connection = ctx.connection
    if connection is None or not step.is_migration:
        return
    if not inspect(connection).has_table(SCHEMA_REVISIONS.name):
        return
    revision = step.up_revision_id
    connection.execute(delete(SCHEMA_REVISIONS).where(SCHEMA_REVISIONS.c.revision == revision))
    if step.is_upgrade:
        script = step.up_revision
        compatible = getattr(getattr(script, "module", None), "backward_compatible", True)
        connection.execute(
            insert(SCHEMA_REVISIONS).values(
                revision=revision,
                backward_compatible=bool(compatible),
                applied_at=func.current_timestamp(),
            )
        )


def _status(connection: Connection, scripts: ScriptDirectory) -> SchemaStatus:
    """The schema against ``scripts``; refuses a newer schema that is not compatible."""
    current = MigrationContext.configure(connection).get_current_revision()
    head = scripts.get_current_head() or ""
    known = {script.revision for script in scripts.walk_revisions()}
    if current is None or current in known:
        return SchemaStatus(current, head)
    return SchemaStatus(current, head, _newer_but_compatible(connection, current, head, known))


def _newer_but_compatible(
    connection: Connection, current: str, head: str, known: set[str]
) -> tuple[str, ...]:
    """The migrations past ``head`` the database recorded, if all are backward compatible."""
    recorded: dict[str, bool] = {}
    if inspect(connection).has_table(SCHEMA_REVISIONS.name):
        rows = connection.execute(
            select(SCHEMA_REVISIONS.c.revision, SCHEMA_REVISIONS.c.backward_compatible)
        )
        recorded = {row.revision: row.backward_compatible for row in rows}
    newer = {revision: ok for revision, ok in recorded.items() if revision not in known}
    if current not in newer:
        raise SchemaMismatch("unknown", current=current, head=head)
    breaking = tuple(sorted(revision for revision, ok in newer.items() if not ok))
    if breaking:
        raise SchemaMismatch("incompatible", current=current, head=head, breaking=breaking)
    return tuple(sorted(newer))


def _migrate(connection: Connection, script_location: Path | None) -> SchemaStatus:
    """Inside the lock: apply what is pending, unless the schema is newer than this release."""
    scripts = migration_scripts(script_location)
    status = _status(connection, scripts)  # read under the lock: another start may have migrated
    if status.newer or status.current == status.head:
        return status
    command.upgrade(alembic_config(connection, script_location=script_location), "head")
    return _status(connection, scripts)


def _check(connection: Connection, script_location: Path | None) -> SchemaStatus:
    status = _status(connection, migration_scripts(script_location))
    if not status.newer and status.current != status.head:
        raise SchemaMismatch("outdated", current=status.current, head=status.head)
    return status


async def _under_migration_lock(engine: AsyncEngine, work: Callable[[Connection], T]) -> T:
    """Run ``work`` on one connection, in one transaction, holding the migration lock.

    PostgreSQL: ``pg_advisory_xact_lock`` in the transaction alembic runs in, released by
    its commit; a second replica waits there, then finds the schema at head. SQLite:
    ``BEGIN EXCLUSIVE`` (the driver's own implicit transactions turned off for this
    connection, so that the DDL is inside it too): one writer on the file, the others wait
    up to the busy timeout (30 s) — a SQLite database is one machine's, its migrations short.
    """
    async with engine.connect() as connection:
        if engine.dialect.name == "sqlite":
            return await _sqlite_exclusive(connection, work)
        async with connection.begin():
            if engine.dialect.name == "postgresql":
                await connection.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
                )
            return await connection.run_sync(work)


async def _sqlite_exclusive(connection: AsyncConnection, work: Callable[[Connection], T]) -> T:
    connection = await connection.execution_options(isolation_level="AUTOCOMMIT")
    await connection.exec_driver_sql("BEGIN EXCLUSIVE")
    try:
        result = await connection.run_sync(work)
    except BaseException:
        await connection.exec_driver_sql("ROLLBACK")
        raise
    await connection.exec_driver_sql("COMMIT")
    return result


async def prepare_schema(
    engine: AsyncEngine, *, migrate: bool, script_location: Path | None = None
) -> SchemaStatus:
    """Make sure this release can run on the database: migrate it, or only check it.

    ``migrate``: apply the pending migrations under the migration lock (a schema newer than
    this release is left as it is, if compatible). Otherwise refuse a schema older than this
    release (:class:`SchemaMismatch` ``outdated``). Either way a newer schema with a
    migration not marked backward compatible is refused (``incompatible``).
    ``script_location`` stands for another release's migrations (tests of a rollback).
    """
    if migrate:
        return await _under_migration_lock(engine, lambda c: _migrate(c, script_location))
    async with engine.connect() as connection:
        return await connection.run_sync(lambda c: _check(c, script_location))


async def upgrade(engine: AsyncEngine) -> None:
    """Apply every pending migration (idempotent; under the migration lock)."""
    await prepare_schema(engine, migrate=True)


def _current(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def current_revision(engine: AsyncEngine) -> str | None:
    """The revision the database is at (None when never migrated)."""
    async with engine.connect() as connection:
        return await connection.run_sync(_current)


async def schema_status(engine: AsyncEngine) -> SchemaStatus:
    """Where the schema stands against this release, without changing or refusing anything
    except a newer schema this release cannot run on."""
    async with engine.connect() as connection:
        return await connection.run_sync(lambda c: _status(c, migration_scripts()))


@asynccontextmanager
async def open_database(url: str, *, migrate: bool = True) -> AsyncIterator[AsyncEngine]:
    """An engine for the URL, disposed on exit; with ``migrate``, migrated to head first
    (:func:`prepare_schema`). Without it the schema is left unchecked: the caller checks it
    (:func:`prepare_schema` with ``migrate=False``) or only needs a connection."""
    engine = create_engine(url)
    try:
        if migrate:
            await prepare_schema(engine, migrate=True)
        yield engine
    finally:
        await engine.dispose()
