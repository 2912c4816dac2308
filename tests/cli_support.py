"""Running `pmsgate` in-process from an async test, keeping everything it printed."""

from __future__ import annotations

import json
from typing import Any

import anyio
from typer.testing import CliRunner, Result

from pmsgate.cli import app
from pmsgate.config import get_settings


async def pmsgate(*args: str, input: str | None = None, **env: str) -> Result:
    """Run `pmsgate <args>` in a worker thread (the CLI runs its own event loop), with
    ``input`` on its standard input and ``env`` added to its environment."""
    get_settings.cache_clear()

    def invoke() -> Result:
        return CliRunner().invoke(app, list(args), input=input, env=env)

    return await anyio.to_thread.run_sync(invoke)


class CliRecorder:
    """Runs `pmsgate <args>` and keeps its standard output and error (to check for secrets)."""

    def __init__(self) -> None:
        self.printed: list[str] = []

    async def run(self, *args: str, input: str | None = None) -> Result:
        """Run `pmsgate <args>` (see :func:`pmsgate`), wide enough for every table column."""
        result = await pmsgate(*args, input=input, COLUMNS="300")
        self.printed += [result.stdout, result.stderr]
        return result

    async def json(
        self, *args: str, exit_code: int = 0, input: str | None = None
    ) -> dict[str, Any]:
        """Run with ``--json``; the one JSON object it printed (after checking the exit code)."""
        result = await self.run(*args, "--json", input=input)
        assert result.exit_code == exit_code, (result.stdout, result.stderr)
        parsed: dict[str, Any] = json.loads(result.stdout)
        return parsed


def assert_failed_with(result: Result, code: str) -> None:
    """Exit status 2 and `error <code>:` plus a hint on standard error."""
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert f"error {code}:" in result.stderr
    assert "hint:" in result.stderr
