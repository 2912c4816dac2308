"""PMS integration rows as a service (spec §2.4, §3, §4.3 steps 4 and 17): ids, providers, status,
facility links, the notes token as ciphertext, and the database constraints behind them.

Every test runs on SQLite and, when PMSGATE_TEST_DATABASE_URL is set, on PostgreSQL.
"""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import ManualClock
from pmsgate.customers.integrations import CustomerIntegrations
from pmsgate.customers.registry import Customers
from pmsgate.errors import PmsgateError
from pmsgate.gateway.vault import Vault, generate_key_spec
from pmsgate.storage.integrations import new_integration_id, token_context
from pmsgate.storage.models import CustomerIntegration
from tests.support.db import store_as_is

from .records_support import add_customer, add_facility, code_of

pytestmark = pytest.mark.anyio

CONNECTED_KROSS_ROW = {"provider": "kross", "status": "connected"}


async def test_integration_rows_have_their_own_id_and_one_row_per_customer_and_provider(
    sessions: async_sessionmaker[AsyncSession], customer: str
):
    integrations = CustomerIntegrations(sessions)

    notes = await integrations.add("stu-1001", "notes")
    kross = await integrations.add("stu-1001", "kross")
    with pytest.raises(PmsgateError) as duplicate:
        await integrations.add("stu-1001", "kross")

    assert notes.id.startswith("int-") and kross.id.startswith("int-")
    assert len({notes.id, kross.id, "stu-1001"}) == 3
    assert (kross.provider, kross.status) == ("kross", "connected")
    assert code_of(duplicate) == "integration_exists"
    assert await integrations.for_student("stu-1001", "kross") == kross
    assert [row.provider for row in await integrations.of_student("stu-1001")] == [
        "kross",
        "notes",
    ]


async def test_an_integration_id_equal_to_the_student_id_is_refused_by_repository_and_database(
    sessions: async_sessionmaker[AsyncSession], customer: str
):
    when = datetime(2026, 11, 22, tzinfo=UTC)

    with pytest.raises(PmsgateError) as excinfo:
        await CustomerIntegrations(sessions).add("stu-1001", "kross", integration_id="stu-1001")
    with pytest.raises(IntegrityError):
        await store_as_is(
            sessions,
            CustomerIntegration,
            when=when,
            **{**CONNECTED_KROSS_ROW, "id": "stu-1001", "student_id": "stu-1001"},
            status_changed_at=when,
        )

    assert code_of(excinfo) == "integration_id_is_student_id"


async def test_a_student_id_given_where_the_integration_row_id_belongs_is_named_as_such(
    sessions: async_sessionmaker[AsyncSession], customer: str
):
    integrations = CustomerIntegrations(sessions)
    kross = await integrations.add("stu-1001", "kross")

    with pytest.raises(PmsgateError) as mistaken:
        await integrations.get("stu-1001")
    with pytest.raises(PmsgateError) as unknown:
        await integrations.get("int-unknown")

    assert code_of(mistaken) == "student_id_given_for_integration_id"
    assert kross.id in mistaken.value.message
    assert code_of(unknown) == "integration_not_found"
    assert await integrations.get(kross.id) == kross


async def test_integration_status_moves_to_error_with_its_reason_and_back_to_connected(
    sessions: async_sessionmaker[AsyncSession],
    customer: str,
    clock: ManualClock,
):
    integrations = CustomerIntegrations(sessions, clock)
    kross = await integrations.add("stu-1001", "kross")
    clock.advance(60)
    failed = await integrations.set_status(kross.id, "error", error="authentication failed")
    clock.advance(60)
    failed_again = await integrations.set_status(kross.id, "error", error="still failing")
    clock.advance(60)
    reconnected = await integrations.set_status(kross.id, "connected")

    assert (failed.status, failed.last_error) == ("error", "authentication failed")
    assert failed_again.status_changed_at == failed.status_changed_at
    assert failed_again.last_error == "still failing"
    assert (reconnected.status, reconnected.last_error) == ("connected", None)
    assert reconnected.status_changed_at == clock.now()
    assert [row.id for row in await integrations.all(status="error")] == []
    with pytest.raises(PmsgateError) as bad_status:
        await integrations.set_status(kross.id, "broken")
    assert code_of(bad_status) == "invalid_status"


async def test_the_booking_system_row_links_the_gateway_facility_registered_for_it(
    sessions: async_sessionmaker[AsyncSession], customer: str
):
    integrations = CustomerIntegrations(sessions)
    kross = await integrations.add("stu-1001", "kross")
    notes = await integrations.add("stu-1001", "notes")
    await add_facility(sessions, "1001", kross.id)
    await add_facility(sessions, "2002", "int-someone-else")

    linked = await integrations.link_facility(kross.id, "1001")
    with pytest.raises(PmsgateError) as foreign:
        await integrations.link_facility(kross.id, "2002")
    with pytest.raises(PmsgateError) as on_notion:
        await integrations.link_facility(notes.id, "1001")
    with pytest.raises(PmsgateError) as missing:
        await integrations.link_facility(kross.id, "9999")

    assert linked.facility_hotel_id == "1001"
    assert (await integrations.get(kross.id)).facility_hotel_id == "1001"
    assert code_of(foreign) == "facility_of_another_integration"
    assert code_of(on_notion) == "facility_on_notes_integration"
    assert code_of(missing) == "facility_not_found"


async def test_a_facility_registered_first_names_the_integration_row_id_to_create(
    sessions: async_sessionmaker[AsyncSession], customer: str
):
    await add_facility(sessions, "1001", "int-1001")

    kross = await CustomerIntegrations(sessions).add(
        "stu-1001", "kross", integration_id="int-1001", facility_hotel_id="1001"
    )

    assert (kross.id, kross.facility_hotel_id) == ("int-1001", "1001")


async def test_the_notion_token_is_stored_only_as_vault_ciphertext(
    sessions: async_sessionmaker[AsyncSession], customer: str
):
    vault = Vault(generate_key_spec("k1"))
    integrations = CustomerIntegrations(sessions)
    plaintext = "ntn_4f3b2a1c0d9e8f7a6b5c4d3e2f1a0b9c"
    row_id = new_integration_id()

    notes = await integrations.add(
        "stu-1001",
        "notes",
        integration_id=row_id,
        notes_workspace_id="notes-ws-1",
        apartments_database_id="db-apartments",
        token_enc=vault.encrypt(plaintext, context=token_context(row_id)),
    )
    async with sessions() as session:
        stored = (
            await session.execute(
                select(CustomerIntegration).where(CustomerIntegration.id == row_id)
            )
        ).scalar_one()

    assert notes.has_token
    assert [f.name for f in fields(notes) if "token" in f.name] == ["has_token"]
    assert plaintext not in (stored.token_enc or "")
    assert stored.token_enc is not None and stored.token_enc.startswith("k1:")
    ciphertext = await integrations.token_ciphertext(row_id)
    assert ciphertext is not None
    assert vault.decrypt(ciphertext, context=token_context(row_id)) == plaintext
    assert (notes.notes_workspace_id, notes.apartments_database_id) == (
        "notes-ws-1",
        "db-apartments",
    )


async def test_notion_fields_stay_off_the_booking_system_row_in_repository_and_database(
    sessions: async_sessionmaker[AsyncSession], customers: Customers
):
    await add_customer(customers)
    await add_customer(customers, "stu-2")
    integrations = CustomerIntegrations(sessions)
    kross = await integrations.add("stu-1001", "kross")
    when = datetime(2026, 11, 22, tzinfo=UTC)

    with pytest.raises(PmsgateError) as on_add:
        await integrations.add("stu-1001", "kross", apartments_database_id="db")
    with pytest.raises(PmsgateError) as on_update:
        await integrations.set_notion_connection(
            kross.id, notes_workspace_id="ws", apartments_database_id="db", token_enc=None
        )
    raw_row = {**CONNECTED_KROSS_ROW, "id": "int-raw", "student_id": "stu-2"}
    with pytest.raises(IntegrityError):
        await store_as_is(
            sessions,
            CustomerIntegration,
            when=when,
            **raw_row,
            apartments_database_id="db",
            status_changed_at=when,
        )

    assert code_of(on_add) == "notes_fields_on_booking_system_row"
    assert code_of(on_update) == "not_a_notes_integration"


async def test_an_integration_row_needs_a_registered_customer(
    sessions: async_sessionmaker[AsyncSession],
):
    with pytest.raises(PmsgateError) as excinfo:
        await CustomerIntegrations(sessions).add("stu-missing", "notes")

    assert code_of(excinfo) == "customer_not_found"
