"""Running `pmsgate` in-process from an async test, keeping everything it printed."""

from __future__ import annotations

import json
from typing import Any

import anyio
from typer.testing import CliRunner, Result

from pmsgate.cli import app
from pmsgate.config import get_settings


class CliRecorder:
    """Runs `pmsgate <args>` and keeps its standard output and error (to check for secrets)."""

    def __init__(self) -> None:
        self.printed: list[str] = []

    async def run(self, *args: str) -> Result:
        """Run `pmsgate <args>` in a worker thread (the CLI runs its own event loop)."""
        get_settings.cache_clear()

        def invoke() -> Result:
            return CliRunner().invoke(app, list(args), env={"COLUMNS": "300"})

        result = await anyio.to_thread.run_sync(invoke)
        self.printed += [result.stdout, result.stderr]
        return result

    async def json(self, *args: str, exit_code: int = 0) -> dict[str, Any]:
        """Run with ``--json``; the one JSON object it printed (after checking the exit code)."""
        result = await self.run(*args, "--json")
        assert result.exit_code == exit_code, (result.stdout, result.stderr)
        parsed: dict[str, Any] = json.loads(result.stdout)
        return parsed
