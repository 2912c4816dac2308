"""Shared fixtures: emulators reached through real clients over ASGI transports."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import stamina
import structlog

from pmsgate.clock import ManualClock

IN_CI = os.environ.get("CI", "").lower() == "true"

# Rich sizes tables to the terminal; a fixed width keeps CLI output identical everywhere
# (CI workers have no terminal or a "dumb" one, and a narrow table would truncate what
# tests look for).
os.environ["COLUMNS"] = "300"
os.environ["TERM"] = "xterm-256color"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def isolated_logging() -> Iterator[None]:
    # A CLI test configures structlog globally (level, output); never let that leak onward.
    yield
    structlog.reset_defaults()


@pytest.fixture(autouse=True)
def no_retry_waits() -> Iterator[None]:
    # Every upstream client retries through stamina (pmsgate.integrations.kit.retry); in tests the
    # decisions and attempt counts stay real and only the wall-clock waits are skipped.
    with stamina.set_testing(True, attempts=1_000, cap=True):
        yield


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def kross_store(clock: ManualClock):  # type: ignore[no-untyped-def]
    from pmsgate.sandbox.kross.seed import SANDBOX_PARTNER_API_KEY
    from pmsgate.sandbox.kross.store import KrossStore

    return KrossStore(seed=7, clock=clock, partner_api_key=SANDBOX_PARTNER_API_KEY)


@pytest.fixture
async def kross_http(kross_store) -> AsyncIterator[httpx.AsyncClient]:  # type: ignore[no-untyped-def]
    """An httpx client whose transport is the booking-system emulator (base URL included)."""
    from pmsgate.sandbox.kross.app import create_kross_app

    transport = httpx.ASGITransport(app=create_kross_app(kross_store))
    async with httpx.AsyncClient(transport=transport, base_url="http://kross.test") as http:
        yield http


# --- databases: SQLite always, PostgreSQL when PMSGATE_TEST_DATABASE_URL is set (CI) ---

POSTGRES_URL = os.environ.get("PMSGATE_TEST_DATABASE_URL")
REDIS_URL = os.environ.get("PMSGATE_TEST_REDIS_URL")

if IN_CI and not (POSTGRES_URL and REDIS_URL):
    raise RuntimeError(
        "CI=true needs PMSGATE_TEST_DATABASE_URL and PMSGATE_TEST_REDIS_URL (see .ci/run)."
    )

DATABASE_BACKENDS = ["sqlite", *(["postgres"] if POSTGRES_URL else [])]


def required_service(url: str | None, variable: str) -> str:
    """The test service's URL from ``variable``; when unset the test is skipped, except
    under CI=true, where a missing service is a failure."""
    if not url:
        if IN_CI:
            pytest.fail(f"CI=true but {variable} is not set")
        pytest.skip(f"{variable} is not set")
    return url


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """A scratch PostgreSQL database of this test run (created, then dropped)."""
    import asyncio
    import uuid
    from concurrent.futures import ThreadPoolExecutor

    from sqlalchemy.engine import make_url
    from sqlalchemy.ext.asyncio import create_async_engine

    postgres = required_service(POSTGRES_URL, "PMSGATE_TEST_DATABASE_URL")
    name = f"pmsgate_test_{uuid.uuid4().hex[:10]}"

    async def _admin(statement: str) -> None:
        engine = create_async_engine(postgres, isolation_level="AUTOCOMMIT")
        try:
            async with engine.connect() as connection:
                from sqlalchemy import text

                await connection.execute(text(statement))
        finally:
            await engine.dispose()

    def run(statement: str) -> None:
        # Own thread: this fixture may be first requested from inside the test's event loop.
        with ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(asyncio.run, _admin(statement)).result()

    # Unreachable PostgreSQL fails here loudly: under CI a missing service is a failure.
    run(f'CREATE DATABASE "{name}"')
    yield make_url(postgres).set(database=name).render_as_string(hide_password=False)
    run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    """A SQLite file migrated once per run; each test gets a copy (migrating is the slow part)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from pmsgate.storage.db import create_engine, upgrade

    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"

    async def migrate() -> None:
        engine = create_engine(f"sqlite+aiosqlite:///{path}")
        try:
            await upgrade(engine)
        finally:
            await engine.dispose()

    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, migrate()).result()
    return path


@pytest.fixture
def sqlite_url(sqlite_template: Path, tmp_path: Path) -> str:
    """A migrated, empty SQLite database of this test alone: a copy of the template."""
    import shutil

    path = tmp_path / "test.db"
    shutil.copyfile(sqlite_template, path)
    return f"sqlite+aiosqlite:///{path}"


@pytest.fixture(params=DATABASE_BACKENDS)
async def database_url(request, tmp_path) -> AsyncIterator[str]:  # type: ignore[no-untyped-def]
    """A migrated, empty database: a copy of the SQLite template, or PostgreSQL emptied."""
    from sqlalchemy import text

    from pmsgate.storage.db import create_engine, upgrade

    if request.param == "sqlite":
        yield request.getfixturevalue("sqlite_url")
        return
    url = request.getfixturevalue("postgres_url")
    engine = create_engine(url)
    try:
        async with engine.begin() as connection:
            at_head = await connection.run_sync(_at_head)
        if not at_head:  # repairs a test that left another revision (or a fresh database)
            await upgrade(engine)
        async with engine.begin() as connection:
            await connection.execute(text(_EMPTY_EVERY_TABLE))
    finally:
        await engine.dispose()
    yield url


def _at_head(connection: Any) -> bool:
    """Whether the database's revision is this code's newest (one short read)."""
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision() == _HEAD


def _head() -> str | None:
    from pmsgate.storage.db import migration_scripts

    return migration_scripts().get_current_head()


def _empty_every_table() -> str:
    """One round trip that empties every table and restarts its ids (a DO block).

    Children before parents (foreign keys hold); ten times faster than TRUNCATE of every
    table, which dominated a PostgreSQL test's set-up.
    """
    from pmsgate.storage import models  # noqa: F401  # registers every table on Base
    from pmsgate.storage.db import Base

    tables = [table.name for table in reversed(Base.metadata.sorted_tables)]
    assert tables, "no table is registered on Base"
    deletes = "".join(f'  DELETE FROM "{name}";\n' for name in tables)
    return (
        "DO $$\nDECLARE r record;\nBEGIN\n"
        + deletes
        + "  FOR r IN SELECT schemaname, sequencename FROM pg_sequences\n"
        "           WHERE schemaname = current_schema() LOOP\n"
        "    PERFORM setval(format('%I.%I', r.schemaname, r.sequencename), 1, false);\n"
        "  END LOOP;\nEND $$;"
    )


_EMPTY_EVERY_TABLE = _empty_every_table()
_HEAD = _head()


# --- Redis: when PMSGATE_TEST_REDIS_URL is set (always under CI=true) ---


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The test Redis URL: skipped locally when unset; under CI an unreachable Redis FAILS."""
    redis_url = required_service(REDIS_URL, "PMSGATE_TEST_REDIS_URL")
    import redis as sync_redis

    client = sync_redis.Redis.from_url(redis_url, socket_connect_timeout=3)
    try:
        client.ping()
    except sync_redis.RedisError as exc:
        # A configured but unreachable Redis is a broken environment, never a skip.
        pytest.fail(f"Redis at PMSGATE_TEST_REDIS_URL is unreachable: {type(exc).__name__}")
    finally:
        client.close()
    return redis_url


@pytest.fixture
def redis_namespace() -> Iterator[str]:
    """A key prefix of this test alone; its keys are deleted afterwards (never FLUSHDB)."""
    import uuid

    namespace = f"pmsgate-test-{uuid.uuid4().hex[:12]}"
    yield namespace
    if not REDIS_URL:
        return
    import redis as sync_redis

    client = sync_redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3)
    try:
        keys = list(client.scan_iter(match=f"{namespace}*", count=500))
        if keys:
            client.delete(*keys)
    except sync_redis.RedisError:
        pass  # unreachable: a test that needed Redis has already failed through redis_url
    finally:
        client.close()


@pytest.fixture
async def sessions(database_url: str) -> AsyncIterator[Any]:
    """An ``async_sessionmaker`` on the (migrated) test database."""
    from pmsgate.storage.db import open_database, session_factory

    async with open_database(database_url) as engine:
        yield session_factory(engine)


@pytest.fixture(params=["memory", "redis"])
def redis_or_memory(request: pytest.FixtureRequest) -> Any:
    """No Redis (state in memory), then the test Redis: a test using it runs on both."""
    return request.getfixturevalue("redis_client") if request.param == "redis" else None


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[Any]:
    """An asyncio Redis client on the test Redis (closed afterwards)."""
    from redis.asyncio import Redis

    client = Redis.from_url(redis_url)
    try:
        yield client
    finally:
        await client.aclose()
