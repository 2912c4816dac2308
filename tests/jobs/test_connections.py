"""check-connections: a changed booking-system password shows as `error` without a guest asking."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from pmsgate.gateway.facilities import Limits
from pmsgate.jobs.connections import CHECK_CONNECTIONS
from tests.jobs.support import JobStack, job_stack

pytestmark = pytest.mark.anyio


@pytest.fixture
async def stack(database_url: str) -> AsyncIterator[JobStack]:
    async with job_stack(database_url) as stack:
        yield stack


def kross_requests(stack: JobStack) -> int:
    stats = stack.enrolled.sandbox.kross.stats.as_dict()
    return int(stats["requests"]["total"])


async def checked(stack: JobStack) -> dict[str, Any]:
    """Run check-connections once; it succeeds with a detail, which is returned."""
    run = await stack.run(CHECK_CONNECTIONS)
    assert run.status == "succeeded", run.detail
    assert run.detail is not None
    return run.detail


async def test_a_connected_facility_is_checked_with_one_read_and_stays_connected(
    stack: JobStack,
) -> None:
    detail = await checked(stack)
    assert detail["ok"] == [stack.hotel_id]
    assert (await stack.facility()).status == "connected"
    before = kross_requests(stack)
    await stack.run(CHECK_CONNECTIONS)
    assert kross_requests(stack) == before + 1  # the token is reused: one read per check


async def test_a_changed_password_puts_the_facility_and_the_customer_kross_row_in_error(
    stack: JobStack,
) -> None:
    await stack.run(CHECK_CONNECTIONS)  # a token is held from now on
    stack.enrolled.sandbox.kross.change_password(stack.hotel_id, "changed-by-the-customer-1")

    detail = await checked(stack)

    [found] = detail["now_in_error"]
    assert found["hotel_id"] == stack.hotel_id
    assert found["code"] == "pms_auth_failed"
    assert "changed-by-the-customer-1" not in str(detail)
    assert (await stack.facility()).status == "error"
    ctx = await stack.context()
    assert ctx.kross is not None
    assert ctx.kross.status == "error"


async def test_facilities_in_error_are_skipped_without_a_request(stack: JobStack) -> None:
    stack.enrolled.sandbox.kross.change_password(stack.hotel_id, "changed-by-the-customer-2")
    await stack.run(CHECK_CONNECTIONS)
    assert (await stack.facility()).status == "error"
    before = kross_requests(stack)

    run = await stack.run(CHECK_CONNECTIONS)

    assert run.detail is not None
    assert run.detail["skipped"] == [stack.hotel_id]
    assert kross_requests(stack) == before


async def test_the_check_uses_the_background_share_and_is_deferred_when_it_is_spent(
    stack: JobStack,
) -> None:
    # One call a minute: background work (half of each window) gets none of it.
    await stack.gateway.facilities.set_limits(
        stack.hotel_id, Limits(per_minute=1, per_hour=300, per_day=5000)
    )
    detail = await checked(stack)
    [deferred] = detail["deferred"]
    assert deferred["hotel_id"] == stack.hotel_id
    assert deferred["code"] == "upstream_budget_exhausted"
    assert (await stack.facility()).status == "connected"
