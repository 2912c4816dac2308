"""Start `pmsgate` commands as real processes on free loopback ports."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from tests.support.servers import free_port, process_alive, wait_until_answering

__all__ = ["free_port", "pmsgate", "sandbox_process", "scratch_database", "serving"]


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
        wait_until_answering(
            ready_url,
            alive=process_alive(process),
            within=90,  # a loaded CI machine starts slowly
            failure=lambda: f"pmsgate {args[0]} did not start",
        )
        yield
    finally:
        process.terminate()
        process.wait(timeout=10)


@contextmanager
def sandbox_process() -> Iterator[tuple[int, dict[str, Any]]]:
    """`pmsgate sandbox` on a free loopback port: the port and a seeded partner facility
    (with its credentials), read from the running emulator."""
    port = free_port()
    facilities = f"http://127.0.0.1:{port}/kross/_sandbox/facilities"
    with serving("sandbox", "--port", str(port), ready_url=facilities):
        yield port, next(f for f in httpx.get(facilities).json() if f["kind"] == "partner")


@contextmanager
def scratch_database(prefix: str) -> Iterator[str]:
    """A PostgreSQL database of one test alone (``<prefix>_<random>``), dropped afterwards.

    Without PMSGATE_TEST_DATABASE_URL the test is skipped — except under CI=true (a failure).
    """
    import anyio
    import asyncpg
    from sqlalchemy.engine import make_url

    from tests.conftest import POSTGRES_URL, required_service

    url = make_url(required_service(POSTGRES_URL, "PMSGATE_TEST_DATABASE_URL"))
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
