"""The gateway tests' whole gateway, for the modules that do not set up their own."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from pmsgate.clock import ManualClock
from tests.e2e.conftest import Gateway, gateway_settings, running_gateway


@pytest.fixture
async def gateway(
    sqlite_url: str, kross_http: httpx.AsyncClient, clock: ManualClock
) -> AsyncIterator[Gateway]:
    """A whole gateway (services, app in its lifespan, a client) on SQLite and the emulator.

    Modules with another set-up (more settings, PostgreSQL too) define their own ``gateway``.
    """
    async with running_gateway(gateway_settings(sqlite_url), kross_http, clock) as running:
        yield running
