"""``python -m bench.app_cpu``: the CPU time of one call inside the app, no server, no client.

The apps of :mod:`bench.wrk_side_by_side` called straight through ASGI (a scope, a
``receive`` that gives ``{}``, a ``send`` that keeps the messages) in a loop, so that what
is measured is the app alone: ``pmsgate serve``'s app (``create_app(settings)``, lifespan
entered, one facility of the emulator registered, its window cached) answering
``POST /v1/tools/get-in-house-guests``, and :mod:`bench.trivial_app`'s ``POST /trivial``.
CPU time (``time.process_time``) rather than wall time: a shared machine changes it less.
``--profile`` prints cProfile's view of the gateway's calls as well; ``--redis-url`` runs the
gateway on Redis (a namespace of its own, deleted at the end).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

from pydantic import SecretStr

from bench.common import SECRET_KEYS, UNLIMITED, new_facility
from bench.serve import LONG_FRESHNESS
from bench.trivial_app import app as trivial_app
from pmsgate.app import create_app
from pmsgate.config import Settings
from pmsgate.logs import configure_logging
from pmsgate.sandbox.kross.seed import SANDBOX_PARTNER_API_KEY

TOOL_PATH = "/v1/tools/get-in-house-guests"


async def call(app: Any, path: str, key: str) -> int:
    """One POST with body ``{}`` and the key, straight through ASGI; the status."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1:8080"),
            (b"content-type", b"application/json"),
            (b"content-length", b"2"),
            (b"authorization", f"Bearer {key}".encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8080),
        "state": {},
    }
    messages: list[dict[str, Any]] = []
    body = [{"type": "http.request", "body": b"{}", "more_body": False}]

    async def receive() -> dict[str, Any]:
        return body.pop() if body else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    await app(scope, receive, send)
    return int(messages[0]["status"])


async def cpu_per_call(app: Any, path: str, key: str, calls: int, repeats: int) -> float:
    """The least CPU time per call (µs) of ``repeats`` loops of ``calls`` calls."""
    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        for _ in range(calls):
            await call(app, path, key)
        best = min(best, (time.process_time() - started) / calls * 1e6)
    return best


async def run(
    announced: dict[str, Any],
    calls: int,
    repeats: int,
    profile: bool,
    redis_url: str | None = None,
) -> dict[str, float]:
    """Both apps' CPU per call, the gateway on the emulator ``announced``."""
    with tempfile.TemporaryDirectory(prefix="pmsgate-cpu-") as directory:
        settings = Settings(
            database_url=f"sqlite+aiosqlite:///{directory}/gateway.db",
            redis_url=redis_url,
            redis_namespace=f"pmsgate-cpu-{uuid.uuid4().hex[:8]}",
            kross_base_url=f"http://127.0.0.1:{announced['port']}",
            partner_api_key=SecretStr(SANDBOX_PARTNER_API_KEY),
            secret_keys=SecretStr(SECRET_KEYS),
            cache_max_age_s=LONG_FRESHNESS,
            scheduler_enabled=False,
            log_level="WARNING",
        )
        configure_logging(settings.log_level)
        app = create_app(settings)
        async with app.router.lifespan_context(app):
            facilities = app.state.container.gateway.facilities
            _, key = await facilities.add(new_facility(announced["facility"], UNLIMITED))
            results = {}
            for name, target, path in (
                ("cached tool", app, TOOL_PATH),
                ("trivial FastAPI", trivial_app, "/trivial"),
            ):
                for _ in range(300):  # warm: the window cached, every path taken once
                    status = await call(target, path, key)
                    if status != 200:
                        raise RuntimeError(f"{name}: {status}")
                if profile and target is app:
                    profiler = cProfile.Profile()
                    profiler.enable()
                    for _ in range(calls):
                        await call(target, path, key)
                    profiler.disable()
                    pstats.Stats(profiler).sort_stats("cumulative").print_stats(60)
                    pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
                results[name] = await cpu_per_call(target, path, key, calls, repeats)
                print(f"{name}: {results[name]:.0f} µs CPU per call", flush=True)
            if redis_url:
                from redis.asyncio import Redis

                redis = Redis.from_url(redis_url)
                keys = [k async for k in redis.scan_iter(match=f"{settings.redis_namespace}*")]
                if keys:
                    await redis.delete(*keys)
                await redis.aclose()
            return results


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m bench.app_cpu``."""
    parser = argparse.ArgumentParser(prog="python -m bench.app_cpu", description=__doc__)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--redis-url", default=None, help="the gateway on this Redis")
    args = parser.parse_args(argv)
    emulator = subprocess.Popen(
        [sys.executable, "-m", "bench.serve", "emulator", "--seed", "7"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert emulator.stdout is not None
    try:
        announced = json.loads(emulator.stdout.readline())
        results = asyncio.run(
            run(announced, args.calls, args.repeats, args.profile, args.redis_url)
        )
    finally:
        emulator.terminate()
        emulator.wait()
    ratio = results["trivial FastAPI"] / results["cached tool"]
    print(f"the trivial route's CPU per call / the cached tool's: {ratio:.2f}")


if __name__ == "__main__":
    main()
