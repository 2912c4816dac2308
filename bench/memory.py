"""``python -m bench.memory``: a replica's resident memory with thousands of facilities.

Issue 15, item 5: "a replica's resident memory with 5,000 registered facilities (each
with a cached reservation window of a realistic size) measured and reported, with the
growth per facility".

- **The booking system** is the emulator in a process of its own (``python -m bench.serve
  emulator --facilities N --reservations R``), so that its data is not counted: N
  facilities, each keeping the R reservations arriving nearest today (default 50: see
  "Assumption" in bench/README.md), limits that never block.
- **The replica** is this process: the real gateway (``open_container`` + ``create_app``,
  lifespan entered; SQLite and the in-memory cache and limiter, the default backends), its
  own httpx client to the emulator over loopback HTTP. Facilities are registered with
  ``FacilityService.add`` (as ``pmsgate facilities add`` does, without the verification
  call) and each one's reservation window is cached the way production fills it: one
  ``POST /v1/tools/get-in-house-guests`` with the facility's key, through the app (ASGI
  transport: everything but the socket), which gets the facility's token and reads its
  reservations (paged ``reservations/get-list``), caches the window (``ReadCache``'s
  in-process entries, at most PMSGATE_CACHE_MAX_ENTRIES) and parses it into models once
  (kept with the entry, at most PMSGATE_CACHE_MAX_PARSED). Both caps are read from the
  environment like every setting: ``PMSGATE_CACHE_MAX_PARSED=500 python -m bench.memory``.
- **Measured**: the resident set size (``VmRSS`` of ``/proc/self/status``, after
  ``gc.collect()``) with 0 facilities (the app up, one warm-up request), then after each
  stage (default 1,000 and 5,000 facilities registered and cached); the growth per facility
  between stages; the cached windows' size as JSON (rows per window, bytes).

The facility records (credentials) are read from the emulator before the first
measurement, so that they are not counted as growth.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.common import (
    GATEWAY_HOST,
    UNLIMITED,
    BenchConfig,
    add_defaults_of,
    configured,
    gateway_settings,
    machine,
    new_facility,
    sqlite_url,
)
from bench.serve import LONG_FRESHNESS
from pmsgate.app import create_app
from pmsgate.clock import SystemClock
from pmsgate.container import open_container
from pmsgate.logs import configure_logging

DEFAULT_JSON = Path(__file__).with_name("results-memory.json")
TOOL = "get-in-house-guests"


@dataclass(frozen=True)
class MemoryConfig(BenchConfig):
    """The knobs of one run."""

    stages: tuple[int, ...] = (1_000, 5_000)
    reservations: int = 50
    concurrency: int = 8


def rss_mib() -> float:
    """This process's resident set size, MiB, after a full collection."""
    gc.collect()
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def _progress(message: str) -> None:
    print(f"  … {message}", file=sys.stderr, flush=True)


def _start_emulator(config: MemoryConfig, count: int) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [
            sys.executable, "-m", "bench.serve", "emulator", "--seed", str(config.seed),
            "--facilities", str(count), "--reservations", str(config.reservations),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        process.wait()
        raise RuntimeError("the emulator did not start")
    return process, f"http://127.0.0.1:{json.loads(line)['port']}"


async def run_memory(config: MemoryConfig) -> dict[str, Any]:
    """Start the emulator, fill the replica stage by stage, measure its RSS at each."""
    total = max(config.stages)
    started = time.perf_counter()
    _progress(f"emulator with {total} facilities, {config.reservations} reservations each")
    emulator, kross = _start_emulator(config, total)
    try:
        async with httpx.AsyncClient(base_url=kross, timeout=120) as upstream:
            records = (await upstream.get("/_sandbox/facilities")).json()
        _progress(f"emulator ready after {time.perf_counter() - started:.0f} s")
        return await _fill(config, kross, records)
    finally:
        emulator.terminate()
        emulator.wait()


async def _fill(config: MemoryConfig, kross: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="pmsgate-memory-") as directory:
        settings = gateway_settings(sqlite_url(directory), kross, cache_max_age_s=LONG_FRESHNESS)
        async with open_container(settings, clock=SystemClock()) as container:
            app = create_app(settings, container=container)
            async with app.router.lifespan_context(app):
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(
                    transport=transport, base_url=GATEWAY_HOST, timeout=120
                ) as http:
                    assert (await http.get("/healthz")).status_code == 200
                    points = [{"facilities": 0, "rss_mib": rss_mib()}]
                    _progress(f"0 facilities: {points[0]['rss_mib']:.1f} MiB")
                    done = 0
                    windows: list[dict[str, Any]] = []
                    for stage in config.stages:
                        began = time.perf_counter()
                        batch = records[done:stage]
                        windows += await _register_and_cache(container, http, batch, config)
                        done = stage
                        points.append(
                            {
                                "facilities": stage,
                                "rss_mib": rss_mib(),
                                "seconds": round(time.perf_counter() - began, 1),
                            }
                        )
                        _progress(f"{stage} facilities: {points[-1]['rss_mib']:.1f} MiB")
                    held = _held(container, done)
    return {"points": points, "windows": _window_sizes(windows), "held": held}


async def _register_and_cache(
    container: Any, http: httpx.AsyncClient, batch: list[dict[str, Any]], config: MemoryConfig
) -> list[dict[str, Any]]:
    gate = asyncio.Semaphore(config.concurrency)
    sizes: list[dict[str, Any]] = []

    async def one(record: dict[str, Any]) -> None:
        async with gate:
            _, key = await container.gateway.facilities.add(new_facility(record, UNLIMITED))
            answer = await http.post(
                f"/v1/tools/{TOOL}", json={}, headers={"Authorization": f"Bearer {key}"}
            )
            if answer.status_code != 200:
                raise RuntimeError(f"{record['hotel_id']}: {answer.status_code} {answer.text}")
            meta = answer.json()["meta"]
            if meta.get("truncated") or meta.get("source") != "upstream":
                raise RuntimeError(f"{record['hotel_id']}: window not read whole: {meta}")
            cached = await container.gateway.cache.peek(f"{record['hotel_id']}:reservations")
            sizes.append(
                {"rows": len(cached.value["rows"]), "json_bytes": len(json.dumps(cached.value))}
            )

    await asyncio.gather(*(one(record) for record in batch))
    return sizes


def _window_sizes(windows: list[dict[str, Any]]) -> dict[str, Any]:
    rows = [w["rows"] for w in windows]
    sizes = [w["json_bytes"] for w in windows]
    return {
        "count": len(windows),
        "rows_mean": statistics.fmean(rows),
        "rows_min": min(rows),
        "rows_max": max(rows),
        "json_bytes_mean": statistics.fmean(sizes),
        "json_bytes_total_mib": sum(sizes) / 2**20,
    }


def _held(container: Any, facilities: int) -> dict[str, Any]:
    """What the in-process structures hold at the end (entries, not bytes)."""
    services = container.gateway
    return {
        "facilities": facilities,
        "read_cache_decoded_entries": len(services.cache._decoded),
        "read_cache_parsed_entries": len(services.cache._parsed),
    }


def _growth(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    steps = []
    for low, high in itertools.pairwise(points):
        added = high["facilities"] - low["facilities"]
        grown = high["rss_mib"] - low["rss_mib"]
        steps.append(
            {
                "from": low["facilities"],
                "to": high["facilities"],
                "rss_growth_mib": grown,
                "kib_per_facility": grown * 1024 / added,
            }
        )
    return steps


def print_memory(results: dict[str, Any]) -> None:
    """The table of the run."""
    reservations, windows = results["config"]["reservations"], results["windows"]
    kib = windows["json_bytes_mean"] / 1024
    print(
        f"\n## replica memory: {reservations} reservations per facility "
        f"(windows: {windows['rows_mean']:.1f} rows, {kib:.1f} KiB as JSON on average)"
    )
    print(f"{'facilities':>10} {'RSS MiB':>9}")
    for point in results["points"]:
        print(f"{point['facilities']:>10,} {point['rss_mib']:>9.1f}")
    for step in results["growth"]:
        print(
            f"{step['from']:>6,} → {step['to']:>6,}: +{step['rss_growth_mib']:.1f} MiB, "
            f"{step['kib_per_facility']:.1f} KiB per facility"
        )


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m bench.memory``."""
    defaults = MemoryConfig()
    parser = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__)
    parser.add_argument(
        "--stages",
        default=",".join(map(str, defaults.stages)),
        help="facility counts to measure at, comma-separated (default 1000,5000)",
    )
    add_defaults_of(
        parser,
        MemoryConfig,
        reservations="reservations per facility (default 50)",
        concurrency="facilities registered and cached at a time",
    )
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write figures")
    args = parser.parse_args(argv)
    stages = tuple(sorted(int(s) for s in args.stages.split(",")))
    config = configured(MemoryConfig, args, stages=stages)
    configure_logging("WARNING")
    results: dict[str, Any] = {"machine": machine(), "config": asdict(config)}
    results.update(asyncio.run(run_memory(config)))
    results["growth"] = _growth(results["points"])
    results["pid_rss_note"] = f"VmRSS of pid {os.getpid()} after gc.collect()"
    print_memory(results)
    args.json.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"\nfigures written to {args.json}")


if __name__ == "__main__":
    main()
