"""Start `pmsgate` commands as real processes on free loopback ports."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import httpx


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pmsgate(
    *args: str, env: dict[str, str], stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run one `pmsgate` command to completion."""
    return subprocess.run(
        [sys.executable, "-m", "pmsgate.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", **env},
        timeout=120,
        check=False,
    )


@contextmanager
def serving(*args: str, ready_url: str, env: dict[str, str] | None = None) -> Iterator[None]:
    """Run a long-lived `pmsgate` command until the block ends; wait until it answers."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pmsgate.cli", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )
    try:
        deadline = time.monotonic() + 90  # a loaded CI machine starts slowly
        while True:  # readiness wait for a child process, not a timing assertion
            try:
                httpx.get(ready_url, timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"pmsgate {args[0]} did not start") from None
                time.sleep(0.05)
        yield
    finally:
        process.terminate()
        process.wait(timeout=10)


@contextmanager
def scratch_database(prefix: str) -> Iterator[str]:
    """A PostgreSQL database of one test alone (``<prefix>_<random>``), dropped afterwards.

    Without PMSGATE_TEST_DATABASE_URL the test is skipped — except under CI=true (a failure).
    """
    import anyio
    import asyncpg
    import pytest
    from sqlalchemy.engine import make_url

    from tests.conftest import IN_CI, POSTGRES_URL

    if not POSTGRES_URL:
        if IN_CI:
            pytest.fail("CI=true but PMSGATE_TEST_DATABASE_URL is not set")
        pytest.skip("PMSGATE_TEST_DATABASE_URL is not set")
    url = make_url(str(POSTGRES_URL))
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    admin = url.set(drivername="postgresql").render_as_string(hide_password=False)

    async def run(statement: str) -> None:
        connection = await asyncpg.connect(admin)
        try:
            await connection.execute(statement)
        finally:
            await connection.close()

    anyio.run(run, f'CREATE DATABASE "{name}"')
    try:
        yield url.set(database=name).render_as_string(hide_password=False)
    finally:
        anyio.run(run, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
