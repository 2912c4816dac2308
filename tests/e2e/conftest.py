"""A whole gateway (services + HTTP app) on the booking-system emulator, per test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import stamina
from fastapi import FastAPI
from pydantic import SecretStr

from pmsgate.app import Services, create_app, open_services
from pmsgate.clock import ManualClock
from pmsgate.config import Settings
from pmsgate.gateway.facilities import NewFacility
from pmsgate.gateway.vault import generate_key_spec
from pmsgate.sandbox.kross.seed import SANDBOX_PARTNER_API_KEY
from pmsgate.sandbox.kross.store import KrossStore

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


@dataclass
class Gateway:
    """One running gateway: its services, its app, and an HTTP client on it."""

    services: Services
    app: FastAPI
    http: httpx.AsyncClient

    async def tool(self, name: str, key: str, **arguments: Any) -> httpx.Response:
        """POST /v1/tools/{name} with a gateway key."""
        return await self.http.post(
            f"/v1/tools/{name}", json=arguments, headers={"Authorization": f"Bearer {key}"}
        )


@asynccontextmanager
async def running_gateway(
    settings: Settings, kross_http: httpx.AsyncClient, clock: ManualClock
) -> AsyncIterator[Gateway]:
    """Services, app (with its lifespan, for MCP) and a client, closed on exit."""
    async with open_services(settings, kross_http=kross_http, clock=clock) as services:
        app = create_app(settings, services=services)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://gateway.test"
            ) as http:
                yield Gateway(services, app, http)


async def add_seeded_facility(
    services: Services, store: KrossStore, index: int = 0, **overrides: Any
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
