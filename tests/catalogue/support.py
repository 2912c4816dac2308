"""Helpers of the catalogue tests: an editable copy of the catalogue, the CLI, a tool runner."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml
from typer.testing import CliRunner, Result

import pmsgate.catalogue
from pmsgate.app import create_app
from pmsgate.catalogue.loader import FILES
from pmsgate.cli import app
from pmsgate.clock import ManualClock
from pmsgate.container import open_container
from pmsgate.sandbox.kross.store import KrossStore
from tests.e2e.conftest import add_seeded_facility, gateway_settings
from tests.e2e.processes import free_port
from tests.support.servers import serving_app

PACKAGED = Path(pmsgate.catalogue.__file__).parent
TEMPLATE = "custom_tool_code.py"
# The workspace secrets the custom-tool code reads (tools.yaml, custom_tool).
URL_SECRET = "PMSGATE_GATEWAY_URL"
KEY_SECRET = "PMSGATE_GATEWAY_KEY"

# Runs a custom tool's code the way the platform does: main(**params), parameters on stdin.
RUNNER = """
import json, runpy, sys
namespace = runpy.run_path(sys.argv[1])
print(json.dumps(namespace["main"](**json.load(sys.stdin))))
"""


def copy_catalogue(target: Path) -> Path:
    """A copy of the packaged catalogue's data files in ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    for name in (*FILES, TEMPLATE):
        shutil.copy(PACKAGED / name, target / name)
    return target


def edit_yaml(directory: Path, name: str, change: Callable[[Any], None]) -> None:
    """Load one YAML file of a catalogue copy, change it in place, write it back."""
    path = directory / name
    data = yaml.safe_load(path.read_text("utf-8"))
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), "utf-8")


def check(directory: Path | None = None) -> Result:
    """`pmsgate catalogue check [--path DIR]` through the real CLI."""
    args = ["catalogue", "check", *(["--path", str(directory)] if directory else [])]
    return CliRunner().invoke(app, args, env={"COLUMNS": "400"})


def run_tool_code(
    code: str, params: dict[str, Any], env: dict[str, str], workdir: Path
) -> dict[str, Any]:
    """Run custom-tool code's main(**params) in a bare child interpreter; return its answer."""
    tool = workdir / "tool.py"
    runner = workdir / "run.py"
    tool.write_text(code, "utf-8")
    runner.write_text(RUNNER, "utf-8")
    # -I: isolated; -S: no site-packages, so only the standard library is importable.
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(runner), str(tool)],
        input=json.dumps(params),
        capture_output=True,
        text=True,
        env={**env, "PATH": os.environ.get("PATH", "")},
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@asynccontextmanager
async def live_gateway(
    database_url: str, kross_http: httpx.AsyncClient, kross_store: KrossStore, clock: ManualClock
) -> AsyncIterator[tuple[str, str, dict[str, Any]]]:
    """A gateway served by uvicorn on a free loopback port: (base URL, key, facility)."""
    settings = gateway_settings(database_url)
    async with open_container(settings, kross_http=kross_http, clock=clock) as container:
        record, key = await add_seeded_facility(container.gateway, kross_store)
        app = create_app(settings, container=container)
        async with serving_app(app, free_port()) as url:
            yield url, key, record
