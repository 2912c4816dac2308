"""Two ``pmsgate serve`` replicas on one PostgreSQL and one Redis, the emulator as a process.

Issue 12, item 1, "tried as a new user would": the real topology, real clocks, real HTTP.

- **Set-up.** The database (default ``pmsgate_bench`` on the local PostgreSQL) is created if
  missing and its ``public`` schema dropped and recreated; the Redis keys live under a fresh
  namespace in a Redis database other than 0 and are deleted at the end. ``pmsgate sandbox``
  runs as a process (real clock; the booking-system emulator enforces 10/min, 300/h and
  5,000/day per facility, sliding windows, and answers 429 beyond). Then, as an operator would:
  ``pmsgate db upgrade``, ``pmsgate facilities add … --password-stdin --json`` (default limits
  10/300/5,000) and two ``pmsgate serve`` processes on their own ports, each with its scheduler
  and default settings (``limiter_wait_s`` 2 s, edge margin 0.5 s, freshness bounds).
- **Cold start.** ``--burst`` (60) calls at once, alternating between the replicas, before
  either has a cached answer. With the scheduler on (the default, as deployed), one replica's
  check-connections job has already got the facility's token and read its reservations at
  start-up; ``--no-scheduler`` (``PMSGATE_SCHEDULER_ENABLED=false``) leaves the token to the
  burst, the case where both replicas need it at once.
- **Steady load.** ``--minutes`` (2) of ``--rate`` (4) calls a second across both replicas,
  open loop (each call starts on schedule, whatever the previous ones are doing). Each call is
  either *uncached* (``--uncached-share``, default 0.5): check-availability for a range of its
  own beyond the cached 90-day window (arrival today+91 … today+3 years, one to seven nights,
  no range asked twice), which needs an upstream read and so a permit; or *cached*: one of
  get-incomplete-portals, get-in-house-guests, check-availability inside the window and
  get-checkin-instructions of an apartment, served from the shared cache once it is filled.

Recorded: every call's status, error code, ``Retry-After``, latency (client side, over
loopback HTTP) and whether a 200 was stale or came from a reservation window read in part;
the emulator's ``GET /kross/_sandbox/stats`` at the end (upstream requests, 429s and tokens,
by facility) and once a second during the run (upstream requests in the busiest minute); the
replicas' log lines by level and event (JSON logs, INFO and above).

Targets: 0 upstream 429s, 1 token issued, 0 answers ≥ 500. A call pmsgate refuses because
the facility's budget is spent is a 429 ``upstream_budget_exhausted`` with ``Retry-After``;
that is the gateway doing its job, counted separately.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager, AsyncExitStack, asynccontextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import asyncpg
import httpx
from redis.asyncio import Redis

from bench.common import (
    BenchConfig,
    free_port,
    latency,
    register_partner_by_cli,
    running_process,
    until_ready,
)
from pmsgate.gateway.vault import generate_key_spec

DEFAULT_DATABASE_URL = os.environ.get(
    "PMSGATE_BENCH_DATABASE_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/pmsgate_bench"
)
DEFAULT_REDIS_URL = os.environ.get("PMSGATE_BENCH_REDIS_URL", "redis://127.0.0.1:6379/5")
ADMIN_TOKEN = "bench-admin-token-0123456789abcdef"
# Availability is cached for today … today+89 (gateway.tools.AVAILABILITY_WINDOW_DAYS); a range
# starting later is its own upstream read. Stays are accepted up to 3 years ahead.
BEYOND_WINDOW_DAYS = 91
LAST_ARRIVAL_DAYS = 3 * 365 - 8
# A step coprime with the span, so the k-th uncached range never repeats an earlier arrival.
_ARRIVAL_STEP = 37
CACHED_TOOLS = (
    "get-incomplete-portals",
    "get-in-house-guests",
    "check-availability",
    "get-checkin-instructions",
)
Progress = Callable[[str], None]


@dataclass(frozen=True)
class ReplicasConfig(BenchConfig):
    """Where, and what to run."""

    database_url: str = DEFAULT_DATABASE_URL
    redis_url: str = DEFAULT_REDIS_URL
    minutes: float = 2.0
    burst: int = 60
    rate: float = 4.0
    uncached_share: float = 0.5
    replicas: int = 2
    # False: PMSGATE_SCHEDULER_ENABLED=false, so no job (check-connections) gets the token
    # before the burst does.
    scheduler: bool = True


@dataclass(frozen=True)
class Call:
    """One tool call of the run."""

    phase: str
    replica: int
    kind: str
    tool: str
    arguments: dict[str, Any]


@dataclass
class Result:
    """What one call got."""

    call: Call
    started_s: float
    status: int
    code: str | None
    retry_after: str | None
    stale: bool
    truncated: bool
    latency_s: float


@dataclass
class Samples:
    """The emulator's counters, polled once a second from its start: (seconds, counters)."""

    points: list[tuple[float, dict[str, Any]]] = field(default_factory=list)


# --- the calls ---------------------------------------------------------------------------


class CallMaker:
    """Draws the calls: cached tools, and uncached ranges that never repeat."""

    def __init__(self, config: ReplicasConfig, apartments: list[int], today: dt.date) -> None:
        self.config = config
        self.apartments = apartments
        self.today = today
        self.rng = random.Random(config.seed)
        self.uncached = 0
        self.made = 0

    def next(self, phase: str) -> Call:
        """The next call, on the next replica in turn."""
        replica = self.made % self.config.replicas
        self.made += 1
        if self.rng.random() < self.config.uncached_share:
            return Call(phase, replica, "uncached", "check-availability", self._far_range())
        tool = self.rng.choice(CACHED_TOOLS)
        return Call(phase, replica, "cached", tool, self._cached_arguments(tool))

    def _far_range(self) -> dict[str, Any]:
        span = LAST_ARRIVAL_DAYS - BEYOND_WINDOW_DAYS
        offset = BEYOND_WINDOW_DAYS + (self.uncached * _ARRIVAL_STEP) % span
        self.uncached += 1
        arrival = self.today + dt.timedelta(days=offset)
        departure = arrival + dt.timedelta(days=self.rng.randint(1, 7))
        return {
            "apartment_id": self.rng.choice(self.apartments),
            "arrival": arrival.isoformat(),
            "departure": departure.isoformat(),
        }

    def _cached_arguments(self, tool: str) -> dict[str, Any]:
        if tool == "check-availability":
            arrival = self.today + dt.timedelta(days=self.rng.randint(0, 60))
            departure = arrival + dt.timedelta(days=self.rng.randint(1, 7))
            return {"arrival": arrival.isoformat(), "departure": departure.isoformat()}
        if tool == "get-checkin-instructions":
            return {"apartment_id": self.rng.choice(self.apartments)}
        return {}


async def _call(http: httpx.AsyncClient, key: str, call: Call, origin: float) -> Result:
    started = time.perf_counter()
    try:
        answer = await http.post(
            f"/v1/tools/{call.tool}",
            json=call.arguments,
            headers={"Authorization": f"Bearer {key}"},
        )
    except httpx.TransportError as failure:
        elapsed = time.perf_counter() - started
        return Result(
            call, started - origin, 0, type(failure).__name__, None, False, False, elapsed
        )
    elapsed = time.perf_counter() - started
    body: dict[str, Any] = {}
    with suppress(ValueError):
        parsed = answer.json()
        body = parsed if isinstance(parsed, dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else None
    meta = body.get("meta") if isinstance(body.get("meta"), dict) else {}
    return Result(
        call=call,
        started_s=started - origin,
        status=answer.status_code,
        code=error.get("code") if error else None,
        retry_after=answer.headers.get("Retry-After"),
        stale=bool(meta and meta.get("stale")),
        truncated=bool(meta and meta.get("truncated")),
        latency_s=elapsed,
    )


# --- processes ---------------------------------------------------------------------------


def _process(
    args: list[str], env: dict[str, str], log: Path
) -> AbstractContextManager[subprocess.Popen[bytes]]:
    """A long-lived ``pmsgate`` command, its output in ``log``, terminated at the end."""
    command = [sys.executable, "-m", "pmsgate.cli", *args]
    return running_process(command, {"COLUMNS": "200", **env}, log)


async def _until_ready(url: str, process: subprocess.Popen[bytes], what: str) -> None:
    """Until ``url`` answers 200 (in a worker thread: the stats poller keeps running)."""
    await anyio.to_thread.run_sync(
        lambda: until_ready(url, process, what, ready=lambda status: status == 200)
    )


# --- the shared backends -----------------------------------------------------------------


async def fresh_database(url: str) -> None:
    """Create the benchmark's database if missing, and empty its ``public`` schema.

    Refuses a database whose name lacks "bench": the schema is dropped.
    """
    parts = urlsplit(url.replace("+asyncpg", ""))
    name = parts.path.lstrip("/")
    if "bench" not in name:
        raise SystemExit(f"refusing to empty database {name!r}: its name must contain 'bench'")
    server = await asyncpg.connect(urlunsplit(parts._replace(path="/postgres")))
    try:
        if not await server.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            await server.execute(f'CREATE DATABASE "{name}"')
    finally:
        await server.close()
    database = await asyncpg.connect(urlunsplit(parts))
    try:
        await database.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    finally:
        await database.close()


@asynccontextmanager
async def redis_namespace(url: str) -> AsyncIterator[str]:
    """A fresh namespace in the Redis at ``url`` (not database 0); its keys deleted at the end."""
    if (urlsplit(url).path.lstrip("/") or "0") == "0":
        raise SystemExit("use a Redis database other than 0 for the benchmark, e.g. …:6379/5")
    namespace = f"pmsgate-bench-{uuid.uuid4().hex[:8]}"
    try:
        yield namespace
    finally:
        redis = Redis.from_url(url)
        try:
            keys = [key async for key in redis.scan_iter(match=f"{namespace}*")]
            if keys:
                await redis.delete(*keys)
        finally:
            await redis.aclose()


# --- the run -----------------------------------------------------------------------------


@dataclass
class Caller:
    """Sends calls to the replicas and keeps what they answered."""

    clients: list[httpx.AsyncClient]
    key: str
    origin: float
    results: list[Result] = field(default_factory=list)

    async def send(self, call: Call) -> None:
        """One call, to its replica."""
        self.results.append(await _call(self.clients[call.replica], self.key, call, self.origin))

    async def burst(self, calls: list[Call]) -> None:
        """Every call at once."""
        async with anyio.create_task_group() as group:
            for call in calls:
                group.start_soon(self.send, call)

    async def steady(self, maker: CallMaker, rate: float, count: int) -> None:
        """``count`` calls at ``rate`` a second, each started on schedule (open loop)."""
        async with anyio.create_task_group() as group:
            start = time.perf_counter()
            for index in range(count):
                delay = start + index / rate - time.perf_counter()
                if delay > 0:
                    await anyio.sleep(delay)
                group.start_soon(self.send, maker.next("steady"))


async def _poll_stats(
    sandbox: httpx.AsyncClient, origin: float, samples: Samples, scope: anyio.CancelScope
) -> None:
    with scope:
        while True:
            answer = await sandbox.get("/_sandbox/stats")
            samples.points.append((time.perf_counter() - origin, answer.json()))
            await anyio.sleep(1)


def _gateway_env(
    config: ReplicasConfig, directory: Path, namespace: str, kross: str, partner_key: str
) -> dict[str, str]:
    return {
        "PMSGATE_DATA_DIR": str(directory / "data"),
        "PMSGATE_DATABASE_URL": config.database_url,
        "PMSGATE_REDIS_URL": config.redis_url,
        "PMSGATE_REDIS_NAMESPACE": namespace,
        "PMSGATE_SECRET_KEYS": generate_key_spec("bench"),
        "PMSGATE_ADMIN_TOKEN": ADMIN_TOKEN,
        "PMSGATE_KROSS_BASE_URL": kross,
        "PMSGATE_PARTNER_API_KEY": partner_key,
        "PMSGATE_LOG_JSON": "true",
        "PMSGATE_LOG_LEVEL": "INFO",
        "PMSGATE_SCHEDULER_ENABLED": str(config.scheduler).lower(),
    }


async def run_replicas(
    config: ReplicasConfig, progress: Progress, keep_logs: Path | None = None
) -> dict[str, Any]:
    """Set up the topology, run the burst and the steady load, collect every figure."""
    await fresh_database(config.database_url)
    logs: dict[str, Any] = {}
    async with AsyncExitStack() as stack:
        namespace = await stack.enter_async_context(redis_namespace(config.redis_url))
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pmsgate-rep-")))
        # Runs once the processes have stopped, before the directory is removed.
        stack.callback(_collect_logs, directory, logs, keep_logs)
        sandbox_port = free_port()
        kross = f"http://127.0.0.1:{sandbox_port}/kross"
        progress(f"pmsgate sandbox on :{sandbox_port}")
        sandbox_args = ["sandbox", "--port", str(sandbox_port), "--seed", str(config.seed)]
        sandbox_process = stack.enter_context(_process(sandbox_args, {}, directory / "sandbox.log"))
        await _until_ready(f"{kross}/_sandbox/facilities", sandbox_process, "pmsgate sandbox")
        sandbox = await stack.enter_async_context(httpx.AsyncClient(base_url=kross, timeout=30))
        samples, polled_from = Samples(), time.perf_counter()
        polling, poller = (
            await stack.enter_async_context(anyio.create_task_group()),
            anyio.CancelScope(),
        )
        # Cancelled through its own scope: the task group's would cancel this task too.
        polling.start_soon(_poll_stats, sandbox, polled_from, samples, poller)
        facility = next(
            f for f in (await sandbox.get("/_sandbox/facilities")).json() if f["kind"] == "partner"
        )
        env = _gateway_env(config, directory, namespace, kross, facility["api_key"])
        progress("pmsgate db upgrade; pmsgate facilities add")
        key = register_partner_by_cli(facility, env)
        ports = [free_port() for _ in range(config.replicas)]
        progress(f"{config.replicas} x pmsgate serve on :{', :'.join(map(str, ports))}")
        replicas = [
            stack.enter_context(
                _process(["serve", "--port", str(port)], env, directory / f"replica-{i}.log")
            )
            for i, port in enumerate(ports)
        ]
        for port, process in zip(ports, replicas, strict=True):
            await _until_ready(f"http://127.0.0.1:{port}/readyz", process, "pmsgate serve")
        limits = httpx.Limits(max_connections=config.burst + 100, max_keepalive_connections=200)
        clients = [
            await stack.enter_async_context(
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60, limits=limits)
            )
            for port in ports
        ]
        before = (await sandbox.get("/_sandbox/stats")).json()
        samples.points.append((time.perf_counter() - polled_from, before))
        apartments = [a["id_room_type"] for a in facility["apartments"]]
        maker = CallMaker(config, apartments, dt.date.today())
        caller = Caller(clients, key, time.perf_counter())
        progress(f"cold-start burst: {config.burst} calls at once")
        await caller.burst([maker.next("burst") for _ in range(config.burst)])
        progress(f"steady load: {config.rate:g} calls/s for {config.minutes:g} min")
        await caller.steady(maker, config.rate, round(config.minutes * 60 * config.rate))
        wall_s = time.perf_counter() - caller.origin
        poller.cancel()
        after = (await sandbox.get("/_sandbox/stats")).json()
        samples.points.append((time.perf_counter() - polled_from, after))
        replicas_alive = sum(process.poll() is None for process in replicas)
    return {
        "config": {
            **asdict(config),
            "database_url": _without_password(config.database_url),
            "redis_url": _without_password(config.redis_url),
        },
        "hotel_id": facility["hotel_id"],
        "wall_s": round(wall_s, 1),
        "replicas_alive_at_end": replicas_alive,
        "upstream": _upstream(
            before, after, samples, facility["hotel_id"], caller.origin - polled_from
        ),
        "calls": _calls(caller.results),
        "logs": logs,
    }


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@")))


# --- figures -----------------------------------------------------------------------------


def _upstream(
    before: dict[str, Any],
    after: dict[str, Any],
    samples: Samples,
    hotel_id: str,
    burst_at_s: float,
) -> dict[str, Any]:
    """What reached the booking system: totals, before the burst, by minute, busiest minute.

    The samples start with the emulator (count 0), so start-up requests (the replicas'
    check-connections job) are in the series. The busiest minute is the largest increase
    between two samples at most 60 s apart: a lower bound of the true sliding maximum (the
    emulator, which refused nothing beyond its limit when ``rate_limited_429`` is 0, is the
    authority).
    """
    series = sorted(
        (t, point["requests"]["by_hotel"].get(hotel_id, 0)) for t, point in samples.points
    )

    def count_at(moment: float) -> int:
        return max((count for t, count in series if t <= moment), default=0)

    busiest = 0
    for end_t, end_count in series:
        start_count = min(count for t, count in series if t >= end_t - 60)
        busiest = max(busiest, end_count - start_count)
    end = series[-1][0] if series else burst_at_s
    per_minute = [
        count_at(burst_at_s + (minute + 1) * 60) - count_at(burst_at_s + minute * 60)
        for minute in range(math.ceil((end - burst_at_s) / 60))
    ]
    return {
        "rate_limited_429": after["rate_limited"],
        "requests_total": after["requests"]["total"],
        "requests_by_hotel": after["requests"]["by_hotel"],
        "requests_by_operation": after["requests"]["by_operation"],
        "requests_from_burst": after["requests"]["total"] - before["requests"]["total"],
        "requests_before_burst_by_operation": before["requests"]["by_operation"],
        "tokens_issued": after["tokens_issued"],
        "sessions_refused": after["sessions_refused"],
        "busiest_minute_requests_sampled": busiest,
        "requests_before_burst": before["requests"]["by_hotel"].get(hotel_id, 0),
        "requests_per_minute_from_burst_sampled": per_minute,
        "samples": len(series),
    }


def _calls(results: list[Result]) -> dict[str, Any]:
    """Answers by phase and kind, refusals, errors, latency."""

    def summary(rows: list[Result]) -> dict[str, Any]:
        refused = [r for r in rows if r.status == 429]
        return {
            "calls": len(rows),
            "statuses": dict(sorted(Counter(r.status for r in rows).items())),
            "ok_200": sum(r.status == 200 for r in rows),
            "stale_200": sum(r.status == 200 and r.stale for r in rows),
            # Answered from a reservation window read only in part (meta.truncated).
            "truncated_200": sum(r.status == 200 and r.truncated for r in rows),
            "refused_429": len(refused),
            "refused_429_budget_with_retry_after": sum(
                r.code == "upstream_budget_exhausted" and r.retry_after is not None for r in refused
            ),
            "retry_after_s": dict(sorted(Counter(r.retry_after for r in refused).items())),
            "error_codes": dict(Counter(r.code for r in rows if r.code)),
            "server_errors_5xx": sum(r.status >= 500 for r in rows),
            "transport_errors": sum(r.status == 0 for r in rows),
            "latency": latency([r.latency_s for r in rows]).as_dict(),
            "latency_200": latency([r.latency_s for r in rows if r.status == 200]).as_dict(),
            "latency_429": latency([r.latency_s for r in refused]).as_dict(),
        }

    ordered = sorted(results, key=lambda r: r.started_s)
    by_phase = {
        phase: summary([r for r in ordered if r.call.phase == phase])
        for phase in ("burst", "steady")
    }
    by_kind = {
        kind: summary([r for r in ordered if r.call.kind == kind])
        for kind in ("cached", "uncached")
    }
    by_replica = {
        f"replica-{index}": summary([r for r in ordered if r.call.replica == index])
        for index in sorted({r.call.replica for r in ordered})
    }
    return {
        "all": summary(ordered),
        "by_phase": by_phase,
        "by_kind": by_kind,
        "by_replica": by_replica,
        # "check-availability (cached)" → {"burst": {200: n, 429: m}, "steady": {…}}
        "by_tool_and_phase": {
            f"{tool} ({kind})": {
                phase: dict(
                    Counter(
                        r.status
                        for r in ordered
                        if (r.call.tool, r.call.kind, r.call.phase) == (tool, kind, phase)
                    )
                )
                for phase in ("burst", "steady")
            }
            for tool, kind in sorted({(r.call.tool, r.call.kind) for r in ordered})
        },
        "statuses_by_10s": _timeline(ordered),
    }


def _timeline(ordered: list[Result], step_s: int = 10) -> list[dict[str, Any]]:
    """Statuses of cached and uncached calls by the ``step_s`` seconds in which they started."""
    if not ordered:
        return []
    buckets = int(ordered[-1].started_s // step_s) + 1
    return [
        {
            "from_s": index * step_s,
            **{
                kind: dict(
                    Counter(
                        r.status
                        for r in ordered
                        if r.call.kind == kind and int(r.started_s // step_s) == index
                    )
                )
                for kind in ("cached", "uncached")
            },
        }
        for index in range(buckets)
    ]


def _collect_logs(directory: Path, into: dict[str, Any], keep: Path | None) -> None:
    """Each process's log lines by level and event; copies of the logs in ``keep``."""
    for path in sorted(directory.glob("*.log")):
        levels: Counter[str] = Counter()
        events: Counter[str] = Counter()
        other = 0
        text = path.read_text(errors="replace")
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                other += 1
                continue
            if not isinstance(entry, dict):
                other += 1
                continue
            level = str(entry.get("level", "?"))
            levels[level] += 1
            if level not in ("info", "debug"):
                events[f"{level}: {entry.get('event', '?')}"] += 1
        into[path.stem] = {
            "lines": len(text.splitlines()),
            "levels": dict(levels),
            "warnings_and_errors": dict(events.most_common(20)),
            "non_json_lines": other,
            "tracebacks": text.count("Traceback (most recent call last)"),
        }
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            (keep / path.name).write_text(text)


def print_replicas(results: dict[str, Any]) -> None:
    """The short table of the run."""
    upstream, calls = results["upstream"], results["calls"]
    print("\n## replicas", json.dumps(results["config"]))
    rows = [
        ("upstream 429s (target 0)", upstream["rate_limited_429"]["total"]),
        ("tokens issued (target 1)", upstream["tokens_issued"]["total"]),
        ("upstream requests by facility", upstream["requests_by_hotel"]),
        ("upstream requests, busiest minute", upstream["busiest_minute_requests_sampled"]),
        ("upstream requests before the burst", upstream["requests_before_burst"]),
        ("upstream requests per minute", upstream["requests_per_minute_from_burst_sampled"]),
    ]
    for label, value in rows:
        print(f"  {label:<36} {value}")
    header = (
        f"  {'calls':<18} {'n':>5} {'200':>5} {'stale':>5} {'trunc':>5} {'429':>5} {'429+RA':>6}"
    )
    print(f"\n{header} {'5xx':>4} {'other':>5} {'p50 ms':>8} {'p99 ms':>8}")
    groups = {"all": calls["all"], **calls["by_phase"], **calls["by_kind"], **calls["by_replica"]}
    for name, row in groups.items():
        other = row["calls"] - row["ok_200"] - row["refused_429"] - row["server_errors_5xx"]
        print(
            f"  {name:<18} {row['calls']:>5} {row['ok_200']:>5} {row['stale_200']:>5} "
            f"{row['truncated_200']:>5} "
            f"{row['refused_429']:>5} {row['refused_429_budget_with_retry_after']:>6} "
            f"{row['server_errors_5xx']:>4} {other:>5} "
            f"{row['latency']['p50_ms']:>8.1f} {row['latency']['p99_ms']:>8.1f}"
        )
    for status in ("200", "429"):
        figures = calls["all"][f"latency_{status}"]
        print(
            f"  latency of the {status}s: p50 {figures['p50_ms']:.1f} ms, "
            f"p99 {figures['p99_ms']:.1f} ms"
        )
    print(f"  error codes: {calls['all']['error_codes']}")
    for name, summary in results["logs"].items():
        print(f"  log {name}: {summary['levels']} tracebacks {summary['tracebacks']}")
