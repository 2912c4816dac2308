"""Serve the emulator or a gateway under uvicorn on 127.0.0.1:<ephemeral port> (overhead, HTTP).

``python -m bench.serve emulator`` prints one JSON line ``{"port": …, "facility": {…}}``;
``python -m bench.serve gateway --kross-url URL`` reads that facility record as one
JSON line on standard input (its password is not put on the command line) and prints
``{"port": …, "key": …}``. Both serve until terminated. Each app is wrapped in
:class:`bench.common.ServerTimer`, so ``GET /_bench/server-timings`` answers the time
each request spent inside it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import tempfile
from typing import Any

import uvicorn

from bench.common import (
    UNLIMITED,
    ServerTimer,
    gateway_settings,
    new_facility,
    sqlite_url,
)
from pmsgate.app import create_app
from pmsgate.catalogue.tools import SPEC_TOOL_NAMES
from pmsgate.clock import SystemClock
from pmsgate.container import open_container
from pmsgate.logs import configure_logging
from pmsgate.sandbox.kross.app import create_kross_app
from pmsgate.sandbox.kross.store import KrossStore

# Cached tool answers stay fresh for the whole run: the overhead benchmark measures the
# cached path, not how often it is refreshed.
LONG_FRESHNESS = dict.fromkeys(SPEC_TOOL_NAMES, 86400.0)


def _listening_socket() -> socket.socket:
    # IPPROTO_TCP explicitly: asyncio only sets TCP_NODELAY on sockets whose proto says TCP
    # (proto 0 would leave Nagle on and add ~40 ms per keep-alive response).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    # Listening before the port is announced: early connections wait in the backlog.
    sock.listen(2048)
    return sock


async def _serve(app: Any, sock: socket.socket, announce: dict[str, Any]) -> None:
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    print(json.dumps({"port": sock.getsockname()[1], **announce}), flush=True)
    await server.serve(sockets=[sock])


async def serve_emulator(
    seed: int, facilities: int | None = None, reservations: int | None = None
) -> None:
    """The booking-system emulator, every facility with limits that never block.

    ``facilities``: how many (the emulator's default when None). ``reservations``: keep only
    that many reservations per facility, those arriving nearest today (bench.memory's
    assumption of a realistic window), instead of the seed's fully booked 120 days.
    """
    store = (
        KrossStore(seed=seed, clock=SystemClock())
        if facilities is None
        else KrossStore(seed=seed, clock=SystemClock(), facility_count=facilities)
    )
    today = store.clock.now().date()
    for facility in store.facilities():
        store.set_limits(facility.hotel_id, per_minute=10**9, per_hour=10**9, per_day=10**9)
        if reservations is not None:
            nearest = sorted(
                facility.reservations.values(), key=lambda r: abs((r.arrival - today).days)
            )[:reservations]
            facility.reservations = {r.id_reservation: r for r in nearest}
    record = store.facility_summaries()[0]
    await _serve(ServerTimer(create_kross_app(store)), _listening_socket(), {"facility": record})


async def serve_gateway(kross_url: str, record: dict[str, Any]) -> None:
    """The real gateway on the emulator at ``kross_url``, one facility, limits that never block."""
    with tempfile.TemporaryDirectory(prefix="pmsgate-bench-") as directory:
        settings = gateway_settings(
            sqlite_url(directory), kross_url, cache_max_age_s=LONG_FRESHNESS
        )
        # kross_http=None: the gateway's own httpx client, over real HTTP.
        async with open_container(settings, clock=SystemClock()) as container:
            _, key = await container.gateway.facilities.add(new_facility(record, UNLIMITED))
            app = create_app(settings, container=container)
            await _serve(ServerTimer(app), _listening_socket(), {"key": key})


def main() -> None:
    """Entry point of ``python -m bench.serve``."""
    parser = argparse.ArgumentParser(prog="python -m bench.serve")
    parser.add_argument("role", choices=["emulator", "gateway"])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--kross-url", default="")
    parser.add_argument("--facilities", type=int, default=None, help="emulator: how many")
    parser.add_argument(
        "--reservations", type=int, default=None, help="emulator: reservations kept per facility"
    )
    args = parser.parse_args()
    configure_logging("WARNING")
    if args.role == "emulator":
        asyncio.run(serve_emulator(args.seed, args.facilities, args.reservations))
    else:
        record = json.loads(sys.stdin.readline())
        asyncio.run(serve_gateway(args.kross_url, record))


if __name__ == "__main__":
    main()
