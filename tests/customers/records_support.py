"""Helpers of the service tests over the platform-side records: a registered customer, a
gateway facility, the code of a refused call."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.customers.registry import Customers
from pmsgate.errors import PmsgateError
from pmsgate.storage.customers import CustomerProfile
from pmsgate.storage.models import Facility
from tests.support.db import FACILITY_ROW, store_as_is


async def add_customer(
    customers: Customers, student_id: str = "stu-1001", **changes: object
) -> None:
    values: dict[str, object] = {
        "student_id": student_id,
        "email": f"{student_id}@example.test",
        "name": f"Customer {student_id}",
        "kind": "partner",
        "contract_ref": "C-2026-01",
        "contract_price_id": "price_basic",
    }
    values.update(changes)
    await customers.add(CustomerProfile(**values))


async def add_facility(
    sessions: async_sessionmaker[AsyncSession], hotel_id: str, integration_id: str
) -> None:
    when = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
    await store_as_is(
        sessions,
        Facility,
        when=when,
        **{**FACILITY_ROW, "hotel_id": hotel_id, "integration_id": integration_id},
    )


def code_of(excinfo: pytest.ExceptionInfo[PmsgateError]) -> str:
    return excinfo.value.code
