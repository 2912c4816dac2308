"""The usage jobs against the emulators: snapshots every 6 hours, hourly gateway counts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import httpx
import pytest

from pmsgate.app import create_app
from pmsgate.customers.service import register_customer
from pmsgate.gateway.usage import UsageHistory
from pmsgate.jobs.usage import FLUSH_GATEWAY_USAGE, REFRESH_USAGE
from pmsgate.sandbox.assistant.seed import EXISTING_WORKSPACE_SLUG
from pmsgate.sandbox.assistant.store import USD_PER_MESSAGE, USD_PER_TOOL_RUN
from pmsgate.storage.customers import CustomerProfile
from pmsgate.storage.db import session_factory
from pmsgate.storage.gateway_usage import HourCounts, HourUsage
from tests.jobs.support import JobStack, add_a_customer_whose_workspace_is_gone, job_stack

pytestmark = pytest.mark.anyio

NINE = datetime(2026, 11, 22, 9, tzinfo=UTC)  # the ManualClock's start
USAGE_ROUTE = "GET /v1/workspaces/{workspace_id}/usage"


@pytest.fixture
async def stack(database_url: str) -> AsyncIterator[JobStack]:
    async with job_stack(database_url) as stack:
        yield stack


async def add_traffic(stack: JobStack, messages: int, tool_calls: int) -> None:
    workspace_id = await stack.workspace_id()
    await stack.sandbox_post(
        f"/assistant/_sandbox/workspaces/{workspace_id}/traffic",
        {"messages": messages, "tool_calls": tool_calls},
    )


def usage_reads(stack: JobStack) -> int:
    return int(stack.enrolled.sandbox.assistant.stats.requests_by_route[USAGE_ROUTE])


def kross_requests(stack: JobStack) -> int:
    return int(stack.enrolled.sandbox.kross.stats.as_dict()["requests"]["total"])


async def use_a_tool(stack: JobStack) -> None:
    facility = await stack.facility()
    await stack.gateway.tools.call(facility, "get-in-house-guests", {})


# --- the platform's usage read (assumed API) ----------------------------------------------------


async def test_the_assistant_reports_cumulative_usage_derived_from_its_traffic(
    stack: JobStack,
) -> None:
    workspace_id = await stack.workspace_id()
    assistant = stack.web.customers.assistant
    before = await assistant.workspace_usage(workspace_id)
    assert (before.messages, before.tool_calls, before.usd_spent) == (0, 0, Decimal(0))
    await add_traffic(stack, messages=3, tool_calls=5)
    after = await assistant.workspace_usage(workspace_id)
    assert after.workspace_id == workspace_id
    assert (after.messages, after.tool_calls) == (3, 5)
    assert after.usd_spent == 3 * USD_PER_MESSAGE + 5 * USD_PER_TOOL_RUN
    assert after.as_of == NINE


# --- refresh-usage --------------------------------------------------------------------------------


async def test_a_refresh_records_a_periodic_snapshot_with_the_assistant_numbers(
    stack: JobStack,
) -> None:
    await add_traffic(stack, messages=12, tool_calls=30)
    await use_a_tool(stack)
    await stack.run(FLUSH_GATEWAY_USAGE)
    upstream = await UsageHistory(stack.web.customers.sessions).total(stack.hotel_id)
    assert upstream.upstream_calls >= 2  # the token and the reservation list

    run = await stack.run(REFRESH_USAGE)

    assert run.status == "succeeded", run.detail
    assert run.detail is not None
    assert run.detail["recorded"] == [stack.student_id]
    assert run.detail["taken_at"] == "2026-11-22T06:00:00+00:00"
    [snapshot] = await stack.web.customers.usage.series(stack.student_id)
    assert snapshot.kind == "periodic"
    assert snapshot.taken_at == datetime(2026, 11, 22, 6, tzinfo=UTC)
    assert snapshot.workspace_id == await stack.workspace_id()
    assert snapshot.messages == 12
    assert snapshot.tool_calls == 30
    assert snapshot.usd_spent == Decimal("0.3900")  # 12 * 0.02 + 30 * 0.005
    assert snapshot.upstream_calls == upstream.upstream_calls
    assert snapshot.details is not None
    assert snapshot.details["hotel_id"] == stack.hotel_id
    assert snapshot.details["gateway_tool_calls"] == 1


async def test_a_second_tick_in_the_same_slot_adds_nothing_and_the_next_slot_adds_one(
    stack: JobStack,
) -> None:
    await add_traffic(stack, messages=1, tool_calls=0)
    await stack.run(REFRESH_USAGE)
    reads = usage_reads(stack)

    stack.clock.advance(2 * 3600)  # 11:00, still the 06:00 slot
    await add_traffic(stack, messages=5, tool_calls=0)
    again = await stack.run(REFRESH_USAGE)
    assert again.status == "succeeded"
    assert again.detail is not None
    assert again.detail["already_recorded"] == [stack.student_id]
    assert usage_reads(stack) == reads  # not even read: the slot is taken
    assert len(await stack.web.customers.usage.series(stack.student_id)) == 1

    stack.clock.advance(3600)  # 12:00, the next slot
    await stack.run(REFRESH_USAGE)
    snapshots = await stack.web.customers.usage.series(stack.student_id)
    assert [s.taken_at.hour for s in snapshots] == [6, 12]
    assert [s.messages for s in snapshots] == [1, 6]


async def test_a_snapshot_of_a_slot_begun_before_the_baseline_is_dated_at_the_baseline(
    stack: JobStack,
) -> None:
    usage = stack.web.customers.usage
    baseline_at = stack.clock.now()  # 09:00, inside the 06:00 slot
    await usage.record(
        stack.student_id,
        taken_at=baseline_at,
        usd_spent=0,
        messages=0,
        tool_calls=0,
        upstream_calls=0,
        kind="baseline",
    )
    stack.clock.advance(600)
    await add_traffic(stack, messages=2, tool_calls=0)
    await stack.run(REFRESH_USAGE)
    again = await stack.run(REFRESH_USAGE)

    snapshots = await usage.series(stack.student_id)
    assert [(s.kind, s.taken_at) for s in snapshots] == [
        ("baseline", baseline_at),
        ("periodic", baseline_at),
    ]
    assert again.detail is not None and again.detail["already_recorded"] == [stack.student_id]


async def test_one_customer_failing_does_not_stop_the_others_and_the_tick_fails(
    stack: JobStack,
) -> None:
    customers = stack.web.customers
    await add_a_customer_whose_workspace_is_gone(customers)
    await register_customer(
        customers, CustomerProfile("stu-001-new", "new@example.com", "No Workspace", "own")
    )

    run = await stack.run(REFRESH_USAGE)

    assert run.status == "failed"
    assert run.error_code == "job_partly_failed"
    assert run.detail is not None
    assert run.detail["recorded"] == [stack.student_id]
    assert run.detail["without_workspace"] == ["stu-001-new"]
    [failure] = run.detail["failed"]
    assert failure["student_id"] == "stu-000-gone"
    # On an assumed endpoint a 404 cannot tell a gone workspace from a missing endpoint.
    assert failure["code"] == "platform_endpoint_unavailable"
    assert len(await customers.usage.series(stack.student_id)) == 1
    assert await customers.usage.series("stu-000-gone") == []

    # Once its workspace is back, the next tick records it and reads nothing else again.
    existing = next(
        w for w in await customers.assistant.list_workspaces() if w.slug == EXISTING_WORKSPACE_SLUG
    )
    await customers.workspaces.set_workspace_id("stu-000-gone", existing.id)
    reads = usage_reads(stack)
    retried = await stack.run(REFRESH_USAGE)
    assert retried.status == "succeeded"
    assert retried.detail is not None
    assert retried.detail["recorded"] == ["stu-000-gone"]
    assert retried.detail["already_recorded"] == [stack.student_id]
    assert usage_reads(stack) == reads + 1


# --- flush-gateway-usage -------------------------------------------------------------------------


async def test_tool_calls_and_upstream_requests_reach_the_hourly_table_on_flush(
    stack: JobStack,
) -> None:
    sent_before = kross_requests(stack)
    await use_a_tool(stack)
    await use_a_tool(stack)  # from the cache: no upstream request
    pending = stack.gateway.usage.pending()
    counts = pending[(stack.hotel_id, NINE)]
    assert counts.tool_calls == 2
    # Every request the booking system received is counted, the token request included.
    assert counts.upstream_calls == kross_requests(stack) - sent_before >= 2

    run = await stack.run(FLUSH_GATEWAY_USAGE)

    assert run.status == "succeeded"
    assert run.detail == {
        "hours": 1,
        "tool_calls": 2,
        "upstream_calls": counts.upstream_calls,
        "keys_used": 0,  # tools called without a key here: no key use to write
        "calls_logged": 0,  # nor a logged call (the HTTP and MCP routes log them)
        "upstream_health": 1,  # the facility's latest successful booking-system request
    }
    assert stack.gateway.usage.pending() == {}
    hours = UsageHistory(session_factory(stack.gateway.engine))
    assert await hours.series(stack.hotel_id, NINE, NINE) == [
        HourUsage(hour=NINE, tool_calls=2, upstream_calls=counts.upstream_calls)
    ]
    # The limiter took as many permits as were counted.
    limits = (await stack.facility()).limits
    remaining = await stack.gateway.limiter.remaining(stack.hotel_id, limits)
    assert remaining["minute"] == limits.per_minute - counts.upstream_calls


async def test_a_tool_called_over_http_is_counted_for_its_facility(stack: JobStack) -> None:
    app = create_app(stack.gateway.settings, container=stack.enrolled.container)
    _, key = await stack.gateway.facilities.mint_key(stack.hotel_id, "test")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway.test") as http:
        answer = await http.post(
            "/v1/tools/get-in-house-guests", json={}, headers={"Authorization": f"Bearer {key}"}
        )
    assert answer.status_code == 200, answer.text
    counts = stack.gateway.usage.pending()[(stack.hotel_id, NINE)]
    assert counts.tool_calls == 1
    assert counts.upstream_calls >= 2
    assert stack.gateway.usage is stack.gateway.gateway.usage


async def test_a_failed_flush_puts_the_counts_back(stack: JobStack) -> None:
    await use_a_tool(stack)
    # A count the table refuses (CHECK tool_calls >= 0) makes the whole flush fail.
    stack.gateway.usage.restore({("refused", NINE): HourCounts(tool_calls=-1)})
    before = stack.gateway.usage.pending()

    run = await stack.run(FLUSH_GATEWAY_USAGE)

    assert run.status == "failed"
    assert stack.gateway.usage.pending() == before
    hours = UsageHistory(session_factory(stack.gateway.engine))
    assert (await hours.total(stack.hotel_id)).tool_calls == 0

    stack.gateway.usage.restore({("refused", NINE): HourCounts(tool_calls=1)})
    again = await stack.run(FLUSH_GATEWAY_USAGE)
    assert again.status == "succeeded"
    assert (await hours.total(stack.hotel_id)).tool_calls == 1


async def test_a_tick_an_hour_later_keeps_the_hours_apart(stack: JobStack) -> None:
    await use_a_tool(stack)
    stack.clock.advance(3600)
    await use_a_tool(stack)
    await stack.run(FLUSH_GATEWAY_USAGE)
    hours = UsageHistory(session_factory(stack.gateway.engine))
    series = await hours.series(stack.hotel_id, NINE, NINE + timedelta(hours=1))
    assert [point.tool_calls for point in series] == [1, 1]
