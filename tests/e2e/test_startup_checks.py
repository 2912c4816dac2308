"""Start-up that explains itself, as a new user meets it: real `pmsgate` processes.

A setting that cannot be read or that a command cannot run without, an unreachable
database or Redis: one line per problem naming the variable and the fix, exit status 2,
no traceback, no password. A `serve` that starts prints where it listens
(docs/operations.md, Start-up checks).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from pmsgate.gateway.vault import generate_key_spec
from tests.e2e.processes import free_port

PASSWORD = "do-not-print-me"


def clean_environment(settings: dict[str, str]) -> dict[str, str]:
    """This process's environment without any PMSGATE_ variable, plus ``settings``."""
    kept = {name: value for name, value in os.environ.items() if not name.startswith("PMSGATE_")}
    return {**kept, "COLUMNS": "80", **settings}


def pmsgate(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run one `pmsgate` command to completion in a clean environment (narrow terminal:
    a line must not be wrapped)."""
    return subprocess.run(
        [sys.executable, "-m", "pmsgate.cli", *args],
        capture_output=True,
        text=True,
        env=clean_environment(env),
        timeout=120,
        check=False,
    )


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    """SQLite under a fresh data directory, no Redis, no vault key."""
    return {"PMSGATE_DATA_DIR": str(tmp_path / "data")}


def problem_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The lines a refused start printed, after checking it was refused cleanly."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    output = done.stdout + done.stderr
    assert "Traceback" not in output
    assert PASSWORD not in output
    return [line for line in done.stderr.splitlines() if line.strip()]


def test_serve_without_a_vault_key_says_how_to_make_one(env):
    lines = problem_lines(pmsgate("serve", "--port", str(free_port()), env=env))
    assert len(lines) == 1, lines
    assert lines[0].startswith("error missing_secret_keys: PMSGATE_SECRET_KEYS is not set")
    assert "`pmsgate secrets generate-key`" in lines[0]


def test_a_command_with_invalid_settings_prints_one_line_per_problem(env):
    invalid = {
        "PMSGATE_REDIS_TIMEOUT_S": "-1",
        "PMSGATE_LIMITER_SCOPE": "building",
        "PMSGATE_LOG_LEVEL": "LOUD",
        "PMSGATE_METRICS_TOKEN": "short",
    }
    lines = problem_lines(pmsgate("facilities", "list", env={**env, **invalid}))
    assert len(lines) == len(invalid), lines
    for variable in invalid:
        (line,) = [line for line in lines if variable in line]
        assert line.startswith(f"error invalid_setting: {variable}") and " hint: " in line
    assert "short" not in "\n".join(lines)  # the values are never echoed (a secret, maybe)


def test_a_variable_that_is_not_json_is_named(env):
    lines = problem_lines(pmsgate("jobs", "list", env={**env, "PMSGATE_KROSS_PATHS": "{oops"}))
    assert len(lines) == 1, lines
    assert "PMSGATE_KROSS_PATHS" in lines[0]
    assert "JSON" in lines[0]


def test_serve_names_every_setting_it_cannot_start_with(env):
    wrong = {
        "PMSGATE_SECRET_KEYS": "not-a-key",
        "PMSGATE_DATABASE_URL": f"postgresql://user:{PASSWORD}@127.0.0.1/db",
        "PMSGATE_REDIS_URL": "http://127.0.0.1:6379",
    }
    lines = problem_lines(pmsgate("serve", env={**env, **wrong}))
    assert len(lines) == 3, lines
    for variable in wrong:
        assert any(f": {variable} " in line for line in lines), (variable, lines)


def test_serve_with_the_database_unreachable_says_which_and_what_to_check(env):
    port = free_port()  # closed: nobody listens
    url = f"postgresql+asyncpg://pmsgate:{PASSWORD}@127.0.0.1:{port}/pmsgate"
    settings = {"PMSGATE_SECRET_KEYS": generate_key_spec("e2e"), "PMSGATE_DATABASE_URL": url}
    lines = problem_lines(pmsgate("serve", env={**env, **settings}))
    assert len(lines) == 1, lines
    assert lines[0].startswith("error database_unavailable: PMSGATE_DATABASE_URL")
    assert f"postgresql database at 127.0.0.1:{port} could not be reached" in lines[0]
    assert "connection refused" in lines[0]


def test_serve_with_redis_unreachable_says_which_and_what_to_check(env):
    port = free_port()
    settings = {
        "PMSGATE_SECRET_KEYS": generate_key_spec("e2e"),
        "PMSGATE_REDIS_URL": f"redis://:{PASSWORD}@127.0.0.1:{port}/0",
    }
    lines = problem_lines(pmsgate("serve", env={**env, **settings}))
    assert len(lines) == 1, lines
    assert lines[0].startswith("error redis_unavailable: PMSGATE_REDIS_URL")
    assert f"Redis at 127.0.0.1:{port} could not be reached (connection refused)" in lines[0]


def test_db_upgrade_with_the_database_unreachable_is_refused_cleanly(env):
    url = f"postgresql+asyncpg://pmsgate:{PASSWORD}@127.0.0.1:{free_port()}/pmsgate"
    done = pmsgate("db", "upgrade", env={**env, "PMSGATE_DATABASE_URL": url})
    lines = problem_lines(done)
    assert "database_unavailable" in lines[0]


@pytest.fixture
def served(env) -> Iterator[tuple[str, dict[str, str]]]:
    """`pmsgate serve` on a port of its choosing (0); yields the line it printed first."""
    settings = {**env, "PMSGATE_SECRET_KEYS": generate_key_spec("e2e")}
    process = subprocess.Popen(
        [sys.executable, "-m", "pmsgate.cli", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=clean_environment(settings),
    )
    try:
        assert process.stdout is not None
        yield process.stdout.readline().strip(), settings  # EOF ("") if it died first
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_serve_prints_the_address_it_listens_on(served):
    line, _ = served
    prefix = "pmsgate listening on http://127.0.0.1:"
    assert line.startswith(prefix) and line.endswith(" (docs at /docs)"), line
    base = line.removesuffix(" (docs at /docs)").removeprefix("pmsgate listening on ")
    assert httpx.get(f"{base}/healthz").json()["status"] == "ok"
    docs = httpx.get(f"{base}/docs")
    assert docs.status_code == 200
    assert "/docs/assets/swagger-ui-bundle.js" in docs.text


def test_a_failure_in_the_apps_own_start_up_is_one_line_too(env):
    # Checked only when the app starts: the metrics listener's address, here taken.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        settings = {
            "PMSGATE_SECRET_KEYS": generate_key_spec("e2e"),
            "PMSGATE_METRICS_ADDRESS": address,
        }
        lines = problem_lines(pmsgate("serve", "--port", "0", env={**env, **settings}))
    (line,) = [line for line in lines if line.startswith("error ")]
    assert line.startswith(
        f"error metrics_address_unavailable: The metrics listener cannot listen on {address}"
    )
    assert "hint: Choose a free address" in line
