"""Fixtures of the service tests over the platform-side records: a migrated database, the
customer registry on it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import ManualClock
from pmsgate.customers.registry import Customers
from pmsgate.storage.db import open_database, session_factory


@pytest.fixture
async def sessions(database_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    async with open_database(database_url) as engine:
        yield session_factory(engine)


@pytest.fixture
def customers(sessions: async_sessionmaker[AsyncSession], clock: ManualClock) -> Customers:
    return Customers(sessions, clock)
