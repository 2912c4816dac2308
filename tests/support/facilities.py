"""A gateway on the booking-system emulator with one of its seeded facilities registered."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from fastapi import FastAPI
from pydantic import SecretStr

from pmsgate.app import create_app
from pmsgate.clock import ManualClock
from pmsgate.config import Settings
from pmsgate.container import Container, open_container
from pmsgate.gateway.vault import generate_key_spec
from pmsgate.sandbox.kross.seed import SANDBOX_PARTNER_API_KEY
from pmsgate.sandbox.kross.store import KrossStore
from tests.gateway.facility_support import new_facility_from_seed


def emulator_settings(
    database_url: str, kross_http: httpx.AsyncClient, **overrides: Any
) -> Settings:
    """Settings of a gateway on the emulator behind ``kross_http``: the partner key, one
    vault key, no wait for a rate-limit permit; ``overrides`` replace or add settings."""
    values: dict[str, Any] = {
        "database_url": database_url,
        "kross_base_url": str(kross_http.base_url),
        "partner_api_key": SecretStr(SANDBOX_PARTNER_API_KEY),
        "secret_keys": SecretStr(generate_key_spec("t1")),
        "limiter_wait_s": 0.0,
        **overrides,
    }
    return Settings(**values)


@asynccontextmanager
async def container_with_facility(
    settings: Settings,
    kross_http: httpx.AsyncClient,
    kross_store: KrossStore,
    clock: ManualClock,
    *,
    index: int = 0,
) -> AsyncIterator[tuple[Container, dict[str, Any]]]:
    """The container of ``settings`` with the emulator's facility ``index`` registered (its
    first key: tools:read); the container and the facility's sandbox record."""
    async with open_container(settings, kross_http=kross_http, clock=clock) as container:
        record = kross_store.facility_summaries()[index]
        await container.gateway.facilities.add(new_facility_from_seed(record))
        yield container, record


@dataclass
class ServedGateway:
    """The app on a container over the emulator, and one of the emulator's facilities."""

    app: FastAPI
    container: Container
    store: KrossStore  # the emulator's
    record: dict[str, Any]  # the facility's sandbox record
    first_key: str | None  # its first gateway key (None: the facility is not registered)

    @property
    def hotel_id(self) -> str:
        """The facility's hotel_id."""
        return str(self.record["hotel_id"])


@asynccontextmanager
async def served_gateway(
    settings: Settings,
    kross_http: httpx.AsyncClient,
    kross_store: KrossStore,
    clock: ManualClock,
    *,
    register: bool = True,
    scopes: list[str] | None = None,
    view: type[ServedGateway] = ServedGateway,
) -> AsyncIterator[Any]:
    """The app of ``settings`` (inside its lifespan) on the emulator, with the emulator's
    first facility registered (its first key: ``scopes``, tools:read by default) unless
    ``register`` is false; as a ``view`` (a subclass adds what a module's tests use)."""
    async with open_container(settings, kross_http=kross_http, clock=clock) as container:
        record = kross_store.facility_summaries()[0]
        key = None
        if register:
            _, key = await container.gateway.facilities.add(new_facility_from_seed(record, scopes))
        app = create_app(settings, container=container)
        async with app.router.lifespan_context(app):
            yield view(app, container, kross_store, record, key)
