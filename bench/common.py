"""Shared pieces of the benchmarks: settings, a gateway on the emulator, timing, statistics."""

from __future__ import annotations

import gc
import json
import math
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, MutableMapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI
from pydantic import SecretStr

from pmsgate.app import create_app
from pmsgate.clock import Clock
from pmsgate.config import Settings
from pmsgate.container import open_container
from pmsgate.gateway.context import GatewayServices
from pmsgate.gateway.facilities import Limits, NewFacility
from pmsgate.gateway.vault import generate_key_spec
from pmsgate.integrations.kross.credentials import Credentials
from pmsgate.sandbox.kross.seed import SANDBOX_PARTNER_API_KEY

KROSS_HOST = "http://kross.bench"
GATEWAY_HOST = "http://gateway.bench"
SECRET_KEYS = generate_key_spec("bench1")
# "Never blocks" for the overhead benchmark: the limiter must not be what is measured.
UNLIMITED = Limits(per_minute=1_000_000_000, per_hour=1_000_000_000, per_day=1_000_000_000)
TIMINGS_PATH = "/_bench/server-timings"
# A request carrying this header is timed under its value instead of its path.
TAG_HEADER = b"x-bench-tag"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class BenchConfig:
    """What every benchmark's knobs share: the seed of the emulators' data and of the
    benchmark's own random choices."""

    seed: int = 7


def gateway_settings(database_url: str, kross_base_url: str, **overrides: Any) -> Settings:
    """Settings of a benchmarked gateway: SQLite, in-memory limiter and cache, no limiter wait.

    ``limiter_wait_s=0``: with an injected clock a wait would sleep in real time while
    the simulated clock stands still, so a call without a permit is answered at once
    (stale from the cache, or 429).
    """
    values: dict[str, Any] = {
        "database_url": database_url,
        "kross_base_url": kross_base_url,
        "partner_api_key": SecretStr(SANDBOX_PARTNER_API_KEY),
        "secret_keys": SecretStr(SECRET_KEYS),
        "limiter_wait_s": 0.0,
        "log_level": "WARNING",
    }
    values.update(overrides)
    return Settings(**values)


def credentials_of(record: dict[str, Any]) -> Credentials:
    """The booking-system credentials of one of the emulator's seeded facilities."""
    return Credentials(
        hotel_id=record["hotel_id"],
        username=record["username"],
        password=SecretStr(record["password"]),
        api_key=SecretStr(record["api_key"]),
    )


def sqlite_url(directory: str, name: str = "gateway.db") -> str:
    """An aiosqlite URL of a file in ``directory`` (created and migrated by open_container)."""
    return f"sqlite+aiosqlite:///{os.path.join(directory, name)}"


def new_facility(record: dict[str, Any], limits: Limits | None = None) -> NewFacility:
    """The registration of one of the emulator's seeded facilities."""
    return NewFacility(
        hotel_id=record["hotel_id"],
        username=record["username"],
        password=SecretStr(record["password"]),
        kind=record["kind"],
        api_key=SecretStr(record["api_key"]) if record["kind"] == "own" else None,
        integration_id=f"int-{record['hotel_id']}",
        name=record["name"],
        limits=limits or Limits(),
    )


class ServerTimer:
    """ASGI wrapper: how long each HTTP request spends inside the wrapped app.

    The time runs from the moment the server hands the request to the app until the
    app returns, i.e. after the last body chunk was handed back to the server: routing,
    middleware, authentication, the tool and JSON rendering, not the network or the
    client. ``GET /_bench/server-timings`` answers the samples (by path, or by the value of
    an ``X-Bench-Tag`` header) and clears them.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.samples: dict[str, list[float]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope["path"])
        if path == TIMINGS_PATH:
            body = json.dumps(self.samples).encode()
            self.samples = {}
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        label = path
        for name, value in scope.get("headers", ()):
            if name == TAG_HEADER:
                label = value.decode("latin-1")
        started = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            self.samples.setdefault(label, []).append(time.perf_counter() - started)

    def take(self) -> dict[str, list[float]]:
        """The samples so far (seconds, by path), clearing them."""
        samples, self.samples = self.samples, {}
        return samples


@dataclass
class RunningGateway:
    """A gateway served in-process: services, the timed app, a client on it."""

    services: GatewayServices
    app: FastAPI
    timer: ServerTimer
    http: httpx.AsyncClient


@asynccontextmanager
async def in_process_gateway(
    settings: Settings, kross_http: httpx.AsyncClient, clock: Clock
) -> AsyncIterator[RunningGateway]:
    """The real gateway (open_container + create_app, lifespan entered) behind an ASGI transport."""
    async with open_container(settings, kross_http=kross_http, clock=clock) as container:
        services = container.gateway
        app = create_app(settings, container=container)
        async with app.router.lifespan_context(app):
            timer = ServerTimer(app)
            transport = httpx.ASGITransport(app=timer)
            async with httpx.AsyncClient(transport=transport, base_url=GATEWAY_HOST) as http:
                yield RunningGateway(services, app, timer, http)


# --- statistics ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Latency:
    """A latency distribution, in milliseconds."""

    n: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    mean_ms: float
    max_ms: float

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view."""
        return asdict(self)


def percentile(ordered: list[float], q: float) -> float:
    """The q-quantile (0..1) of sorted values, linearly interpolated."""
    if not ordered:
        return math.nan
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def latency(samples_s: list[float]) -> Latency:
    """Summary of durations given in seconds."""
    ordered = sorted(samples_s)
    if not ordered:
        return Latency(0, math.nan, math.nan, math.nan, math.nan, math.nan)
    return Latency(
        n=len(ordered),
        p50_ms=percentile(ordered, 0.50) * 1000,
        p90_ms=percentile(ordered, 0.90) * 1000,
        p99_ms=percentile(ordered, 0.99) * 1000,
        mean_ms=statistics.fmean(ordered) * 1000,
        max_ms=ordered[-1] * 1000,
    )


# --- the machine --------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": model,
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
        **_source_state(),
    }


def _source_state() -> dict[str, Any]:
    """The commit measured, and the files that differed from it (read-only git queries)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--", "src"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        # Not a git checkout (e.g. an exported snapshot): say what it is, if told.
        return {"commit": os.environ.get("BENCH_SOURCE"), "src_changes": None}
    return {"commit": commit, "src_changes": [line[3:] for line in status]}


def freeze_heap() -> None:
    """Move everything allocated so far out of the collector's reach (seed data, modules).

    The in-process emulator's seed data shares the heap with the gateway; without this,
    each full collection walks it too and lands in the gateway's p99.
    """
    gc.collect()
    gc.freeze()


# --- processes ---------------------------------------------------------------------------


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def configured(config: type[Any], args: Any, **overrides: Any) -> Any:
    """A ``config`` dataclass from the parsed ``args`` of the same names (``overrides``
    instead where given); its other fields keep their defaults."""
    values = {f.name: getattr(args, f.name) for f in fields(config) if hasattr(args, f.name)}
    return config(**{**values, **overrides})


def add_defaults_of(group: Any, config: type, **helps: str) -> None:
    """Add ``--<name>`` for each ``name=help`` to the argparse ``group``: a number, by
    default ``config``'s ``name``."""
    for name, help_text in helps.items():
        default = getattr(config, name)
        flag = "--" + name.replace("_", "-")
        group.add_argument(flag, type=type(default), default=default, help=help_text)


def register_partner_by_cli(facility: dict[str, Any], env: dict[str, str]) -> str:
    """``pmsgate db upgrade``, then ``pmsgate facilities add`` of the emulator's partner
    ``facility`` (an operator's steps); its gateway key."""
    run_pmsgate("db", "upgrade", env=env)
    added = run_pmsgate(
        "facilities", "add",
        "--hotel-id", facility["hotel_id"],
        "--username", facility["username"],
        "--kind", "partner",
        "--integration-id", f"int-{facility['hotel_id']}",
        "--name", facility["name"],
        "--password-stdin", "--json",
        env=env,
        stdin=facility["password"] + "\n",
    )  # fmt: skip
    key: str = json.loads(added)["gateway_key"]
    return key


@contextmanager
def running_process(
    command: list[str], env: dict[str, str], log: Path, core: int | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """A long-lived process (pinned to ``core`` with taskset when given), its output in
    ``log``, terminated at the end."""
    pinned = ["taskset", "-c", str(core), *command] if core is not None else command
    with log.open("wb") as output:
        process = subprocess.Popen(
            pinned, stdout=output, stderr=subprocess.STDOUT, env={**os.environ, **env}
        )
        try:
            yield process
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def until_ready(
    url: str,
    process: subprocess.Popen[bytes],
    what: str,
    *,
    ready: Callable[[int], bool] = lambda status: status < 500,
) -> None:
    """Poll ``url`` until its status is ``ready``; raise when ``process`` ended or 90 s
    have passed (a server offers no "ready" event)."""
    deadline = time.monotonic() + 90
    with httpx.Client(timeout=2) as http:
        while True:
            try:
                if ready(http.get(url).status_code):
                    return
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not become ready at {url}")
            time.sleep(0.1)


def run_pmsgate(*args: str, env: dict[str, str], stdin: str | None = None) -> str:
    """Run one ``pmsgate`` command to completion; its standard output (raises on failure)."""
    done = subprocess.run(
        [sys.executable, "-m", "pmsgate.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", **env},
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"pmsgate {' '.join(args[:2])} failed: {done.stderr[-2000:]}")
    return done.stdout
