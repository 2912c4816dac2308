"""The apartment registry as a service (spec §2.4, §4.3 step 11): upserts, updates and
per-customer keys.

Every test runs on SQLite and, when PMSGATE_TEST_DATABASE_URL is set, on PostgreSQL.
"""

from __future__ import annotations

import anyio
import pytest
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import ManualClock
from pmsgate.customers.apartments import Apartments
from pmsgate.customers.registry import Customers
from pmsgate.errors import PmsgateError
from pmsgate.storage.models import Apartment
from tests.support.db import store_as_is

from .records_support import add_customer, code_of

pytestmark = pytest.mark.anyio


async def test_a_row_created_by_the_listings_sync_is_completed_with_its_notion_page_in_place(
    sessions: async_sessionmaker[AsyncSession],
    customer: str,
    clock: ManualClock,
):
    registry = Apartments(sessions, clock)
    # The automatic listings sync knows only the listing and the room type it mirrors.
    synced, synced_created = await registry.upsert(
        "stu-1001", "rt-101", assistant_listing_id="lst-9"
    )
    clock.advance(60)

    # Onboarding step 11 later attaches the notes page and a name to the same apartment.
    completed, completed_created = await registry.upsert(
        "stu-1001", "rt-101", notes_page_id="page-abc", name="Casa Blu"
    )

    assert synced_created and not completed_created
    assert completed.id == synced.id
    assert completed.assistant_listing_id == "lst-9"
    assert (completed.notes_page_id, completed.name) == ("page-abc", "Casa Blu")
    assert completed.created_at == synced.created_at
    assert completed.updated_at == clock.now()
    assert await registry.count("stu-1001") == 1
    assert await registry.by_listing("stu-1001", "lst-9") == completed
    assert await registry.by_notes_page("stu-1001", "page-abc") == completed


async def test_separate_updates_complete_an_existing_row_and_never_create_one(
    sessions: async_sessionmaker[AsyncSession], customer: str
):
    registry = Apartments(sessions)
    await registry.upsert("stu-1001", "rt-101", assistant_listing_id="lst-9")

    await registry.update_notion_page("stu-1001", "rt-101", "page-abc")
    await registry.update_name("stu-1001", "rt-101", "Casa Blu")
    relisted = await registry.update_listing("stu-1001", "rt-101", "lst-10")
    with pytest.raises(PmsgateError) as missing:
        await registry.update_notion_page("stu-1001", "rt-999", "page-zzz")

    assert (relisted.assistant_listing_id, relisted.notes_page_id, relisted.name) == (
        "lst-10",
        "page-abc",
        "Casa Blu",
    )
    assert code_of(missing) == "apartment_not_found"
    assert await registry.count("stu-1001") == 1


async def test_a_listing_or_notion_page_maps_to_one_apartment_only(
    sessions: async_sessionmaker[AsyncSession], customer: str
):
    registry = Apartments(sessions)
    await registry.upsert("stu-1001", "rt-101", assistant_listing_id="lst-1", notes_page_id="p-1")
    await registry.upsert("stu-1001", "rt-102")

    with pytest.raises(PmsgateError) as listing:
        await registry.upsert("stu-1001", "rt-102", assistant_listing_id="lst-1")
    with pytest.raises(PmsgateError) as page:
        await registry.update_notion_page("stu-1001", "rt-102", "p-1")
    # Detaching first, then attaching, moves the listing without a conflict.
    await registry.update_listing("stu-1001", "rt-101", None)
    moved = await registry.update_listing("stu-1001", "rt-102", "lst-1")

    assert code_of(listing) == "listing_already_mapped"
    assert code_of(page) == "notes_page_already_mapped"
    assert moved.assistant_listing_id == "lst-1"
    assert (await registry.get("stu-1001", "rt-101")).assistant_listing_id is None


async def test_the_registry_unique_keys_are_database_constraints_scoped_to_the_customer(
    sessions: async_sessionmaker[AsyncSession], customers: Customers
):
    await add_customer(customers, "stu-1")
    await add_customer(customers, "stu-2")
    registry = Apartments(sessions)
    await registry.upsert("stu-1", "rt-101", assistant_listing_id="lst-1", notes_page_id="p-1")
    # Another customer may use the same ids: every key is per customer.
    await registry.upsert("stu-2", "rt-101", assistant_listing_id="lst-1", notes_page_id="p-1")
    # Rows without listing or page never collide (NULLs are distinct on both backends).
    await registry.upsert("stu-1", "rt-102")
    await registry.upsert("stu-1", "rt-103")
    with pytest.raises(IntegrityError):
        await store_as_is(
            sessions,
            Apartment,
            student_id="stu-1",
            pms_room_type_id="rt-101",
            name="duplicate",
        )

    assert await registry.count("stu-1") == 3
    assert await registry.count("stu-2") == 1


async def test_concurrent_upserts_of_one_apartment_leave_one_complete_row(
    sessions: async_sessionmaker[AsyncSession], customer: str
):
    registry = Apartments(sessions)

    async with anyio.create_task_group() as group:
        group.start_soon(lambda: registry.upsert("stu-1001", "rt-7", assistant_listing_id="l-7"))
        group.start_soon(lambda: registry.upsert("stu-1001", "rt-7", notes_page_id="p-7"))
        group.start_soon(lambda: registry.upsert("stu-1001", "rt-7", name="Attico"))

    (row,) = await registry.of_student("stu-1001")
    assert (row.assistant_listing_id, row.notes_page_id, row.name) == ("l-7", "p-7", "Attico")


async def test_registry_rows_are_removed_and_a_missing_one_is_not_found(
    sessions: async_sessionmaker[AsyncSession], customer: str
):
    registry = Apartments(sessions)
    await registry.upsert("stu-1001", "rt-101")

    await registry.remove("stu-1001", "rt-101")
    with pytest.raises(PmsgateError) as again:
        await registry.remove("stu-1001", "rt-101")
    with pytest.raises(PmsgateError) as unknown_customer:
        await registry.upsert("stu-missing", "rt-1")

    assert await registry.find("stu-1001", "rt-101") is None
    assert code_of(again) == "apartment_not_found"
    assert code_of(unknown_customer) == "customer_not_found"
