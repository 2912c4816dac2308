"""Fixtures of the service tests over the platform-side records: a migrated database, the
customer registry on it."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import ManualClock
from pmsgate.customers.registry import Customers

from .records_support import add_customer


@pytest.fixture
def customers(sessions: async_sessionmaker[AsyncSession], clock: ManualClock) -> Customers:
    return Customers(sessions, clock)


@pytest.fixture
async def customer(customers: Customers) -> str:
    """The registered customer ``stu-1001`` (see :func:`records_support.add_customer`)."""
    await add_customer(customers)
    return "stu-1001"
