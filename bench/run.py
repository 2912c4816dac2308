"""``python -m bench.run [overhead|workload|knowledge-sync|replicas|all]``: run benchmarks.

``make bench`` runs ``python -m bench.run`` (= ``all`` with the defaults; ``replicas`` needs
PostgreSQL and Redis and is run only by name). Each
benchmark prints a short table and, with ``--json PATH``, writes every figure
(``bench/results-*.json`` is what bench/README.md quotes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from bench.common import add_defaults_of, configured, machine
from bench.knowledge_sync import KnowledgeSyncConfig, print_knowledge_sync, run_knowledge_sync
from bench.overhead import OverheadConfig, run_overhead
from bench.replicas import ReplicasConfig, print_replicas, run_replicas
from bench.workload import GatewayKind, WorkloadConfig, run_workload
from pmsgate.logs import configure_logging

DEFAULT_WORKLOAD_FACILITIES = 3


TRANSPORTS = ("asgi", "http")
GATEWAYS: tuple[GatewayKind, ...] = ("pmsgate", "naive")


def _add_one_or_both(group: Any, flag: str, both: tuple[str, ...], help_text: str) -> None:
    """``flag``: one of ``both``, or ``both`` (the default)."""
    group.add_argument(flag, choices=[*both, "both"], default="both", help=help_text)


def _chosen(value: str, both: tuple[Any, ...]) -> tuple[Any, ...]:
    """What an option of :func:`_add_one_or_both` chose: ``both``, or the one named."""
    return both if value == "both" else (value,)


def _progress(message: str) -> None:
    print(f"  … {message}", file=sys.stderr, flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument(
        "benchmark",
        nargs="?",
        default="all",
        choices=["overhead", "workload", "knowledge-sync", "replicas", "all"],
        help="which benchmark to run (default: all; all leaves out replicas)",
    )
    parser.add_argument("--json", type=Path, help="also write every figure to this JSON file")
    overhead = parser.add_argument_group("overhead")
    add_defaults_of(
        overhead,
        OverheadConfig,
        requests="sequential calls per kind",
        concurrency="concurrent callers of the throughput phase",
        throughput_requests="calls per kind of the throughput phase",
    )
    _add_one_or_both(
        overhead,
        "--transport",
        TRANSPORTS,
        "in-process ASGI transport, real HTTP (uvicorn on 127.0.0.1), or both",
    )
    workload = parser.add_argument_group("workload")
    workload.add_argument(
        "--facilities",
        type=int,
        default=DEFAULT_WORKLOAD_FACILITIES,
        help="facilities simulated (the issue's workload is 50; default "
        f"{DEFAULT_WORKLOAD_FACILITIES} keeps the run short, see README)",
    )
    workload.add_argument(
        "--calls-per-minute", type=int, default=200, help="tool calls per facility per minute"
    )
    workload.add_argument(
        "--minutes",
        type=float,
        default=None,
        help="simulated minutes (workload, default 60); minutes of steady load (replicas, "
        f"default {ReplicasConfig.minutes:g})",
    )
    add_defaults_of(
        workload,
        WorkloadConfig,
        availability_spread="share of check-availability calls with free-form dates "
        "(the rest ask popular ranges)",
        lifetime_days="simulated days of sparse traffic after the hour, counting tokens (0 = skip)",
    )
    _add_one_or_both(workload, "--gateway", GATEWAYS, "which gateway(s) get the workload")
    knowledge = parser.add_argument_group("knowledge-sync")
    add_defaults_of(
        knowledge,
        KnowledgeSyncConfig,
        apartments="apartments of the synced customer (~35 nodes each)",
    )
    knowledge.add_argument(
        "--platform-requests-per-minute",
        type=int,
        default=KnowledgeSyncConfig.assistant_requests_per_minute,
        help="the platform client's budget per workspace (the platform allows 120)",
    )
    knowledge.add_argument(
        "--apartment-concurrency",
        type=int,
        default=KnowledgeSyncConfig.max_concurrent_apartments,
        help="apartments synced at a time",
    )
    replicas = parser.add_argument_group(
        "replicas (PostgreSQL + Redis; PMSGATE_BENCH_DATABASE_URL, PMSGATE_BENCH_REDIS_URL)"
    )
    add_defaults_of(
        replicas,
        ReplicasConfig,
        burst="calls of the cold-start burst",
        rate="calls per second of the steady load, across the replicas",
        uncached_share="share of calls asking availability beyond the cached window "
        "(each its own range)",
        replicas="pmsgate serve processes",
    )
    replicas.add_argument(
        "--no-scheduler",
        action="store_true",
        help="serve without the scheduled jobs, so that the burst, not check-connections, "
        "gets the first token",
    )
    replicas.add_argument(
        "--database-url",
        default=ReplicasConfig.database_url,
        help="PostgreSQL database (created if missing, its schema emptied; name contains bench)",
    )
    replicas.add_argument(
        "--redis-url",
        default=ReplicasConfig.redis_url,
        help="Redis database, not 0 (a fresh namespace, deleted at the end)",
    )
    replicas.add_argument(
        "--keep-logs", type=Path, help="copy the processes' logs into this directory"
    )
    return parser


def _print_overhead(results: dict[str, Any]) -> None:
    for transport, figures in results["transports"].items():
        print(f"\n## overhead — {transport}")
        print(
            f"{'call':<34} {'client p50':>10} {'p99':>8} {'server p50':>10} {'p99':>8} "
            f"{'req/s (1)':>9} {'req/s (c)':>9}"
        )
        for name, row in figures.items():
            if name == "breakdown":
                continue
            server = row.get("server") or {}
            print(
                f"{name:<34} {row['client']['p50_ms']:>10.2f} {row['client']['p99_ms']:>8.2f} "
                f"{server.get('p50_ms', float('nan')):>10.2f} "
                f"{server.get('p99_ms', float('nan')):>8.2f} "
                f"{row['throughput_sequential_rps']:>9.0f} {row['throughput_concurrent_rps']:>9.0f}"
            )
        for step, figures_ms in figures.get("breakdown", {}).items():
            print(f"  {step}: p50 {figures_ms['p50_ms']:.3f} ms, p99 {figures_ms['p99_ms']:.3f} ms")


def _print_workload(results: dict[str, Any]) -> None:
    print("\n## workload", json.dumps(results["config"]))
    keys = [
        "tool_calls",
        "ok_share",
        "errors",
        "error_codes",
        "errors_by_tool",
        "errors_first_minute",
        "errors_after_first_minute",
        "answered_from_cache_share",
        "stale_share",
        "stale_max_age_s",
        "upstream_requests",
        "upstream_per_facility_minute_max",
        "upstream_per_facility_minute_mean",
        "upstream_per_facility_run_max",
        "upstream_429",
        "tokens_issued_per_facility",
        "sessions_refused",
        "token_lifetime_phase",
        "wall_s",
    ]
    for gateway in ("pmsgate", "naive"):
        if gateway not in results:
            continue
        print(f"\n### {gateway}")
        for key in keys:
            print(f"  {key}: {results[gateway][key]}")


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    command = " ".join(["python -m bench.run", *sys.argv[1:]])
    results: dict[str, Any] = {"machine": machine(), "command": command}
    if args.benchmark in ("overhead", "all"):
        config = configured(OverheadConfig, args, transports=_chosen(args.transport, TRANSPORTS))
        results["overhead"] = await run_overhead(config, _progress)
        _print_overhead(results["overhead"])
    if args.benchmark in ("workload", "all"):
        minutes = 60 if args.minutes is None else round(args.minutes)
        workload = configured(WorkloadConfig, args, minutes=minutes)
        gateways: tuple[GatewayKind, ...] = _chosen(args.gateway, GATEWAYS)
        results["workload"] = await run_workload(workload, gateways, _progress)
        _print_workload(results["workload"])
    if args.benchmark in ("knowledge-sync", "all"):
        knowledge = configured(
            KnowledgeSyncConfig,
            args,
            assistant_requests_per_minute=args.platform_requests_per_minute,
            max_concurrent_apartments=args.apartment_concurrency,
        )
        results["knowledge_sync"] = await run_knowledge_sync(knowledge, _progress)
        print_knowledge_sync(results["knowledge_sync"])
    if args.benchmark == "replicas":
        replicas = configured(
            ReplicasConfig,
            args,
            minutes=ReplicasConfig.minutes if args.minutes is None else args.minutes,
            scheduler=not args.no_scheduler,
        )
        results["replicas"] = await run_replicas(replicas, _progress, args.keep_logs)
        print_replicas(results["replicas"])
    results["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return results


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m bench.run``."""
    args = _parser().parse_args(argv)
    # The gateway logs every stale answer at INFO; a benchmark prints figures, not logs.
    configure_logging("WARNING")
    results = asyncio.run(_main(args))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str) + "\n")
        print(f"\nfigures written to {args.json}")


if __name__ == "__main__":
    main()
