"""A whole gateway (services + HTTP app) on the booking-system emulator, per test."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import stamina
from fastapi import FastAPI
from pydantic import SecretStr

from pmsgate.app import create_app
from pmsgate.clock import ManualClock
from pmsgate.config import Settings
from pmsgate.container import Container, open_container
from pmsgate.gateway.context import GatewayServices
from pmsgate.gateway.facilities import NewFacility
from pmsgate.gateway.scopes import all_scopes
from pmsgate.gateway.vault import generate_key_spec
from pmsgate.sandbox.kross.seed import SANDBOX_PARTNER_API_KEY
from pmsgate.sandbox.kross.store import KrossStore
from tests.e2e.processes import free_port, pmsgate, serving

SECRET_KEYS = generate_key_spec("t1")
ADMIN_TOKEN = "admin-token-for-tests-0123456789"


@pytest.fixture(autouse=True)
def no_retry_waits() -> Iterator[None]:
    # Retries happen, but without wall-clock waits: stamina's testing mode.
    with stamina.set_testing(True, attempts=3):
        yield


def gateway_settings(database_url: str, redis_url: str | None = None, **overrides: Any) -> Settings:
    """Settings of a gateway on the emulator (in-process transport, so the host is a name)."""
    values: dict[str, Any] = {
        "database_url": database_url,
        "redis_url": redis_url,
        "kross_base_url": "http://kross.test",
        "partner_api_key": SecretStr(SANDBOX_PARTNER_API_KEY),
        "secret_keys": SecretStr(SECRET_KEYS),
        "admin_token": SecretStr(ADMIN_TOKEN),
        "limiter_wait_s": 0.0,
    }
    values.update(overrides)
    return Settings(**values)


@pytest.fixture(scope="session")
def running(tmp_path_factory) -> Iterator[dict[str, Any]]:
    """`pmsgate sandbox` and `pmsgate serve` as processes; a partner facility added by the CLI."""
    sandbox_port, gateway_port = free_port(), free_port()
    kross = f"http://127.0.0.1:{sandbox_port}/kross"
    with serving("sandbox", "--port", str(sandbox_port), ready_url=f"{kross}/_sandbox/facilities"):
        facilities = httpx.get(f"{kross}/_sandbox/facilities").json()
        partner_key = next(f["api_key"] for f in facilities if f["kind"] == "partner")
        env = {
            "PMSGATE_DATA_DIR": str(tmp_path_factory.mktemp("gateway")),
            "PMSGATE_KROSS_BASE_URL": kross,
            "PMSGATE_PARTNER_API_KEY": partner_key,
            "PMSGATE_SECRET_KEYS": generate_key_spec("e2e"),
            "PMSGATE_ADMIN_TOKEN": ADMIN_TOKEN,
            "PMSGATE_DATABASE_URL": "",
            "PMSGATE_REDIS_URL": "",
        }
        facility = next(f for f in facilities if f["kind"] == "partner")
        # Commands never migrate: the schema first, as an operator does (README).
        upgraded = pmsgate("db", "upgrade", env=env)
        assert upgraded.returncode == 0, upgraded.stderr
        added = pmsgate(
            "facilities", "add",
            "--hotel-id", facility["hotel_id"],
            "--username", facility["username"],
            "--kind", "partner",
            "--integration-id", "int-e2e",
            "--password-stdin", "--json", "--all-scopes",
            env=env,
            stdin=facility["password"] + "\n",
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        key = json.loads(added.stdout)["gateway_key"]
        gateway = f"http://127.0.0.1:{gateway_port}"
        with serving("serve", "--port", str(gateway_port), ready_url=f"{gateway}/healthz", env=env):
            yield {
                "gateway": gateway,
                "sandbox": f"http://127.0.0.1:{sandbox_port}",
                "kross": kross,
                "key": key,
                "facility": facility,
            }


@dataclass
class Gateway:
    """One running gateway: its container, its app, and an HTTP client on it."""

    container: Container
    app: FastAPI
    http: httpx.AsyncClient

    @property
    def services(self) -> GatewayServices:
        """The gateway's services (``container.gateway``)."""
        return self.container.gateway

    async def tool(self, name: str, key: str, **arguments: Any) -> httpx.Response:
        """POST /v1/tools/{name} with a gateway key."""
        return await self.http.post(
            f"/v1/tools/{name}", json=arguments, headers={"Authorization": f"Bearer {key}"}
        )

    async def availability(
        self, key: str, arrival: dt.date, nights: int = 2, **arguments: Any
    ) -> httpx.Response:
        """check-availability of ``nights`` nights from ``arrival`` (more ``arguments``, such
        as ``apartment_id``, as given)."""
        departure = arrival + dt.timedelta(days=nights)
        return await self.tool(
            "check-availability",
            key,
            arrival=arrival.isoformat(),
            departure=departure.isoformat(),
            **arguments,
        )


@asynccontextmanager
async def running_gateway(
    settings: Settings,
    kross_http: httpx.AsyncClient,
    clock: ManualClock,
    *,
    shared_clock: Any = None,
) -> AsyncIterator[Gateway]:
    """Container, app (with its lifespan, for MCP) and a client, closed on exit.

    ``shared_clock``: what the replicas agree on (Redis's TIME in production); default the
    replica's ``clock``. A replica whose clock is off passes the booking system's here.
    """
    async with (
        open_container(
            settings, kross_http=kross_http, clock=clock, shared_clock=shared_clock
        ) as container,
        gateway_on(settings, container) as gateway,
    ):
        yield gateway


@asynccontextmanager
async def gateway_on(settings: Settings, container: Container) -> AsyncIterator[Gateway]:
    """The app of ``settings`` on ``container`` (inside its lifespan) and a client on it."""
    app = create_app(settings, container=container)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway.test") as http:
            yield Gateway(container, app, http)


async def add_seeded_facility(
    services: GatewayServices, store: KrossStore, index: int = 0, **overrides: Any
) -> tuple[dict[str, Any], str]:
    """Register one of the emulator's facilities; returns its sandbox record and gateway key."""
    record = store.facility_summaries()[index]
    fields: dict[str, Any] = {
        "hotel_id": record["hotel_id"],
        "username": record["username"],
        "password": SecretStr(record["password"]),
        "kind": record["kind"],
        "api_key": SecretStr(record["api_key"]) if record["kind"] == "own" else None,
        "integration_id": f"int-{record['hotel_id']}",
        "name": record["name"],
        # Every scope: these tests drive every route; refusals: tests/gateway/test_scopes.py.
        "scopes": list(all_scopes()),
    }
    fields.update(overrides)
    _, key = await services.facilities.add(NewFacility(**fields))
    return record, key


@pytest.fixture
def backend(request, database_url) -> dict[str, Any]:
    """Embedded (SQLite, in-memory limiter and cache) or shared (PostgreSQL + Redis) settings."""
    if database_url.startswith("sqlite"):
        return {"database_url": database_url}
    return {
        "database_url": database_url,
        "redis_url": request.getfixturevalue("redis_url"),
        "redis_namespace": request.getfixturevalue("redis_namespace"),
    }


@pytest.fixture
async def gateway(backend, kross_http, clock) -> AsyncIterator[Gateway]:
    settings = gateway_settings(**backend)
    async with running_gateway(settings, kross_http, clock) as running:
        yield running


@pytest.fixture
async def facility(gateway, kross_store) -> tuple[dict[str, Any], str]:
    return await add_seeded_facility(gateway.services, kross_store)
