"""The schema changes only deliberately, and a rollback by image works (docs/deploy.md).

On SQLite and PostgreSQL: a release refuses a database older than itself unless told to
migrate; two starts migrating an empty database together both succeed (the migration
lock); and the *previous release* — this code with its migration files truncated before
a newer migration, the way that release shipped them — runs on the newest schema after
every additive migration, and refuses one a migration marked not backward compatible,
naming both revisions.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from sqlalchemy import delete, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from pmsgate.container import SchemaError, prepare_database
from pmsgate.storage.db import (
    MIGRATIONS_DIR,
    SCHEMA_REVISIONS,
    SchemaMismatch,
    current_revision,
    migration_scripts,
    open_database,
    prepare_schema,
)
from tests.conftest import DATABASE_BACKENDS
from tests.e2e.processes import scratch_database
from tests.support.db import downgrade_to, upgrade_to

pytestmark = pytest.mark.anyio

SCRIPTS = migration_scripts()
HEAD = SCRIPTS.get_current_head()
# Base first, head last (the history is one line).
REVISIONS = [script.revision for script in reversed(list(SCRIPTS.walk_revisions()))]


@pytest.fixture(params=DATABASE_BACKENDS)
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database of this test alone: a new SQLite file, or a scratch PostgreSQL one."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}"
        return
    with scratch_database("pmsgate_schema") as url:
        yield url


@pytest.fixture
async def migrated_url(empty_url: str) -> AsyncIterator[str]:
    """The empty database, migrated to this release's head."""
    async with open_database(empty_url):
        pass
    yield empty_url


def release_before(revision: str, where: Path) -> Path:
    """The migrations of the release before ``revision``: this directory without the files
    of ``revision`` and every later one (what that release shipped)."""
    later = REVISIONS[REVISIONS.index(revision) :]
    shutil.copytree(MIGRATIONS_DIR, where, ignore=shutil.ignore_patterns("__pycache__"))
    for name in later:
        script = SCRIPTS.get_revision(name)
        assert script is not None
        (where / "versions" / Path(script.path).name).unlink()
    return where


def release_after(where: Path, *, backward_compatible: bool) -> tuple[Path, str]:
    """The migrations of a *next* release: this one's plus one more revision on the head."""
    shutil.copytree(MIGRATIONS_DIR, where, ignore=shutil.ignore_patterns("__pycache__"))
    revision = "9001"
    (where / "versions" / f"{revision}_next.py").write_text(
        f'"""next: a table, or a contraction."""\n'
        f"import sqlalchemy as sa\nfrom alembic import op\n\n"
        f"revision = {revision!r}\ndown_revision = {HEAD!r}\n"
        f"branch_labels = None\ndepends_on = None\n"
        f"backward_compatible = {backward_compatible}\n\n\n"
        "def upgrade() -> None:\n"
        "    op.create_table('next_things', sa.Column('id', sa.Integer(), primary_key=True))\n\n\n"
        "def downgrade() -> None:\n    op.drop_table('next_things')\n"
    )
    return where, revision


async def test_a_release_refuses_a_database_older_than_itself_and_leaves_it_as_it_is(
    empty_url: str,
) -> None:
    async with open_database(empty_url, migrate=False) as engine:
        async with engine.begin() as connection:
            await upgrade_to(connection, "0011")
        with pytest.raises(SchemaMismatch) as refused:
            await prepare_schema(engine, migrate=False)
        with pytest.raises(SchemaError) as said:
            await prepare_database(engine, migrate=False)
        assert await current_revision(engine) == "0011"
    assert (refused.value.kind, refused.value.current, refused.value.head) == (
        "outdated",
        "0011",
        HEAD,
    )
    assert said.value.code == "schema_outdated"
    assert f"revision 0011, this release needs {HEAD}" in said.value.message
    assert "`pmsgate db upgrade`" in said.value.message


async def test_an_empty_database_is_refused_unless_told_to_migrate(empty_url: str) -> None:
    async with open_database(empty_url, migrate=False) as engine:
        with pytest.raises(SchemaMismatch) as refused:
            await prepare_schema(engine, migrate=False)
        assert refused.value.current is None
        status = await prepare_schema(engine, migrate=True)
        assert (status.current, status.newer) == (HEAD, ())
        assert await prepare_schema(engine, migrate=False) == status


async def test_two_starts_migrating_an_empty_database_together_both_succeed(
    empty_url: str,
) -> None:
    revisions: list[str | None] = []

    async def start() -> None:
        async with open_database(empty_url, migrate=False) as engine:
            revisions.append((await prepare_schema(engine, migrate=True)).current)

    async with anyio.create_task_group() as starts:
        starts.start_soon(start)
        starts.start_soon(start)
    assert revisions == [HEAD, HEAD]


async def test_each_migration_since_the_record_exists_is_recorded_with_its_compatibility(
    migrated_url: str,
) -> None:
    async with open_database(migrated_url, migrate=False) as engine, engine.connect() as db:
        rows = (await db.execute(select(SCHEMA_REVISIONS))).all()
    recorded = {row.revision: row.backward_compatible for row in rows}
    first = min(recorded)
    assert list(recorded) and sorted(recorded) == REVISIONS[REVISIONS.index(first) :]
    for revision, compatible in recorded.items():
        script = SCRIPTS.get_revision(revision)
        assert script is not None
        # Every migration file says it explicitly (script.py.mako writes the line).
        assert compatible is script.module.backward_compatible


async def test_the_previous_release_runs_on_the_newest_schema_after_every_additive_migration(
    migrated_url: str, tmp_path: Path
) -> None:
    async with open_database(migrated_url, migrate=False) as engine:
        async with engine.connect() as db:
            rows = (await db.execute(select(SCHEMA_REVISIONS))).all()
        compatible = {row.revision: row.backward_compatible for row in rows}
        for revision in sorted(compatible):
            previous = release_before(revision, tmp_path / f"before-{revision}")
            newer = tuple(r for r in sorted(compatible) if r >= revision)
            if all(compatible[r] for r in newer):
                # Checked, and asked to migrate (PMSGATE_MIGRATE_ON_START): it runs, unchanged.
                for migrate in (False, True):
                    status = await prepare_schema(engine, migrate=migrate, script_location=previous)
                    assert (status.current, status.newer) == (HEAD, newer)
            else:
                with pytest.raises(SchemaMismatch) as refused:
                    await prepare_schema(engine, migrate=False, script_location=previous)
                assert refused.value.kind == "incompatible"
        assert await current_revision(engine) == HEAD


@asynccontextmanager
async def on_the_next_release(
    migrated_url: str, tmp_path: Path, *, compatible: bool
) -> AsyncIterator[tuple[AsyncEngine, str]]:
    """The database migrated on to a next release's schema (its one migration backward
    compatible or not); the engine and that release's revision."""
    following, revision = release_after(tmp_path / "next", backward_compatible=compatible)
    async with open_database(migrated_url, migrate=False) as engine:
        await prepare_schema(engine, migrate=True, script_location=following)
        yield engine, revision


async def test_this_release_runs_on_the_schema_of_a_next_release_whose_migration_is_additive(
    migrated_url: str, tmp_path: Path
) -> None:
    async with on_the_next_release(migrated_url, tmp_path, compatible=True) as (engine, revision):
        status = await prepare_database(engine, migrate=False)
        assert (status.current, status.newer) == (revision, (revision,))
        assert "newer than this release's" in status.line()
        # `db upgrade` of this release on it: nothing to do, nothing undone.
        await prepare_database(engine, migrate=True)
        assert await current_revision(engine) == revision


async def test_a_migration_not_backward_compatible_is_refused_naming_both_revisions(
    migrated_url: str, tmp_path: Path
) -> None:
    async with on_the_next_release(migrated_url, tmp_path, compatible=False) as (engine, revision):
        for migrate in (False, True):
            with pytest.raises(SchemaError) as refused:
                await prepare_database(engine, migrate=migrate)
            assert refused.value.code == "schema_incompatible"
            assert f"migration {revision} is not backward compatible" in refused.value.message
            assert f"this release (revision {HEAD})" in refused.value.message
        assert await current_revision(engine) == revision


async def test_a_newer_schema_that_records_nothing_is_refused_as_unknown(
    migrated_url: str,
) -> None:
    async with open_database(migrated_url, migrate=False) as engine:
        async with engine.begin() as db:
            await db.execute(text("UPDATE alembic_version SET version_num = '9999'"))
            await db.execute(delete(SCHEMA_REVISIONS))
        with pytest.raises(SchemaError) as refused:
            await prepare_database(engine, migrate=False)
    assert refused.value.code == "schema_unknown"
    assert "9999" in refused.value.message and HEAD in refused.value.message


async def test_a_downgrade_removes_its_record(migrated_url: str) -> None:
    previous = REVISIONS[-2]
    async with open_database(migrated_url, migrate=False) as engine:
        async with engine.begin() as connection:
            await downgrade_to(connection, previous)
        async with engine.connect() as db:
            has_table = await db.run_sync(lambda c: c.dialect.has_table(c, SCHEMA_REVISIONS.name))
            recorded = (
                set((await db.execute(select(SCHEMA_REVISIONS.c.revision))).scalars())
                if has_table
                else set()
            )
        assert HEAD not in recorded
        await prepare_schema(engine, migrate=True)  # and back
        assert await current_revision(engine) == HEAD
