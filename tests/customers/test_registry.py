"""Customers as a service (spec §2.4, §4.3 step 1): profiles, subscriptions, their checks
and errors.

Every test runs on SQLite and, when PMSGATE_TEST_DATABASE_URL is set, on PostgreSQL.
"""

from __future__ import annotations

from typing import Any

import pytest

from pmsgate.clock import ManualClock
from pmsgate.customers.registry import Customers
from pmsgate.errors import PmsgateError
from pmsgate.storage.customers import CustomerProfile

from .records_support import add_customer, code_of

pytestmark = pytest.mark.anyio


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
