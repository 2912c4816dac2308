"""restart-listings-syncs: the sync a reconnect asks for runs, and is retried on failure."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from pmsgate.jobs.listings import RESTART_LISTINGS_SYNCS
from pmsgate.storage.integrations import IntegrationView
from tests.jobs.support import JobStack, job_stack

pytestmark = pytest.mark.anyio


@pytest.fixture
async def stack(database_url: str) -> AsyncIterator[JobStack]:
    # An empty registry: only a listings sync fills it.
    async with job_stack(database_url, sync=False) as stack:
        yield stack


async def kross_row(stack: JobStack) -> IntegrationView:
    ctx = await stack.context()
    assert ctx.kross is not None
    return ctx.kross


async def test_a_due_listings_sync_runs_and_its_mark_is_cleared(stack: JobStack) -> None:
    row = await kross_row(stack)
    await stack.web.customers.integrations.mark_listings_sync_due(row.id, stack.clock.now())
    assert (await kross_row(stack)).listings_sync_due_at == stack.clock.now()

    run = await stack.run(RESTART_LISTINGS_SYNCS)

    assert run.status == "succeeded", run.detail
    assert run.detail is not None
    [synced] = run.detail["synced"]
    assert synced["student_id"] == stack.student_id
    assert synced["created"] == len(stack.enrolled.room_type_ids)
    assert (await kross_row(stack)).listings_sync_due_at is None
    ctx = await stack.context()
    assert sorted(a.pms_room_type_id for a in ctx.apartments) == stack.enrolled.room_type_ids
    assert all(a.assistant_listing_id is not None for a in ctx.apartments)

    again = await stack.run(RESTART_LISTINGS_SYNCS)
    assert again.detail is not None
    assert again.detail["synced"] == []


async def test_a_assistant_failure_keeps_the_mark_and_the_next_tick_syncs(stack: JobStack) -> None:
    row = await kross_row(stack)
    due = stack.clock.now()
    await stack.web.customers.integrations.mark_listings_sync_due(row.id, due)
    # Every attempt of the listings read (the client retries a GET four times) answers 503.
    await stack.sandbox_post("/assistant/_sandbox/faults", {"fail_next": 4, "fail_status": 503})

    run = await stack.run(RESTART_LISTINGS_SYNCS)

    assert run.status == "failed"
    assert run.error_code == "job_partly_failed"
    assert run.detail is not None
    [failure] = run.detail["failed"]
    assert failure["student_id"] == stack.student_id
    assert failure["code"] == "platform_unavailable"
    assert (await kross_row(stack)).listings_sync_due_at == due
    assert (await stack.context()).apartments == []

    stack.clock.advance(60)
    retried = await stack.run(RESTART_LISTINGS_SYNCS)
    assert retried.status == "succeeded", retried.detail
    assert (await kross_row(stack)).listings_sync_due_at is None
    assert len((await stack.context()).apartments) == len(stack.enrolled.room_type_ids)


async def test_a_sync_not_due_yet_waits(stack: JobStack) -> None:
    row = await kross_row(stack)
    later = stack.clock.now() + timedelta(minutes=5)
    await stack.web.customers.integrations.mark_listings_sync_due(row.id, later)
    run = await stack.run(RESTART_LISTINGS_SYNCS)
    assert run.detail is not None
    assert run.detail["synced"] == []
    assert (await kross_row(stack)).listings_sync_due_at == later


async def test_a_row_in_error_keeps_its_mark_until_the_booking_system_accepts_it_again(
    stack: JobStack,
) -> None:
    await stack.enrolled.break_kross()
    row = await kross_row(stack)
    due = stack.clock.now()
    await stack.web.customers.integrations.mark_listings_sync_due(row.id, due)

    run = await stack.run(RESTART_LISTINGS_SYNCS)

    assert run.status == "succeeded"
    assert run.detail is not None
    assert run.detail["waiting_for_pms"] == [stack.student_id]
    assert (await kross_row(stack)).listings_sync_due_at == due
    await stack.enrolled.restore_kross()
    await stack.run(RESTART_LISTINGS_SYNCS)
    assert (await kross_row(stack)).listings_sync_due_at is None


async def test_a_sync_claimed_by_another_replica_is_left_to_it(stack: JobStack) -> None:
    integrations = stack.web.customers.integrations
    row = await kross_row(stack)
    due = stack.clock.now()
    await integrations.mark_listings_sync_due(row.id, due)
    # Another replica claims it first (its lease moves the due time ahead)...
    lease = due + timedelta(minutes=10)
    assert await integrations.reschedule_listings_sync(row.id, expected=due, when=lease)
    # ...so a claim on the old due time fails, and this replica leaves it alone.
    assert not await integrations.reschedule_listings_sync(row.id, expected=due, when=lease)
    run = await stack.run(RESTART_LISTINGS_SYNCS)
    assert run.detail is not None
    assert run.detail["synced"] == []
    # A replica that died mid-sync: the row is due again once the lease ends.
    stack.clock.advance(11 * 60)
    again = await stack.run(RESTART_LISTINGS_SYNCS)
    assert again.detail is not None
    assert [s["student_id"] for s in again.detail["synced"]] == [stack.student_id]


async def test_only_the_booking_system_row_has_a_listings_sync(stack: JobStack) -> None:
    ctx = await stack.context()
    assert ctx.notes is not None
    with pytest.raises(Exception) as raised:
        await stack.web.customers.integrations.mark_listings_sync_due(
            ctx.notes.id, stack.clock.now()
        )
    assert getattr(raised.value, "code", None) == "not_a_booking_system_integration"
