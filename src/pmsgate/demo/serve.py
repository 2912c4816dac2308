"""`pmsgate demo --serve`: keep the emulators and a gateway running to try things by hand."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import httpx
import uvicorn
from pydantic import SecretStr
from rich.console import Console

from pmsgate.app import create_app, open_services
from pmsgate.clock import SystemClock
from pmsgate.config import Settings
from pmsgate.gateway.facilities import NewFacility
from pmsgate.gateway.vault import generate_key_spec
from pmsgate.sandbox.app import Sandbox
from pmsgate.sandbox.kross.seed import SANDBOX_PARTNER_API_KEY
from pmsgate.sandbox.platform.seed import SANDBOX_PLATFORM_TOKEN


async def serve_demo(console: Console, *, seed: int, sandbox_port: int, gateway_port: int) -> None:
    """Serve the three emulators and a gateway with every seeded facility until interrupted."""
    box = Sandbox(seed=seed, clock=SystemClock())
    sandbox_url = f"http://127.0.0.1:{sandbox_port}"
    with tempfile.TemporaryDirectory(prefix="pmsgate-demo-serve-") as data_dir:
        settings = Settings(
            data_dir=Path(data_dir),
            database_url=None,
            redis_url=None,
            kross_base_url=f"{sandbox_url}/kross",
            partner_api_key=SecretStr(SANDBOX_PARTNER_API_KEY),
            secret_keys=SecretStr(generate_key_spec("serve")),
        )
        async with (
            httpx.AsyncClient(timeout=settings.kross_timeout_s) as kross_http,
            open_services(settings, kross_http=kross_http) as services,
        ):
            keys = []
            for record in box.kross.facility_summaries():
                own = record["kind"] == "own"
                _, key = await services.facilities.add(
                    NewFacility(
                        hotel_id=record["hotel_id"],
                        username=record["username"],
                        password=SecretStr(record["password"]),
                        kind=record["kind"],
                        api_key=SecretStr(record["api_key"]) if own else None,
                        integration_id=f"int-{record['hotel_id']}",
                        name=record["name"],
                    )
                )
                keys.append((record["hotel_id"], record["name"], key))
            gateway = create_app(settings, services=services)
            servers = [
                uvicorn.Server(
                    uvicorn.Config(
                        box.asgi_app(), host="127.0.0.1", port=sandbox_port, log_config=None
                    )
                ),
                uvicorn.Server(
                    uvicorn.Config(gateway, host="127.0.0.1", port=gateway_port, log_config=None)
                ),
            ]
            console.rule("[bold]pmsgate demo --serve (Ctrl-C to stop)")
            console.print(
                f"Emulators: {sandbox_url}/kross, /platform (bearer "
                f"{SANDBOX_PLATFORM_TOKEN}), /notes"
            )
            console.print(
                f"Gateway:   http://127.0.0.1:{gateway_port}  (tools at /v1/tools, MCP at /mcp)"
            )
            for hotel_id, name, key in keys:
                console.print(f"  {hotel_id} {name}: gateway key {key}")
            console.print(
                f"Try: curl -H 'Authorization: Bearer {keys[0][2]}' -X POST -d '{{}}' "
                f"http://127.0.0.1:{gateway_port}/v1/tools/get-in-house-guests"
            )
            await asyncio.gather(*(server.serve() for server in servers))
