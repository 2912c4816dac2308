"""Workspace configurations as a service (spec §2.4, §4.3 steps 3 and 5): values, conflicts, errors.

Every test runs on SQLite and, when PMSGATE_TEST_DATABASE_URL is set, on PostgreSQL.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import ManualClock
from pmsgate.customers.registry import Customers
from pmsgate.customers.workspaces import Workspaces
from pmsgate.errors import PmsgateError
from pmsgate.storage.models import WorkspaceConfiguration
from tests.support.db import store_as_is

from .records_support import add_customer, code_of

pytestmark = pytest.mark.anyio

ACME = {"workspace_name": "Acme", "workspace_slug": "acme", "plan_limit_usd": 100}


async def test_workspace_configuration_upsert_updates_in_place_and_keeps_the_workspace_id(
    sessions: async_sessionmaker[AsyncSession],
    customer: str,
    clock: ManualClock,
):
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
    assert await workspaces.by_slug(again.workspace_slug) == again
    assert len(await workspaces.all()) == 1


async def test_billing_mode_other_than_partner_markup_is_refused_by_repository_and_database(
    sessions: async_sessionmaker[AsyncSession], customer: str
):
    workspaces = Workspaces(sessions)

    with pytest.raises(PmsgateError) as excinfo:
        await workspaces.upsert(
            "stu-1001", **ACME, alert_threshold_pct=80, billing_mode="pass_through"
        )
    with pytest.raises(IntegrityError):
        await store_as_is(
            sessions,
            WorkspaceConfiguration,
            student_id="stu-1001",
            workspace_name="Acme",
            workspace_slug="acme",
            plan_limit_usd=Decimal(100),
            alert_threshold_pct=80,
            billing_mode="pass_through",
            notes="",
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
    customer: str,
    changes: dict[str, object],
    code: str,
):
    values: dict[str, object] = {**ACME, "alert_threshold_pct": 80, **changes}

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
