"""A gateway on the booking-system emulator with one of its seeded facilities registered."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from pydantic import SecretStr

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
