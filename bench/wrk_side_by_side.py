"""``python -m bench.wrk_side_by_side``: a cached tool call and a trivial FastAPI route, wrk.

Issue 15, item 5 ("production speed"), measured as production runs it and **in the same
run**:

- **(a) the gateway**: ``pmsgate serve`` (uvicorn with uvloop and httptools, as declared by
  ``uvicorn[standard]``) on the default backends (SQLite, the in-memory limiter and cache),
  over ``pmsgate sandbox``, one facility registered with ``pmsgate facilities add`` and the
  tool's answer cached before the measurement (a warm-up call; the tool's freshness bound
  is raised to a day with ``PMSGATE_CACHE_MAX_AGE_S`` so that it stays cached). Its log
  level, scheduler and key cache are the defaults (``--no-scheduler`` turns the jobs off).
- **(b) the floor**: ``POST /trivial`` of :mod:`bench.trivial_app`, a bare FastAPI route
  under the same ``uvicorn.Config`` as ``pmsgate serve``.

Both servers run for the whole run, pinned to one core (``taskset -c 0``); Debian's wrk is
pinned to the other (``taskset -c 1``, installed with ``apt-get`` when missing), one thread,
``--connections`` (8) connections for ``--duration`` (30 s) per measurement, after a short
warm-up of each. The measurements alternate between the two (A B A B … for ``--rounds``),
so that drift of the shared machine shows as a difference between rounds rather than
between targets. Each request is the same POST (``{}`` with the gateway key as bearer) to
both. A Lua ``done`` hook reports wrk's own counts and latency percentiles as JSON; the
server's CPU time over each measurement comes from ``/proc``; the emulator's request count
shows that the measured calls were cache hits (no upstream request).

With ``--redis-url`` (or ``PMSGATE_REDIS_URL`` set), the gateway runs on Redis as replicas
do (limiter, cache, locks; a namespace of its own, its keys deleted at the end): the
deployed topology, whose cached call must not cost a Redis round trip.

Figures: calls/s, p50, p99, p99/p50 per measurement, the ratio cached/trivial per round
and overall. Targets: cached ≥ 0.6 x trivial calls/s on the embedded backends, ≥ 0.5 x
with Redis; p99 ≤ 3 x p50 at 8 connections over 30 s. ``--json`` writes everything
(default ``bench/results-wrk-side-by-side.json``). A smoke run: ``--duration 3 --rounds 1``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.common import (
    BenchConfig,
    free_port,
    machine,
    register_partner_by_cli,
    running_process,
    until_ready,
)
from pmsgate.gateway.vault import generate_key_spec

DEFAULT_JSON = Path(__file__).with_name("results-wrk-side-by-side.json")
TARGET_RATIO = 0.6  # embedded backends (SQLite, in-memory cache and limiter)
TARGET_RATIO_REDIS = 0.5  # with Redis
TARGET_TAIL = 3.0
CACHED = "cached tool"
TRIVIAL = "trivial FastAPI"
# wrk's done() hook: one line of JSON, latencies in microseconds.
LUA = """
wrk.method = "POST"
wrk.body = "{}"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %(key)s"

done = function(summary, latency, requests)
  io.write(string.format(
    'WRK_JSON {"requests": %%d, "duration_us": %%d, "bytes": %%d, '
    .. '"errors": {"connect": %%d, "read": %%d, "write": %%d, "status": %%d, "timeout": %%d}, '
    .. '"latency_us": {"min": %%.1f, "mean": %%.1f, "stdev": %%.1f, "max": %%.1f, '
    .. '"p50": %%.1f, "p90": %%.1f, "p99": %%.1f, "p999": %%.1f}}\\n',
    summary.requests, summary.duration, summary.bytes,
    summary.errors.connect, summary.errors.read, summary.errors.write,
    summary.errors.status, summary.errors.timeout,
    latency.min, latency.mean, latency.stdev, latency.max,
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency:percentile(99.9)))
end
"""


@dataclass(frozen=True)
class SideBySideConfig(BenchConfig):
    """The knobs of one run: the cached tool measured, for how long, on which cores."""

    tool: str = "get-in-house-guests"
    duration_s: int = 30
    connections: int = 8
    rounds: int = 2
    warmup_s: int = 3
    scheduler: bool = True
    server_core: int = 0
    client_core: int = 1
    redis_url: str | None = None


def _progress(message: str) -> None:
    print(f"  … {message}", file=sys.stderr, flush=True)


def ensure_wrk() -> str:
    """The path of wrk, installed from Debian's packages when missing (as root)."""
    found = shutil.which("wrk")
    if found:
        return found
    _progress("wrk is missing: apt-get install -y wrk")
    subprocess.run(
        ["apt-get", "install", "-y", "--no-install-recommends", "wrk"],
        check=True,
        capture_output=True,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
    )
    found = shutil.which("wrk")
    if not found:
        raise SystemExit("wrk could not be installed (apt-get install wrk)")
    return found


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    # After the command: state is field 3, utime 14 and stime 15 (1-based, man 5 proc).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _wrk(
    wrk: str, config: SideBySideConfig, lua: Path, url: str, duration_s: int
) -> dict[str, Any]:
    command = [
        "taskset", "-c", str(config.client_core),
        wrk, "-t1", f"-c{config.connections}", f"-d{duration_s}s", "--latency",
        "-s", str(lua), url,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    for line in done.stdout.splitlines():
        if line.startswith("WRK_JSON "):
            parsed: dict[str, Any] = json.loads(line.removeprefix("WRK_JSON "))
            return parsed
    raise RuntimeError(f"wrk printed no summary: {done.stdout[-2000:]} {done.stderr[-2000:]}")


def _measure(
    wrk: str,
    config: SideBySideConfig,
    lua: Path,
    target: str,
    url: str,
    pid: int,
    round_: int,
) -> dict[str, Any]:
    load_before = _loadavg()
    cpu_before, wall_before = _cpu_seconds(pid), time.perf_counter()
    raw = _wrk(wrk, config, lua, url, config.duration_s)
    cpu = _cpu_seconds(pid) - cpu_before
    wall = time.perf_counter() - wall_before
    seconds = raw["duration_us"] / 1e6
    lat = raw["latency_us"]
    errors = sum(raw["errors"].values())
    row = {
        "target": target,
        "round": round_,
        "calls_per_s": raw["requests"] / seconds,
        "p50_ms": lat["p50"] / 1000,
        "p90_ms": lat["p90"] / 1000,
        "p99_ms": lat["p99"] / 1000,
        "p999_ms": lat["p999"] / 1000,
        "max_ms": lat["max"] / 1000,
        "mean_ms": lat["mean"] / 1000,
        "p99_over_p50": lat["p99"] / lat["p50"] if lat["p50"] else None,
        "requests": raw["requests"],
        "errors": raw["errors"],
        "errors_total": errors,
        "server_cpu_s": cpu,
        "server_cpu_share": cpu / wall,
        # Calls per second of the server's own CPU time: the cost of a call, which the
        # other processes of a shared machine change much less than calls/s.
        "calls_per_cpu_s": raw["requests"] / cpu if cpu else None,
        "load_average_before": load_before,
        "load_average_after": _loadavg(),
    }
    _progress(
        f"{target} round {round_}: {row['calls_per_s']:,.0f} calls/s, p50 {row['p50_ms']:.2f} ms,"
        f" p99 {row['p99_ms']:.2f} ms, errors {errors}, server CPU {row['server_cpu_share']:.0%}"
    )
    return row


def _summary(rows: list[dict[str, Any]], config: SideBySideConfig) -> dict[str, Any]:
    by_target: dict[str, dict[str, Any]] = {}
    for target in (CACHED, TRIVIAL):
        mine = [r for r in rows if r["target"] == target]
        by_target[target] = {
            "calls_per_s_mean": statistics.fmean(r["calls_per_s"] for r in mine),
            "calls_per_cpu_s": sum(r["requests"] for r in mine)
            / sum(r["server_cpu_s"] for r in mine),
            "p50_ms_median": statistics.median(r["p50_ms"] for r in mine),
            "p99_ms_median": statistics.median(r["p99_ms"] for r in mine),
            "p99_ms_worst": max(r["p99_ms"] for r in mine),
            "p99_over_p50_worst": max(r["p99_over_p50"] or 0 for r in mine),
            "errors_total": sum(r["errors_total"] for r in mine),
        }
    ratios = []
    for round_ in range(1, config.rounds + 1):
        cached = next(r for r in rows if r["target"] == CACHED and r["round"] == round_)
        trivial = next(r for r in rows if r["target"] == TRIVIAL and r["round"] == round_)
        ratios.append(cached["calls_per_s"] / trivial["calls_per_s"])
    overall = by_target[CACHED]["calls_per_s_mean"] / by_target[TRIVIAL]["calls_per_s_mean"]
    per_cpu = by_target[CACHED]["calls_per_cpu_s"] / by_target[TRIVIAL]["calls_per_cpu_s"]
    wanted = TARGET_RATIO_REDIS if config.redis_url else TARGET_RATIO
    return {
        "by_target": by_target,
        "ratio_by_round": ratios,
        "ratio": overall,
        "ratio_per_cpu_s": per_cpu,
        "targets": {
            f"ratio_at_least_{wanted}": overall >= wanted,
            "cached_p99_at_most_3x_p50_every_run": by_target[CACHED]["p99_over_p50_worst"]
            <= TARGET_TAIL,
        },
    }


def run_side_by_side(config: SideBySideConfig) -> dict[str, Any]:
    """Start both servers, warm the cache, alternate the wrk measurements; every figure."""
    wrk = ensure_wrk()
    with ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pmsgate-wrk-")))
        sandbox_port, gateway_port, trivial_port = free_port(), free_port(), free_port()
        kross = f"http://127.0.0.1:{sandbox_port}/kross"
        _progress(f"pmsgate sandbox on :{sandbox_port} (core {config.client_core})")
        sandbox = stack.enter_context(
            running_process(
                [sys.executable, "-m", "pmsgate.cli", "sandbox", "--port", str(sandbox_port),
                 "--seed", str(config.seed)],
                {"COLUMNS": "200"}, directory / "sandbox.log", config.client_core,
            )
        )  # fmt: skip
        until_ready(f"{kross}/_sandbox/facilities", sandbox, "pmsgate sandbox")
        facilities = httpx.get(f"{kross}/_sandbox/facilities", timeout=30).json()
        facility = next(f for f in facilities if f["kind"] == "partner")
        env = {
            "PMSGATE_DATA_DIR": str(directory / "data"),
            "PMSGATE_DATABASE_URL": f"sqlite+aiosqlite:///{directory / 'gateway.db'}",
            "PMSGATE_SECRET_KEYS": generate_key_spec("wrk"),
            "PMSGATE_KROSS_BASE_URL": kross,
            "PMSGATE_PARTNER_API_KEY": facility["api_key"],
            "PMSGATE_CACHE_MAX_AGE_S": json.dumps({config.tool: 86400}),
            "PMSGATE_SCHEDULER_ENABLED": str(config.scheduler).lower(),
            "PMSGATE_REDIS_URL": config.redis_url or "",
        }
        if config.redis_url:
            env["PMSGATE_REDIS_NAMESPACE"] = namespace = f"pmsgate-wrk-{uuid.uuid4().hex[:8]}"
            stack.callback(_delete_namespace, config.redis_url, namespace)
        _progress("pmsgate db upgrade; pmsgate facilities add")
        key = register_partner_by_cli(facility, env)
        _progress(f"pmsgate serve on :{gateway_port}, bench.trivial_app on :{trivial_port}")
        gateway = stack.enter_context(
            running_process(
                [sys.executable, "-m", "pmsgate.cli", "serve", "--port", str(gateway_port)],
                env, directory / "serve.log", config.server_core,
            )
        )  # fmt: skip
        trivial = stack.enter_context(
            running_process(
                [sys.executable, "-m", "bench.trivial_app", "--port", str(trivial_port)],
                {}, directory / "trivial.log", config.server_core,
            )
        )  # fmt: skip
        gateway_base = f"http://127.0.0.1:{gateway_port}"
        until_ready(f"{gateway_base}/readyz", gateway, "pmsgate serve")
        until_ready(f"http://127.0.0.1:{trivial_port}/trivial", trivial, "bench.trivial_app")
        tool_url = f"{gateway_base}/v1/tools/{config.tool}"
        trivial_url = f"http://127.0.0.1:{trivial_port}/trivial"
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(timeout=30) as http:
            warm = [http.post(tool_url, json={}, headers=headers) for _ in range(3)]
        if any(answer.status_code != 200 for answer in warm):
            raise RuntimeError(f"the warm-up call failed: {warm[-1].status_code} {warm[-1].text}")
        lua = directory / "post.lua"
        lua.write_text(LUA % {"key": key}, encoding="utf-8")
        targets = {CACHED: (tool_url, gateway.pid), TRIVIAL: (trivial_url, trivial.pid)}
        for name, (url, _) in targets.items():
            _progress(f"warm-up of {name}: {config.warmup_s} s")
            _wrk(wrk, config, lua, url, config.warmup_s)
        upstream_before = httpx.get(f"{kross}/_sandbox/stats", timeout=30).json()
        rows = []
        for round_ in range(1, config.rounds + 1):
            for name, (url, pid) in targets.items():
                rows.append(_measure(wrk, config, lua, name, url, pid, round_))
        upstream_after = httpx.get(f"{kross}/_sandbox/stats", timeout=30).json()
        with httpx.Client(timeout=30) as http:
            last = http.post(tool_url, json={}, headers=headers).json()
        return {
            "machine": machine(),
            "config": asdict(config),
            "wrk": subprocess.run([wrk, "--version"], capture_output=True, text=True).stdout[:80],
            "uvicorn_stack": _stack_of(),
            "hotel_id": facility["hotel_id"],
            "upstream_requests_during_measurement": upstream_after["requests"]["total"]
            - upstream_before["requests"]["total"],
            "last_answer_meta": last.get("meta"),
            "runs": rows,
            "summary": _summary(rows, config),
        }


def _delete_namespace(redis_url: str, namespace: str) -> None:
    """Delete the run's keys from Redis (never the database's other keys)."""
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=f"{namespace}*", count=500))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def _stack_of() -> dict[str, bool]:
    """Whether uvloop and httptools are importable here (what loop/http="auto" pick)."""
    stack = {}
    for module in ("uvloop", "httptools"):
        found = subprocess.run(
            [sys.executable, "-c", f"import {module}"], capture_output=True, check=False
        )
        stack[module] = found.returncode == 0
    return stack


def print_side_by_side(results: dict[str, Any]) -> None:
    """The table of the run."""
    config = results["config"]
    print(
        f"\n## wrk side by side: {config['connections']} connections, {config['duration_s']} s "
        f"each, server on core {config['server_core']}, wrk on core {config['client_core']}, "
        f"{'Redis' if config.get('redis_url') else 'embedded backends'}; "
        f"load before {results['runs'][0]['load_average_before']}"
    )
    print(
        f"{'target':<16} {'round':>5} {'calls/s':>9} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'p99/p50':>8} {'errors':>6} {'srv CPU':>7} {'calls/CPU-s':>11}"
    )
    for row in results["runs"]:
        print(
            f"{row['target']:<16} {row['round']:>5} {row['calls_per_s']:>9,.0f} "
            f"{row['p50_ms']:>8.2f} {row['p99_ms']:>8.2f} {row['p99_over_p50'] or 0:>8.2f} "
            f"{row['errors_total']:>6} {row['server_cpu_share']:>7.0%} "
            f"{row['calls_per_cpu_s'] or 0:>11,.0f}"
        )
    summary = results["summary"]
    rounds = ", ".join(f"{r:.2f}" for r in summary["ratio_by_round"])
    print(f"ratio cached/trivial: {summary['ratio']:.2f} (by round: {rounds})")
    print(f"ratio cached/trivial per server CPU-second: {summary['ratio_per_cpu_s']:.2f}")
    upstream = results["upstream_requests_during_measurement"]
    print(f"upstream requests during the measurement: {upstream}")
    for target, met in summary["targets"].items():
        print(f"target {target}: {'met' if met else 'NOT met'}")


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m bench.wrk_side_by_side``."""
    defaults = SideBySideConfig()
    parser = argparse.ArgumentParser(prog="python -m bench.wrk_side_by_side", description=__doc__)
    parser.add_argument("--duration", type=int, default=defaults.duration_s, help="seconds each")
    parser.add_argument("--connections", type=int, default=defaults.connections)
    parser.add_argument("--rounds", type=int, default=defaults.rounds, help="A B pairs")
    parser.add_argument("--warmup", type=int, default=defaults.warmup_s, help="seconds each")
    parser.add_argument("--tool", default=defaults.tool)
    parser.add_argument(
        "--no-scheduler", action="store_true", help="PMSGATE_SCHEDULER_ENABLED=false"
    )
    parser.add_argument("--server-core", type=int, default=defaults.server_core)
    parser.add_argument("--client-core", type=int, default=defaults.client_core)
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write figures")
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("PMSGATE_REDIS_URL") or None,
        help="run the gateway on this Redis (default: PMSGATE_REDIS_URL, else none)",
    )
    args = parser.parse_args(argv)
    config = SideBySideConfig(
        duration_s=args.duration,
        connections=args.connections,
        rounds=args.rounds,
        warmup_s=args.warmup,
        tool=args.tool,
        scheduler=not args.no_scheduler,
        server_core=args.server_core,
        client_core=args.client_core,
        redis_url=args.redis_url,
    )
    results = run_side_by_side(config)
    print_side_by_side(results)
    args.json.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"\nfigures written to {args.json}")


if __name__ == "__main__":
    main()
