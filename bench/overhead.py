"""Overhead: what the gateway adds to a call, against calling the emulator directly.

Kinds of call, all made in the same run with the same httpx client:

- ``healthz``: ``GET /healthz`` on the gateway, the floor of its HTTP stack (FastAPI,
  the request-id middleware), no key, no database;
- ``cached tool (instructions)``: ``POST /v1/tools/get-checkin-instructions`` by
  apartment, answered from the read cache (a small cached value);
- ``cached tool (reservation status)``: ``POST /v1/tools/get-reservation-status``,
  derived from the facility's cached reservation window (~50 reservations);
- ``cached tool (availability)``: ``POST /v1/tools/check-availability`` for a 3-night stay,
  answered from the cached availability (since ea19244 a 90-day window per facility);
- ``uncached pass-through``: ``POST /v1/operations/calendar/get-availability`` with a
  payload never asked before (a new 3-night range each call), so the read cache misses
  and the call goes upstream: key check, limiter, token, one request, cache write;
- ``direct emulator``: the same ``calendar/get-availability`` payloads POSTed straight to
  the emulator with a bearer token.

The facility's limits are set so high (gateway and emulator) that nothing ever waits
for a permit, and the tools' freshness bounds are a day, so the cached calls stay cached.

Two transports: ``asgi`` (everything in one process and one event loop, httpx's
ASGITransport, no sockets) and ``http`` (the emulator and the gateway each under
uvicorn in its own process on 127.0.0.1, real TCP on loopback, the client here).
Client latency is measured around each call; server time is measured inside each app
(:class:`bench.common.ServerTimer`), so for the gateway it excludes the client and the
network but includes the upstream call of the uncached kind.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.common import (
    GATEWAY_HOST,
    KROSS_HOST,
    UNLIMITED,
    BenchConfig,
    ServerTimer,
    credentials_of,
    freeze_heap,
    gateway_settings,
    in_process_gateway,
    latency,
    new_facility,
    sqlite_url,
)
from bench.serve import LONG_FRESHNESS
from pmsgate.clock import SystemClock
from pmsgate.config import DEFAULT_USER_AGENT
from pmsgate.gateway.context import GatewayServices
from pmsgate.gateway.facilities import FacilityView
from pmsgate.integrations.kross.client import KrossClient
from pmsgate.integrations.kross.operations import load_operations
from pmsgate.sandbox.kross.app import create_kross_app
from pmsgate.sandbox.kross.store import KrossStore

REPO_ROOT = Path(__file__).resolve().parents[1]
UPSTREAM_OPERATION = "calendar/get-availability"


@dataclass(frozen=True)
class OverheadConfig(BenchConfig):
    """Over which transports, and how many calls of each kind."""

    transports: tuple[str, ...] = ("asgi", "http")
    requests: int = 1000
    warmup: int = 100
    concurrency: int = 16
    throughput_requests: int = 2000


@dataclass
class Kind:
    """One kind of call: how to make the next one, and where its server time is measured."""

    name: str
    server: str  # "gateway" or "emulator"
    label: str  # the ServerTimer label of its requests
    call: Callable[[], Awaitable[httpx.Response]]


@dataclass
class Setup:
    """The apps under test, reachable through one client."""

    client: httpx.AsyncClient
    gateway_url: str
    kross_url: str
    key: str
    record: dict[str, Any]
    gateway_timings: Callable[[], Awaitable[dict[str, list[float]]]]
    emulator_timings: Callable[[], Awaitable[dict[str, list[float]]]]
    services: GatewayServices | None = None  # in-process only: for the breakdown of a cached call


def _ranges(start: dt.date) -> Iterator[dict[str, str]]:
    """3-night availability ranges, a new one each time (never a cache hit)."""
    for offset in itertools.count():
        first = start + dt.timedelta(days=offset)
        yield {
            "date_from": first.isoformat(),
            "date_to": (first + dt.timedelta(days=2)).isoformat(),
        }


def _in_days(days: int) -> str:
    return (dt.datetime.now(dt.UTC).date() + dt.timedelta(days=days)).isoformat()


async def _kinds(setup: Setup) -> list[Kind]:
    client, gateway, kross = setup.client, setup.gateway_url, setup.kross_url
    bearer = {"Authorization": f"Bearer {setup.key}"}
    apartment_id = setup.record["apartments"][0]["id_room_type"]
    reservation_id = await _reservation_in_window(setup)
    token = await KrossClient(
        client,
        base_url=kross,
        operations=load_operations(),
        user_agent=DEFAULT_USER_AGENT,
        clock=SystemClock(),
    ).get_token(credentials_of(setup.record))
    direct_headers = {
        "User-Agent": DEFAULT_USER_AGENT,
        "Accept": "application/json",
        "Authorization": f"Bearer {token.value.get_secret_value()}",
        "X-Bench-Tag": "direct",
    }
    today = dt.datetime.now(dt.UTC).date()
    through_gateway, direct = _ranges(today), _ranges(today)

    def healthz() -> Awaitable[httpx.Response]:
        return client.get(f"{gateway}/healthz")

    def instructions() -> Awaitable[httpx.Response]:
        return client.post(
            f"{gateway}/v1/tools/get-checkin-instructions",
            json={"apartment_id": apartment_id},
            headers=bearer,
        )

    def status() -> Awaitable[httpx.Response]:
        return client.post(
            f"{gateway}/v1/tools/get-reservation-status",
            json={"reservation_id": reservation_id},
            headers=bearer,
        )

    stay = {"arrival": _in_days(10), "departure": _in_days(13)}

    def availability() -> Awaitable[httpx.Response]:
        return client.post(f"{gateway}/v1/tools/check-availability", json=stay, headers=bearer)

    def uncached() -> Awaitable[httpx.Response]:
        return client.post(
            f"{gateway}/v1/operations/{UPSTREAM_OPERATION}",
            json=next(through_gateway),
            headers=bearer,
        )

    def emulator() -> Awaitable[httpx.Response]:
        return client.post(
            f"{kross}/v5/{UPSTREAM_OPERATION}", json=next(direct), headers=direct_headers
        )

    return [
        Kind("healthz", "gateway", "/healthz", healthz),
        Kind(
            "cached tool (instructions)",
            "gateway",
            "/v1/tools/get-checkin-instructions",
            instructions,
        ),
        Kind(
            "cached tool (reservation status)",
            "gateway",
            "/v1/tools/get-reservation-status",
            status,
        ),
        Kind(
            "cached tool (availability)",
            "gateway",
            "/v1/tools/check-availability",
            availability,
        ),
        Kind(
            "uncached pass-through",
            "gateway",
            f"/v1/operations/{UPSTREAM_OPERATION}",
            uncached,
        ),
        Kind("direct emulator", "emulator", "direct", emulator),
    ]


async def _reservation_in_window(setup: Setup) -> int:
    """A reservation the tools' cached window holds (asked through the gateway itself)."""
    answer = await setup.client.post(
        f"{setup.gateway_url}/v1/tools/get-in-house-guests",
        json={},
        headers={"Authorization": f"Bearer {setup.key}"},
    )
    answer.raise_for_status()
    rows = answer.json()["data"]["reservations"]
    return int(rows[0]["reservation_id"])


async def breakdown(
    setup: Setup, services: GatewayServices, kinds: list[Kind], rounds: int
) -> dict[str, Any]:
    """Where a cached call's server time goes: the key check and the tool, timed apart.

    The last figure is a diagnostic, not the gateway's behaviour: the same cached call
    with ``facilities.authenticate`` replaced by a plain function returning the facility,
    the floor the remembered key check (``PMSGATE_GATEWAY_KEY_CACHE_S``) approaches.
    """
    apartment_id = setup.record["apartments"][0]["id_room_type"]
    reservation_id = await _reservation_in_window(setup)
    stay = {"arrival": _in_days(10), "departure": _in_days(13)}
    authenticate = services.facilities.authenticate
    facility = await authenticate(setup.key)
    steps: dict[str, Callable[[], Awaitable[Any]]] = {
        "gateway key check (facilities.authenticate; a remembered key, no query)": lambda: (
            authenticate(setup.key)
        ),
        "tool only: get-checkin-instructions (cache read)": lambda: services.tools.call(
            facility, "get-checkin-instructions", {"apartment_id": apartment_id}
        ),
        "tool only: get-reservation-status (cached reservation window)": lambda: (
            services.tools.call(
                facility, "get-reservation-status", {"reservation_id": reservation_id}
            )
        ),
        "tool only: check-availability (cached availability)": lambda: services.tools.call(
            facility, "check-availability", stay
        ),
    }
    figures: dict[str, Any] = {}
    for name, step in steps.items():
        samples: list[float] = []
        for _ in range(rounds):
            started = time.perf_counter()
            await step()
            samples.append(time.perf_counter() - started)
        figures[name] = latency(samples).as_dict()

    cached = next(k for k in kinds if k.name == "cached tool (instructions)")

    async def remembered(raw_key: str) -> FacilityView:
        if raw_key != setup.key:
            return await authenticate(raw_key)
        return facility

    services.facilities.authenticate = remembered
    try:
        await setup.gateway_timings()
        for _ in range(rounds):
            await _timed(cached, [], [])
        server = (await setup.gateway_timings()).get(cached.label, [])
    finally:
        services.facilities.authenticate = authenticate
    figures["what-if: cached tool (instructions) server time, key check from memory"] = latency(
        server
    ).as_dict()
    return figures


async def _timed(kind: Kind, samples: list[float], failures: list[int]) -> None:
    started = time.perf_counter()
    response = await kind.call()
    samples.append(time.perf_counter() - started)
    if response.status_code != 200:
        failures.append(response.status_code)


async def measure(
    setup: Setup, config: OverheadConfig, progress: Callable[[str], None]
) -> dict[str, Any]:
    """Warm-up, interleaved sequential latency, then concurrent throughput per kind."""
    kinds = await _kinds(setup)
    failures: dict[str, list[int]] = {k.name: [] for k in kinds}
    for _ in range(config.warmup):
        for kind in kinds:
            await _timed(kind, [], failures[kind.name])
    await setup.gateway_timings()
    await setup.emulator_timings()

    # Sequential, interleaved: each round calls every kind once, in a rotating order,
    # so drift (GC, caches, the OS) is shared fairly between the kinds.
    client_samples: dict[str, list[float]] = {k.name: [] for k in kinds}
    for round_number in range(config.requests):
        shift = round_number % len(kinds)
        for kind in kinds[shift:] + kinds[:shift]:
            await _timed(kind, client_samples[kind.name], failures[kind.name])
    gateway_server = await setup.gateway_timings()
    emulator_server = await setup.emulator_timings()
    progress(f"sequential latency: {config.requests} rounds of {len(kinds)} kinds")

    throughput: dict[str, float] = {}
    for kind in kinds:
        remaining = iter(range(config.throughput_requests))

        async def worker(kind: Kind = kind, remaining: Iterator[int] = remaining) -> None:
            for _ in remaining:
                await _timed(kind, [], failures[kind.name])

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(config.concurrency)))
        throughput[kind.name] = config.throughput_requests / (time.perf_counter() - started)
    await setup.gateway_timings()
    await setup.emulator_timings()
    progress(
        f"throughput: {config.throughput_requests} calls per kind, {config.concurrency} callers"
    )

    results: dict[str, Any] = {}
    for kind in kinds:
        client = latency(client_samples[kind.name])
        server_samples = (gateway_server if kind.server == "gateway" else emulator_server).get(
            kind.label, []
        )
        results[kind.name] = {
            "client": client.as_dict(),
            "server": latency(server_samples).as_dict(),
            "throughput_sequential_rps": 1000.0 / client.mean_ms,
            "throughput_concurrent_rps": throughput[kind.name],
            "non_200": len(failures[kind.name]),
        }
    if setup.services is not None:
        results["breakdown"] = await breakdown(setup, setup.services, kinds, config.requests)
    upstream = latency(emulator_server.get(f"/v5/{UPSTREAM_OPERATION}", []))
    results["emulator, serving the gateway's upstream calls"] = {
        "client": {"p50_ms": float("nan"), "p99_ms": float("nan")},
        "server": upstream.as_dict(),
        "throughput_sequential_rps": float("nan"),
        "throughput_concurrent_rps": float("nan"),
        "non_200": 0,
    }
    return results


# --- the two transports ------------------------------------------------------------------


@asynccontextmanager
async def asgi_setup(config: OverheadConfig) -> AsyncIterator[Setup]:
    """Emulator and gateway in this process; one client with a transport onto each."""
    clock = SystemClock()
    store = KrossStore(seed=config.seed, clock=clock)
    record = store.facility_summaries()[0]
    store.set_limits(record["hotel_id"], per_minute=10**9, per_hour=10**9, per_day=10**9)
    emulator = ServerTimer(create_kross_app(store))
    with tempfile.TemporaryDirectory(prefix="pmsgate-bench-") as directory:
        settings = gateway_settings(
            sqlite_url(directory), KROSS_HOST, cache_max_age_s=LONG_FRESHNESS
        )
        upstream = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=emulator), base_url=KROSS_HOST
        )
        async with upstream, in_process_gateway(settings, upstream, clock) as gateway:
            _, key = await gateway.services.facilities.add(new_facility(record, UNLIMITED))
            mounts = {
                GATEWAY_HOST: httpx.ASGITransport(app=gateway.timer),
                KROSS_HOST: httpx.ASGITransport(app=emulator),
            }
            async with httpx.AsyncClient(mounts=mounts) as client:

                async def gateway_timings() -> dict[str, list[float]]:
                    return gateway.timer.take()

                async def emulator_timings() -> dict[str, list[float]]:
                    return emulator.take()

                freeze_heap()
                yield Setup(
                    client,
                    GATEWAY_HOST,
                    KROSS_HOST,
                    key,
                    record,
                    gateway_timings,
                    emulator_timings,
                    gateway.services,
                )


async def _spawn(*args: str, stdin: bytes | None = None) -> tuple[asyncio.subprocess.Process, Any]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.serve",
        *args,
        cwd=REPO_ROOT,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
    )
    if stdin is not None:
        assert process.stdin is not None
        process.stdin.write(stdin)
        await process.stdin.drain()
        process.stdin.close()
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), timeout=60)
    if not line:
        raise RuntimeError(f"bench.serve {args[0]} did not start (exit {await process.wait()})")
    return process, json.loads(line)


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is not None:
        return
    process.terminate()
    try:
        await asyncio.wait_for(process.wait(), timeout=10)
    except TimeoutError:
        process.kill()
        await process.wait()


@asynccontextmanager
async def http_setup(config: OverheadConfig) -> AsyncIterator[Setup]:
    """Emulator and gateway each under uvicorn in its own process; this process is the client."""
    emulator, announced = await _spawn("emulator", "--seed", str(config.seed))
    gateway: asyncio.subprocess.Process | None = None
    try:
        kross_url = f"http://127.0.0.1:{announced['port']}"
        record = announced["facility"]
        gateway, started = await _spawn(
            "gateway", "--kross-url", kross_url, stdin=(json.dumps(record) + "\n").encode()
        )
        gateway_url = f"http://127.0.0.1:{started['port']}"
        pool = httpx.Limits(
            max_connections=config.concurrency * 2, max_keepalive_connections=config.concurrency * 2
        )
        async with httpx.AsyncClient(limits=pool, timeout=60) as client:

            async def timings(url: str) -> dict[str, list[float]]:
                answer = await client.get(f"{url}/_bench/server-timings")
                answer.raise_for_status()
                samples: dict[str, list[float]] = answer.json()
                return samples

            yield Setup(
                client,
                gateway_url,
                kross_url,
                started["key"],
                record,
                lambda: timings(gateway_url),
                lambda: timings(kross_url),
            )
    finally:
        if gateway is not None:
            await _stop(gateway)
        await _stop(emulator)


async def run_overhead(
    config: OverheadConfig, progress: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """Both transports (or the chosen one); figures by transport and kind of call."""
    results: dict[str, Any] = {"config": config.__dict__.copy(), "transports": {}}
    setups = {"asgi": asgi_setup, "http": http_setup}
    for transport in config.transports:
        progress(f"overhead over {transport}")
        async with setups[transport](config) as setup:
            results["transports"][transport] = await measure(setup, config, progress)
    return results
