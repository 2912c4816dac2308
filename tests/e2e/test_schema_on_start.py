"""The schema at start, as an operator meets it: real `pmsgate` processes.

Commands never migrate (only `db upgrade`, and `serve` with PMSGATE_MIGRATE_ON_START);
a database older than the release is refused in one line; two replicas migrating an
empty PostgreSQL database at once both come up; and the previous release — this code
with the newest migration file taken out, as that release shipped — starts on the
upgraded database and serves (docs/deploy.md, Rolling back).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

import pmsgate
from pmsgate.config import Settings
from pmsgate.gateway.vault import generate_key_spec
from pmsgate.storage.db import current_revision, migration_scripts, open_database
from tests.e2e.processes import scratch_database
from tests.e2e.test_startup_checks import clean_environment, problem_lines
from tests.e2e.test_startup_checks import pmsgate as run_pmsgate
from tests.support.db import upgrade_to

SCRIPTS = migration_scripts()
HEAD = SCRIPTS.get_current_head()
assert HEAD is not None


def revision_of(url: str) -> str | None:
    async def read() -> str | None:
        async with open_database(url, migrate=False) as engine:
            return await current_revision(engine)

    return anyio.run(read)


def migrate_to(url: str, revision: str) -> None:
    async def upgrade() -> None:
        async with open_database(url, migrate=False) as engine, engine.begin() as connection:
            await upgrade_to(connection, revision)

    anyio.run(upgrade)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A SQLite database, a vault key, and `serve` told not to migrate (as on PostgreSQL)."""
    return {
        "PMSGATE_DATA_DIR": str(tmp_path / "data"),
        "PMSGATE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'pmsgate.db'}",
        "PMSGATE_SECRET_KEYS": generate_key_spec("e2e"),
        "PMSGATE_MIGRATE_ON_START": "false",
    }


def start_serve(env: dict[str, str], *, pythonpath: Path | None = None) -> subprocess.Popen[str]:
    """`pmsgate serve --port 0` started (another release's code first on the path if given)."""
    settings = dict(env)
    if pythonpath is not None:
        settings["PYTHONPATH"] = str(pythonpath)
    return subprocess.Popen(
        [sys.executable, "-m", "pmsgate.cli", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_environment(settings),
    )


def base_url(process: subprocess.Popen[str]) -> str:
    """The address a started `serve` prints once it listens (fails the test if it died)."""
    assert process.stdout is not None and process.stderr is not None
    line = process.stdout.readline().strip()  # EOF ("") if it died first
    if not line:
        process.wait(timeout=10)
        pytest.fail(f"serve did not start: {process.stderr.read()}")
    return line.removesuffix(" (docs at /docs)").removeprefix("pmsgate listening on ")


@contextmanager
def stopped_at_exit(process: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    try:
        yield process
    finally:
        process.terminate()
        process.wait(timeout=10)


@contextmanager
def serving(env: dict[str, str], *, pythonpath: Path | None = None) -> Iterator[str]:
    """`pmsgate serve --port 0` until the block ends; yields its base URL."""
    with stopped_at_exit(start_serve(env, pythonpath=pythonpath)) as process:
        yield base_url(process)


def previous_release(where: Path) -> tuple[Path, str]:
    """This code without the newest migration file: the release before it, as it shipped.

    Returns the directory to put first on PYTHONPATH and that release's head revision.
    """
    source = Path(pmsgate.__file__).parent
    shutil.copytree(source, where / "pmsgate", ignore=shutil.ignore_patterns("__pycache__"))
    newest = SCRIPTS.get_revision(HEAD)
    assert newest is not None and newest.down_revision is not None
    (where / "pmsgate" / "storage" / "migrations" / "versions" / Path(newest.path).name).unlink()
    return where, str(newest.down_revision)


def test_a_read_only_command_on_an_older_database_refuses_in_one_line_and_never_migrates(env):
    url = env["PMSGATE_DATABASE_URL"]
    migrate_to(url, "0011")
    lines = problem_lines(run_pmsgate("facilities", "list", env=env))
    assert lines == [
        f"error schema_outdated: The database is at revision 0011, this release needs {HEAD}: "
        "run `pmsgate db upgrade` (or set PMSGATE_MIGRATE_ON_START=true to migrate at start)."
    ]
    problem_lines(run_pmsgate("jobs", "list", env=env))
    assert revision_of(url) == "0011"


def test_serve_not_migrating_on_an_empty_database_refuses_until_db_upgrade_ran(env):
    lines = problem_lines(run_pmsgate("serve", "--port", "0", env=env))
    assert len(lines) == 1 and lines[0].startswith("error schema_outdated:"), lines
    assert "revision none (an empty database)" in lines[0]

    upgraded = run_pmsgate("db", "upgrade", env=env)
    assert upgraded.returncode == 0, upgraded.stderr
    assert f"database at revision {HEAD}" in upgraded.stdout
    checked = run_pmsgate("db", "check", env=env)
    assert checked.returncode == 0, checked.stderr
    with serving(env) as base:
        assert httpx.get(f"{base}/readyz").json()["status"] == "ready"


def test_serve_with_migrate_on_start_migrates_an_older_database(env):
    url = env["PMSGATE_DATABASE_URL"]
    migrate_to(url, "0011")
    with serving({**env, "PMSGATE_MIGRATE_ON_START": "true"}) as base:
        assert httpx.get(f"{base}/readyz").status_code == 200
    assert revision_of(url) == HEAD


def test_the_previous_release_starts_and_serves_on_the_upgraded_database(env, tmp_path):
    upgraded = run_pmsgate("db", "upgrade", env=env)  # this release: the newest schema
    assert upgraded.returncode == 0, upgraded.stderr
    code, previous_head = previous_release(tmp_path / "previous")

    checked = subprocess.run(
        [sys.executable, "-m", "pmsgate.cli", "db", "check"],
        capture_output=True,
        text=True,
        env=clean_environment({**env, "PYTHONPATH": str(code)}),
        timeout=120,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr
    assert f"newer than this release's {previous_head}" in checked.stdout  # the old code ran
    token = "admin-token-of-the-rollback-test-0123456789"
    with serving({**env, "PMSGATE_ADMIN_TOKEN": token}, pythonpath=code) as base:
        ready = httpx.get(f"{base}/readyz")
        assert ready.status_code == 200, ready.text
        listed = httpx.get(f"{base}/admin/facilities", headers={"Authorization": f"Bearer {token}"})
        assert listed.status_code == 200, listed.text  # it reads the tables it knows
    assert revision_of(env["PMSGATE_DATABASE_URL"]) == HEAD  # left as it was


@pytest.mark.postgres
def test_two_replicas_started_together_on_an_empty_postgresql_database_both_come_up(env):
    with scratch_database("pmsgate_replicas") as url, ExitStack() as replicas:
        settings = {**env, "PMSGATE_DATABASE_URL": url, "PMSGATE_MIGRATE_ON_START": "true"}
        # Both started before either has migrated: they reach the empty database together.
        processes = [
            replicas.enter_context(stopped_at_exit(start_serve(settings))) for _ in range(2)
        ]
        for process in processes:
            base = base_url(process)
            assert httpx.get(f"{base}/readyz").json()["status"] == "ready"
        assert revision_of(url) == HEAD


def test_only_the_embedded_sqlite_migrates_on_start_unless_told(tmp_path):
    postgres = "postgresql+asyncpg://pmsgate@db.example:5432/pmsgate"
    sqlite = f"sqlite+aiosqlite:///{tmp_path}/x.db"

    def migrates(**values: Any) -> bool:
        return Settings(data_dir=tmp_path, **values).migrates_on_start

    assert migrates(database_url=None) and migrates(database_url=sqlite)
    assert not migrates(database_url=postgres)
    assert migrates(database_url=postgres, migrate_on_start=True)
    assert not migrates(migrate_on_start=False)
