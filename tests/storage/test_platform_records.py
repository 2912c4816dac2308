"""The platform-side records (spec §2.4): migrations, repositories and their rules.

Every test runs on SQLite and, when PMSGATE_TEST_DATABASE_URL is set, on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import fields
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import anyio
import pytest
from sqlalchemy import inspect, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import ManualClock
from pmsgate.customers.allowlist import Allowlist
from pmsgate.customers.apartments import Apartments
from pmsgate.customers.pms_integrations import PmsIntegrations
from pmsgate.customers.registry import Customers
from pmsgate.customers.usage import UsageSnapshots
from pmsgate.customers.workspaces import Workspaces
from pmsgate.errors import PmsgateError
from pmsgate.gateway.vault import Vault, generate_key_spec
from pmsgate.storage.allowlist import AllowlistComment
from pmsgate.storage.customers import CustomerProfile
from pmsgate.storage.db import alembic_config, current_revision, open_database, session_factory
from pmsgate.storage.integrations import new_integration_id, token_context
from pmsgate.storage.models import (
    Apartment,
    Facility,
    PmsIntegration,
    WorkspaceConfiguration,
)

pytestmark = pytest.mark.anyio

PLATFORM_TABLES = {
    "customers",
    "workspace_configurations",
    "pms_integrations",
    "apartments",
    "usage_snapshots",
    "knowledge_allowlist",
}


@pytest.fixture
async def sessions(database_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    async with open_database(database_url) as engine:
        yield session_factory(engine)


@pytest.fixture
def customers(sessions: async_sessionmaker[AsyncSession], clock: ManualClock) -> Customers:
    return Customers(sessions, clock)


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
    async with sessions.begin() as session:
        session.add(
            Facility(
                hotel_id=hotel_id,
                username="api10001",
                kind="partner",
                password_enc="k1:x",
                integration_id=integration_id,
                created_at=when,
                updated_at=when,
            )
        )


def head_revision() -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def code_of(excinfo: pytest.ExceptionInfo[PmsgateError]) -> str:
    return excinfo.value.code


# --- migrations ---------------------------------------------------------------------------


async def test_migrations_at_head_create_every_platform_table(database_url: str):
    async with open_database(database_url) as engine:
        assert await current_revision(engine) == head_revision()
        async with engine.connect() as connection:
            tables = await connection.run_sync(lambda sync: set(inspect(sync).get_table_names()))
    assert tables >= PLATFORM_TABLES


async def test_platform_migration_downgrades_to_the_gateway_schema_and_upgrades_again(
    database_url: str,
):
    from alembic import command

    async with open_database(database_url) as engine:
        async with engine.begin() as connection:
            await connection.run_sync(lambda sync: command.downgrade(alembic_config(sync), "0001"))
        async with engine.connect() as connection:
            tables = await connection.run_sync(lambda sync: set(inspect(sync).get_table_names()))
        assert not tables & PLATFORM_TABLES
        assert "facilities" in tables
    async with open_database(database_url) as engine:
        assert await current_revision(engine) == head_revision()


# --- customers ----------------------------------------------------------------------------


async def test_a_customer_is_added_and_read_back_with_its_profile(
    customers: Customers,
):
    await add_customer(customers, email="Owner@Example.TEST", handles_upsell=True)

    customer = await customers.get("stu-1001")

    assert customer.email == "owner@example.test"
    assert customer.kind == "partner"
    assert customer.contract_price_id == "price_basic"
    assert customer.needs_payment_link_generator
    assert customer.subscription_status is None
    assert [c.student_id for c in await customers.all()] == ["stu-1001"]


async def test_a_second_customer_with_the_same_student_id_is_a_conflict(
    customers: Customers,
):
    await add_customer(customers)

    with pytest.raises(PmsgateError) as excinfo:
        await add_customer(customers, email="other@example.test")

    assert code_of(excinfo) == "customer_exists"
    assert excinfo.value.status == 409


async def test_upserting_a_customer_replaces_its_profile_and_keeps_its_subscription(
    customers: Customers, clock: ManualClock
):
    await add_customer(customers)
    await customers.set_subscription(
        "stu-1001", subscription_id="sub_1", status="active", price_id="price_basic"
    )
    clock.advance(60)

    updated = await customers.upsert(
        CustomerProfile(
            student_id="stu-1001",
            email="new@example.test",
            name="Renamed",
            kind="own",
            contract_price_id="price_basic",
            handles_late_check_in=True,
        )
    )

    assert (updated.name, updated.kind, updated.email) == ("Renamed", "own", "new@example.test")
    assert updated.subscription_status == "active"
    assert updated.needs_payment_link_generator
    assert updated.updated_at == clock.now()
    assert updated.created_at < updated.updated_at
    assert len(await customers.all()) == 1


async def test_an_active_subscription_counts_only_on_the_contract_price(
    customers: Customers,
):
    await add_customer(customers)

    on_other_price = await customers.set_subscription(
        "stu-1001", subscription_id="sub_1", status="active", price_id="price_other"
    )
    past_due = await customers.set_subscription(
        "stu-1001", subscription_id="sub_1", status="past_due", price_id="price_basic"
    )
    active = await customers.set_subscription(
        "stu-1001", subscription_id="sub_1", status="active", price_id="price_basic"
    )

    assert not on_other_price.subscription_active_on_contract_price
    assert not past_due.subscription_active_on_contract_price
    assert active.subscription_active_on_contract_price


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"kind": "reseller"}, "invalid_kind"),
        ({"email": "not-an-address"}, "invalid_email"),
        ({"student_id": "  "}, "invalid_student_id"),
        ({"name": "x" * 201}, "invalid_name"),
    ],
)
async def test_customer_input_is_refused_with_its_own_code_before_any_write(
    customers: Customers, changes: dict[str, Any], code: str
):
    with pytest.raises(PmsgateError) as excinfo:
        await add_customer(customers, **changes)

    assert code_of(excinfo) == code
    assert await customers.all() == []


async def test_an_unknown_customer_is_customer_not_found(customers: Customers):
    with pytest.raises(PmsgateError) as read:
        await customers.get("stu-missing")
    with pytest.raises(PmsgateError) as subscription:
        await customers.set_subscription(
            "stu-missing", subscription_id=None, status="canceled", price_id=None
        )

    assert code_of(read) == code_of(subscription) == "customer_not_found"
    assert read.value.status == 404


# --- workspace configuration --------------------------------------------------------------


async def test_workspace_configuration_upsert_updates_in_place_and_keeps_the_workspace_id(
    sessions: async_sessionmaker[AsyncSession],
    customers: Customers,
    clock: ManualClock,
):
    await add_customer(customers)
    workspaces = Workspaces(sessions, clock)
    created = await workspaces.upsert(
        "stu-1001",
        workspace_name="Acme Rentals",
        workspace_slug="acme-rentals",
        plan_limit_usd="150",
        alert_threshold_pct=80,
    )
    await workspaces.set_workspace_id("stu-1001", "ws_123")

    again = await workspaces.upsert(
        "stu-1001",
        workspace_name="Acme Rentals",
        workspace_slug="acme-rentals",
        plan_limit_usd=Decimal("199.90"),
        alert_threshold_pct=90,
        notes="raised after the first month",
    )

    assert created.workspace_id is None
    assert created.billing_mode == "partner_markup"
    assert again.workspace_id == "ws_123"
    assert again.plan_limit_usd == Decimal("199.90")
    assert (again.alert_threshold_pct, again.notes) == (90, "raised after the first month")
    assert await workspaces.by_workspace_id("ws_123") == again
    assert len(await workspaces.all()) == 1


async def test_billing_mode_other_than_partner_markup_is_refused_by_repository_and_database(
    sessions: async_sessionmaker[AsyncSession], customers: Customers
):
    await add_customer(customers)
    workspaces = Workspaces(sessions)

    with pytest.raises(PmsgateError) as excinfo:
        await workspaces.upsert(
            "stu-1001",
            workspace_name="Acme",
            workspace_slug="acme",
            plan_limit_usd=100,
            alert_threshold_pct=80,
            billing_mode="pass_through",
        )
    when = datetime(2026, 11, 22, tzinfo=UTC)
    with pytest.raises(IntegrityError):
        async with sessions.begin() as session:
            session.add(
                WorkspaceConfiguration(
                    student_id="stu-1001",
                    workspace_name="Acme",
                    workspace_slug="acme",
                    plan_limit_usd=Decimal(100),
                    alert_threshold_pct=80,
                    billing_mode="pass_through",
                    notes="",
                    created_at=when,
                    updated_at=when,
                )
            )

    assert code_of(excinfo) == "invalid_billing_mode"
    assert await workspaces.find("stu-1001") is None


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"plan_limit_usd": "-1"}, "invalid_plan_limit_usd"),
        ({"plan_limit_usd": "10.005"}, "invalid_plan_limit_usd"),
        ({"plan_limit_usd": "lots"}, "invalid_plan_limit_usd"),
        ({"alert_threshold_pct": 0}, "invalid_alert_threshold_pct"),
        ({"alert_threshold_pct": 101}, "invalid_alert_threshold_pct"),
        ({"workspace_slug": "Acme Rentals"}, "invalid_workspace_slug"),
    ],
)
async def test_workspace_configuration_values_are_checked(
    sessions: async_sessionmaker[AsyncSession],
    customers: Customers,
    changes: dict[str, object],
    code: str,
):
    await add_customer(customers)
    values: dict[str, object] = {
        "workspace_name": "Acme",
        "workspace_slug": "acme",
        "plan_limit_usd": 100,
        "alert_threshold_pct": 80,
    }
    values.update(changes)

    with pytest.raises(PmsgateError) as excinfo:
        await Workspaces(sessions).upsert("stu-1001", **values)

    assert code_of(excinfo) == code


async def test_a_workspace_slug_or_id_of_another_customer_is_a_conflict(
    sessions: async_sessionmaker[AsyncSession], customers: Customers
):
    await add_customer(customers, "stu-1")
    await add_customer(customers, "stu-2")
    workspaces = Workspaces(sessions)
    common = {"workspace_name": "Acme", "plan_limit_usd": 100, "alert_threshold_pct": 80}
    await workspaces.upsert("stu-1", workspace_slug="acme", workspace_id="ws_1", **common)
    await workspaces.upsert("stu-2", workspace_slug="acme-two", **common)

    with pytest.raises(PmsgateError) as slug:
        await workspaces.upsert("stu-2", workspace_slug="acme", **common)
    with pytest.raises(PmsgateError) as workspace_id:
        await workspaces.set_workspace_id("stu-2", "ws_1")

    assert code_of(slug) == "workspace_slug_taken"
    assert code_of(workspace_id) == "workspace_id_taken"
    assert (await workspaces.get("stu-2")).workspace_slug == "acme-two"


async def test_a_workspace_configuration_needs_a_registered_customer(
    sessions: async_sessionmaker[AsyncSession],
):
    workspaces = Workspaces(sessions)

    with pytest.raises(PmsgateError) as upsert:
        await workspaces.upsert(
            "stu-missing",
            workspace_name="Ghost",
            workspace_slug="ghost",
            plan_limit_usd=1,
            alert_threshold_pct=50,
        )
    with pytest.raises(PmsgateError) as set_id:
        await workspaces.set_workspace_id("stu-missing", "ws_9")

    assert code_of(upsert) == "customer_not_found"
    assert code_of(set_id) == "workspace_configuration_not_found"


# --- PMS integration rows -----------------------------------------------------------------


async def test_integration_rows_have_their_own_id_and_one_row_per_customer_and_provider(
    sessions: async_sessionmaker[AsyncSession], customers: Customers
):
    await add_customer(customers)
    integrations = PmsIntegrations(sessions)

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
    sessions: async_sessionmaker[AsyncSession], customers: Customers
):
    await add_customer(customers)
    when = datetime(2026, 11, 22, tzinfo=UTC)

    with pytest.raises(PmsgateError) as excinfo:
        await PmsIntegrations(sessions).add("stu-1001", "kross", integration_id="stu-1001")
    with pytest.raises(IntegrityError):
        async with sessions.begin() as session:
            session.add(
                PmsIntegration(
                    id="stu-1001",
                    student_id="stu-1001",
                    provider="kross",
                    status="connected",
                    status_changed_at=when,
                    created_at=when,
                    updated_at=when,
                )
            )

    assert code_of(excinfo) == "integration_id_is_student_id"


async def test_a_student_id_given_where_the_integration_row_id_belongs_is_named_as_such(
    sessions: async_sessionmaker[AsyncSession], customers: Customers
):
    await add_customer(customers)
    integrations = PmsIntegrations(sessions)
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
    customers: Customers,
    clock: ManualClock,
):
    await add_customer(customers)
    integrations = PmsIntegrations(sessions, clock)
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
    sessions: async_sessionmaker[AsyncSession], customers: Customers
):
    await add_customer(customers)
    integrations = PmsIntegrations(sessions)
    kross = await integrations.add("stu-1001", "kross")
    notes = await integrations.add("stu-1001", "notes")
    await add_facility(sessions, "1001", kross.id)
    await add_facility(sessions, "2002", "int-someone-else")

    linked = await integrations.link_facility(kross.id, "1001")
    with pytest.raises(PmsgateError) as foreign:
        await integrations.link_facility(kross.id, "2002")
    with pytest.raises(PmsgateError) as on_notes:
        await integrations.link_facility(notes.id, "1001")
    with pytest.raises(PmsgateError) as missing:
        await integrations.link_facility(kross.id, "9999")

    assert linked.facility_hotel_id == "1001"
    assert (await integrations.get(kross.id)).facility_hotel_id == "1001"
    assert code_of(foreign) == "facility_of_another_integration"
    assert code_of(on_notes) == "facility_on_notes_integration"
    assert code_of(missing) == "facility_not_found"


async def test_a_facility_registered_first_names_the_integration_row_id_to_create(
    sessions: async_sessionmaker[AsyncSession], customers: Customers
):
    await add_customer(customers)
    await add_facility(sessions, "1001", "int-1001")

    kross = await PmsIntegrations(sessions).add(
        "stu-1001", "kross", integration_id="int-1001", facility_hotel_id="1001"
    )

    assert (kross.id, kross.facility_hotel_id) == ("int-1001", "1001")


async def test_the_notes_token_is_stored_only_as_vault_ciphertext(
    sessions: async_sessionmaker[AsyncSession], customers: Customers
):
    await add_customer(customers)
    vault = Vault(generate_key_spec("k1"))
    integrations = PmsIntegrations(sessions)
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
            await session.execute(select(PmsIntegration).where(PmsIntegration.id == row_id))
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


async def test_notes_fields_stay_off_the_booking_system_row_in_repository_and_database(
    sessions: async_sessionmaker[AsyncSession], customers: Customers
):
    await add_customer(customers)
    await add_customer(customers, "stu-2")
    integrations = PmsIntegrations(sessions)
    kross = await integrations.add("stu-1001", "kross")
    when = datetime(2026, 11, 22, tzinfo=UTC)

    with pytest.raises(PmsgateError) as on_add:
        await integrations.add("stu-1001", "kross", apartments_database_id="db")
    with pytest.raises(PmsgateError) as on_update:
        await integrations.set_notes_connection(
            kross.id, notes_workspace_id="ws", apartments_database_id="db", token_enc=None
        )
    with pytest.raises(IntegrityError):
        async with sessions.begin() as session:
            session.add(
                PmsIntegration(
                    id="int-raw",
                    student_id="stu-2",
                    provider="kross",
                    status="connected",
                    apartments_database_id="db",
                    status_changed_at=when,
                    created_at=when,
                    updated_at=when,
                )
            )

    assert code_of(on_add) == "notes_fields_on_booking_system_row"
    assert code_of(on_update) == "not_a_notes_integration"


async def test_an_integration_row_needs_a_registered_customer(
    sessions: async_sessionmaker[AsyncSession],
):
    with pytest.raises(PmsgateError) as excinfo:
        await PmsIntegrations(sessions).add("stu-missing", "notes")

    assert code_of(excinfo) == "customer_not_found"


# --- apartment registry -------------------------------------------------------------------


async def test_a_row_created_by_the_listings_sync_is_completed_with_its_notes_page_in_place(
    sessions: async_sessionmaker[AsyncSession],
    customers: Customers,
    clock: ManualClock,
):
    await add_customer(customers)
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
    sessions: async_sessionmaker[AsyncSession], customers: Customers
):
    await add_customer(customers)
    registry = Apartments(sessions)
    await registry.upsert("stu-1001", "rt-101", assistant_listing_id="lst-9")

    await registry.update_notes_page("stu-1001", "rt-101", "page-abc")
    await registry.update_name("stu-1001", "rt-101", "Casa Blu")
    relisted = await registry.update_listing("stu-1001", "rt-101", "lst-10")
    with pytest.raises(PmsgateError) as missing:
        await registry.update_notes_page("stu-1001", "rt-999", "page-zzz")

    assert (relisted.assistant_listing_id, relisted.notes_page_id, relisted.name) == (
        "lst-10",
        "page-abc",
        "Casa Blu",
    )
    assert code_of(missing) == "apartment_not_found"
    assert await registry.count("stu-1001") == 1


async def test_a_listing_or_notes_page_maps_to_one_apartment_only(
    sessions: async_sessionmaker[AsyncSession], customers: Customers
):
    await add_customer(customers)
    registry = Apartments(sessions)
    await registry.upsert("stu-1001", "rt-101", assistant_listing_id="lst-1", notes_page_id="p-1")
    await registry.upsert("stu-1001", "rt-102")

    with pytest.raises(PmsgateError) as listing:
        await registry.upsert("stu-1001", "rt-102", assistant_listing_id="lst-1")
    with pytest.raises(PmsgateError) as page:
        await registry.update_notes_page("stu-1001", "rt-102", "p-1")
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
    when = datetime(2026, 11, 22, tzinfo=UTC)

    with pytest.raises(IntegrityError):
        async with sessions.begin() as session:
            session.add(
                Apartment(
                    student_id="stu-1",
                    pms_room_type_id="rt-101",
                    name="duplicate",
                    created_at=when,
                    updated_at=when,
                )
            )

    assert await registry.count("stu-1") == 3
    assert await registry.count("stu-2") == 1


async def test_concurrent_upserts_of_one_apartment_leave_one_complete_row(
    sessions: async_sessionmaker[AsyncSession], customers: Customers
):
    await add_customer(customers)
    registry = Apartments(sessions)

    async with anyio.create_task_group() as group:
        group.start_soon(lambda: registry.upsert("stu-1001", "rt-7", assistant_listing_id="l-7"))
        group.start_soon(lambda: registry.upsert("stu-1001", "rt-7", notes_page_id="p-7"))
        group.start_soon(lambda: registry.upsert("stu-1001", "rt-7", name="Attico"))

    (row,) = await registry.of_student("stu-1001")
    assert (row.assistant_listing_id, row.notes_page_id, row.name) == ("l-7", "p-7", "Attico")


async def test_registry_rows_are_removed_and_a_missing_one_is_not_found(
    sessions: async_sessionmaker[AsyncSession], customers: Customers
):
    await add_customer(customers)
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


# --- usage snapshots ----------------------------------------------------------------------


async def test_the_baseline_is_recorded_once_and_a_second_one_returns_the_first(
    sessions: async_sessionmaker[AsyncSession], customers: Customers
):
    await add_customer(customers)
    usage = UsageSnapshots(sessions)
    start = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)

    first, created = await usage.record(
        "stu-1001",
        kind="baseline",
        taken_at=start,
        usd_spent="1.25",
        messages=3,
        tool_calls=2,
        upstream_calls=1,
        workspace_id="ws_1",
    )
    second, created_again = await usage.record(
        "stu-1001",
        kind="baseline",
        taken_at=start + timedelta(days=1),
        usd_spent="9",
        messages=9,
        tool_calls=9,
        upstream_calls=9,
    )

    assert created and not created_again
    assert second == first
    assert await usage.baseline("stu-1001") == first
    assert first.usd_spent == Decimal("1.2500")


async def test_latest_is_the_newest_snapshot_and_the_baseline_stays_the_first(
    sessions: async_sessionmaker[AsyncSession], customers: Customers
):
    await add_customer(customers)
    usage = UsageSnapshots(sessions)
    start = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
    await usage.record(
        "stu-1001",
        kind="baseline",
        taken_at=start,
        usd_spent=0,
        messages=0,
        tool_calls=0,
        upstream_calls=0,
    )
    for tick in range(1, 4):
        await usage.record(
            "stu-1001",
            taken_at=start + timedelta(hours=6 * tick),
            usd_spent=Decimal("0.123456") * tick,
            messages=10 * tick,
            tool_calls=4 * tick,
            upstream_calls=2 * tick,
            details={"tick": tick},
        )

    latest = await usage.latest("stu-1001")
    baseline = await usage.baseline("stu-1001")
    window = await usage.series(
        "stu-1001", since=start + timedelta(hours=6), until=start + timedelta(hours=12)
    )

    assert latest is not None and baseline is not None
    assert latest.kind == "periodic"
    assert latest.taken_at == start + timedelta(hours=18)
    assert (latest.messages, latest.tool_calls, latest.upstream_calls) == (30, 12, 6)
    assert latest.usd_spent == Decimal("0.3704")
    assert latest.details == {"tick": 3}
    assert baseline.taken_at == start
    assert await usage.latest("stu-1001", kind="baseline") == baseline
    assert [snapshot.messages for snapshot in window] == [10, 20]
    assert len(await usage.series("stu-1001")) == 4
    assert await usage.latest("stu-nobody") is None


async def test_a_repeated_tick_does_not_duplicate_a_periodic_snapshot(
    sessions: async_sessionmaker[AsyncSession], customers: Customers
):
    await add_customer(customers)
    usage = UsageSnapshots(sessions)
    when = datetime(2026, 11, 22, 15, 0, tzinfo=UTC)
    values = {"usd_spent": "2", "messages": 5, "tool_calls": 1, "upstream_calls": 1}

    first, created = await usage.record("stu-1001", taken_at=when, **values)
    again, created_again = await usage.record("stu-1001", taken_at=when, **values)

    assert created and not created_again
    assert again == first
    assert len(await usage.series("stu-1001")) == 1


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"usd_spent": "-0.01"}, "invalid_usd_spent"),
        ({"messages": -1}, "invalid_messages"),
        ({"kind": "hourly"}, "invalid_kind"),
        ({"taken_at": datetime(2026, 11, 22, 9, 0)}, "invalid_taken_at"),
        ({"student_id": "stu-missing"}, "customer_not_found"),
    ],
)
async def test_a_usage_snapshot_is_checked_before_it_is_stored(
    sessions: async_sessionmaker[AsyncSession],
    customers: Customers,
    changes: dict[str, object],
    code: str,
):
    await add_customer(customers)
    values: dict[str, object] = {
        "student_id": "stu-1001",
        "taken_at": datetime(2026, 11, 22, 9, 0, tzinfo=UTC),
        "usd_spent": "1",
        "messages": 1,
        "tool_calls": 1,
        "upstream_calls": 1,
    }
    values.update(changes)

    with pytest.raises(PmsgateError) as excinfo:
        await UsageSnapshots(sessions).record(**values)

    assert code_of(excinfo) == code


# --- knowledge allowlist ------------------------------------------------------------------


async def test_allowlist_entries_take_effect_at_once_and_keep_their_comment(
    sessions: async_sessionmaker[AsyncSession], clock: ManualClock
):
    allowlist = Allowlist(sessions, clock)
    assert not await allowlist.is_allowed("owner@example.test")

    entry = await allowlist.add(
        "Owner@Example.TEST",
        AllowlistComment(
            contract="C-2026-01", workspace="acme-rentals", apartments=12, subscription="active"
        ),
    )

    assert await allowlist.is_allowed("OWNER@example.test")
    assert entry.email == "owner@example.test"
    assert entry.added_on == clock.now().date()
    assert entry.comment == (
        f"{clock.now().date().isoformat()} · contract C-2026-01 · workspace acme-rentals"
        " · 12 apartments · subscription active"
    )
    assert await allowlist.get("owner@example.test") == entry
    assert [e.email for e in await allowlist.all()] == ["owner@example.test"]

    await allowlist.remove("owner@EXAMPLE.test")

    assert not await allowlist.is_allowed("owner@example.test")
    assert await allowlist.all() == []


async def test_an_address_already_on_the_allowlist_is_a_conflict_whatever_its_case(
    sessions: async_sessionmaker[AsyncSession],
):
    allowlist = Allowlist(sessions)
    await allowlist.add("owner@example.test")

    with pytest.raises(PmsgateError) as excinfo:
        await allowlist.add("OWNER@example.test")

    assert code_of(excinfo) == "allowlist_entry_exists"
    assert excinfo.value.status == 409


async def test_put_admits_an_address_or_replaces_its_comment(
    sessions: async_sessionmaker[AsyncSession], clock: ManualClock
):
    allowlist = Allowlist(sessions, clock)
    first = await allowlist.put("owner@example.test", AllowlistComment(apartments=3))
    clock.advance(3600)

    second = await allowlist.put(
        "owner@example.test",
        AllowlistComment(added_on=date(2026, 12, 1), apartments=5, subscription="active"),
    )

    assert second.created_at == first.created_at
    assert (second.added_on, second.apartments, second.subscription) == (
        date(2026, 12, 1),
        5,
        "active",
    )
    assert len(await allowlist.all()) == 1


async def test_allowlist_errors_name_the_missing_entry_and_the_bad_address(
    sessions: async_sessionmaker[AsyncSession],
):
    allowlist = Allowlist(sessions)

    with pytest.raises(PmsgateError) as missing:
        await allowlist.remove("nobody@example.test")
    with pytest.raises(PmsgateError) as unreadable:
        await allowlist.get("nobody@example.test")
    with pytest.raises(PmsgateError) as invalid:
        await allowlist.add("not an address")

    assert code_of(missing) == code_of(unreadable) == "allowlist_entry_not_found"
    assert code_of(invalid) == "invalid_email"
