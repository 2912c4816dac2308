"""Enrolment operations and the registry's listings sync, against the emulators."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import SecretStr

from pmsgate.customers.service import (
    Subscription,
    configure_workspace,
    connect_notion,
    link_kross,
    register_customer,
    set_kross_status,
    sync_registry,
)
from pmsgate.errors import PmsgateError
from pmsgate.storage.apartments import ApartmentView
from pmsgate.storage.customers import CustomerProfile
from pmsgate.storage.integrations import new_integration_id
from tests.gateway.facility_support import new_facility_from_seed

from ..gateway.facility_support import all_stored_text
from .support import EnrolledSandbox, enrolled_sandbox, profile_of

pytestmark = pytest.mark.anyio


def by_room_type(rows: list[ApartmentView]) -> dict[str, ApartmentView]:
    return {row.pms_room_type_id: row for row in rows}


def listings_by_room_type(box: EnrolledSandbox, workspace_id: str) -> dict[str, Any]:
    return {str(li.id_room_type): li for li in box.sandbox.assistant.listings(workspace_id)}


# --- the registry ------------------------------------------------------------------------------


async def test_the_sync_creates_one_row_per_apartment_with_listing_page_and_name(
    database_url: str,
) -> None:
    async with enrolled_sandbox(database_url, sync=False) as box:
        result = await box.sync()
        ctx = await box.context()
        assert ctx.workspace_id is not None
        listings = listings_by_room_type(box, ctx.workspace_id)

    pages = {str(p["pms_room_type_id"]): p for p in box.notes_pages}
    assert result.listings == len(box.room_type_ids)
    assert result.notes_pages == len(box.notes_pages)
    assert (result.apartments, result.created, result.updated, result.unchanged) == (
        len(box.room_type_ids),
        len(box.room_type_ids),
        0,
        0,
    )
    assert (result.without_listing, result.without_notes_page) == (0, 0)
    rows = by_room_type(ctx.apartments)
    assert sorted(rows) == box.room_type_ids == sorted(listings) == sorted(pages)
    for room_type, row in rows.items():
        assert row.assistant_listing_id == listings[room_type].id
        assert row.notes_page_id == pages[room_type]["page_id"]
        assert row.name == listings[room_type].name


async def test_a_second_sync_changes_nothing(database_url: str) -> None:
    async with enrolled_sandbox(database_url) as box:
        before = (await box.context()).apartments
        box.clock.advance(3600)
        again = await box.sync()
        after = (await box.context()).apartments

    assert (again.created, again.updated, again.unchanged) == (0, 0, len(before))
    assert again.changed == 0
    # Not even updated_at moved: nothing was written.
    assert after == before


async def test_a_row_made_by_the_listings_sync_is_completed_in_place_with_the_notion_page(
    database_url: str,
) -> None:
    async with enrolled_sandbox(database_url, with_notion=False) as box:
        first = box.last_sync
        assert first is not None and first.notes_pages is None
        listed = by_room_type((await box.context()).apartments)
        assert all(row.notes_page_id is None for row in listed.values())
        assert all(row.assistant_listing_id is not None for row in listed.values())

        truth = box.notion_ground_truth
        await connect_notion(
            box.services, box.student_id, SecretStr(truth["token"]), truth["database_id"]
        )
        completed = await box.sync()
        rows = by_room_type((await box.context()).apartments)

    assert (completed.created, completed.updated) == (0, len(listed))
    assert sorted(rows) == sorted(listed)
    pages = {str(p["pms_room_type_id"]): p["page_id"] for p in box.notes_pages}
    for room_type, row in rows.items():
        assert row.id == listed[room_type].id  # the same row, not a new one
        assert row.assistant_listing_id == listed[room_type].assistant_listing_id
        assert row.notes_page_id == pages[room_type]


async def test_with_the_integration_in_error_there_are_no_listings_and_rows_stay_unresolved(
    database_url: str,
) -> None:
    async with enrolled_sandbox(database_url) as box:
        resolved = by_room_type((await box.context()).apartments)
        row = await box.break_kross()
        assert row.status == "error" and row.last_error
        broken = await box.sync()
        ctx = await box.context()
        assert not ctx.kross_connected
        unresolved = by_room_type(ctx.apartments)

        await box.restore_kross()
        restored = await box.sync()
        back = by_room_type((await box.context()).apartments)

    count = len(resolved)
    assert broken.listings == 0
    assert (broken.apartments, broken.created, broken.without_listing) == (count, 0, count)
    assert sorted(unresolved) == sorted(resolved)
    for room_type, kept in unresolved.items():
        assert kept.id == resolved[room_type].id
        assert kept.assistant_listing_id is None
        assert kept.notes_page_id == resolved[room_type].notes_page_id
        assert kept.name == resolved[room_type].name
    # Listing ids are stable across the failure: the same ones come back.
    assert (restored.listings, restored.created, restored.without_listing) == (count, 0, 0)
    assert {k: v.assistant_listing_id for k, v in back.items()} == {
        k: v.assistant_listing_id for k, v in resolved.items()
    }


async def test_a_new_customer_whose_integration_is_in_error_gets_rows_from_the_notion_pages(
    database_url: str,
) -> None:
    async with enrolled_sandbox(database_url, sync=False) as box:
        await box.break_kross()
        result = await box.sync()
        rows = by_room_type((await box.context()).apartments)

    titles = {str(p["pms_room_type_id"]): p["title"] for p in box.notes_pages}
    assert result.listings == 0
    assert result.created == len(box.notes_pages) == result.without_listing
    assert {k: v.name for k, v in rows.items()} == titles


async def test_the_sync_needs_the_workspace(database_url: str) -> None:
    async with enrolled_sandbox(database_url, sync=False) as box:
        await register_customer(
            box.services,
            CustomerProfile(
                student_id="stu-no-workspace", email="nows@example.com", name="No WS", kind="own"
            ),
        )
        with pytest.raises(PmsgateError) as caught:
            await sync_registry(box.services, "stu-no-workspace")
    assert caught.value.code == "workspace_not_created"


# --- notes -------------------------------------------------------------------------------------


async def test_connect_notion_with_a_wrong_token_is_refused_and_nothing_is_stored(
    database_url: str,
) -> None:
    wrong = "ntn_" + "x" * 46
    async with enrolled_sandbox(database_url, with_notion=False, sync=False) as box:
        with pytest.raises(PmsgateError) as caught:
            await connect_notion(
                box.services,
                box.student_id,
                SecretStr(wrong),
                box.notion_ground_truth["database_id"],
            )
        ctx = await box.context()
    assert caught.value.code == "notes_token_refused"
    assert "nothing was stored" in caught.value.hint
    assert wrong not in str(caught.value) + caught.value.hint
    assert ctx.notes is None
    assert wrong not in await all_stored_text(database_url)


async def test_connect_notion_with_a_database_the_token_cannot_read_is_refused(
    database_url: str,
) -> None:
    async with enrolled_sandbox(database_url, with_notion=False, sync=False) as box:
        others = next(
            w
            for w in box.sandbox.notion.workspaces()
            if w["workspace_id"] != box.notion_ground_truth["workspace_id"]
        )
        with pytest.raises(PmsgateError) as caught:
            await connect_notion(
                box.services,
                box.student_id,
                SecretStr(box.notion_ground_truth["token"]),
                others["database_id"],
            )
        assert (await box.context()).notes is None
    assert caught.value.code == "notes_database_not_found"


async def test_connecting_the_same_notion_again_writes_nothing(database_url: str) -> None:
    async with enrolled_sandbox(database_url, sync=False) as box:
        first = (await box.context()).notes
        assert first is not None
        box.clock.advance(60)
        truth = box.notion_ground_truth
        again = await connect_notion(
            box.services, box.student_id, SecretStr(truth["token"]), truth["database_id"]
        )
        ctx = await box.context()
    assert not again.created
    assert again.apartment_pages == len(box.notes_pages)
    assert ctx.notes == first  # not even updated_at moved


async def test_connecting_another_notion_workspace_replaces_token_and_database_in_place(
    database_url: str,
) -> None:
    async with enrolled_sandbox(database_url, sync=False) as box:
        first = (await box.context()).notes
        assert first is not None
        other = next(
            w
            for w in box.sandbox.notion.workspaces()
            if w["workspace_id"] != box.notion_ground_truth["workspace_id"]
        )
        again = await connect_notion(
            box.services, box.student_id, SecretStr(other["token"]), other["database_id"]
        )
        ctx = await box.context()
        token = await box.services.notion_token(first.id)
    assert not again.created and again.apartment_pages == len(other["pages"])
    assert ctx.notes is not None and ctx.notes.id == first.id
    assert ctx.notes.apartments_database_id == other["database_id"]
    assert token.get_secret_value() == other["token"]


async def test_a_revoked_notion_token_fails_the_sync_and_puts_the_notion_row_in_error(
    database_url: str,
) -> None:
    async with enrolled_sandbox(database_url) as box:
        before = (await box.context()).apartments
        # The emulator has no revoke control: forgetting the token is what revoking does.
        box.sandbox.notion._by_token.pop(box.notion_ground_truth["token"])
        with pytest.raises(PmsgateError) as caught:
            await box.sync()
        ctx = await box.context()
    assert caught.value.code == "notes_unauthorized"
    assert "Reconnect" in caught.value.hint
    assert box.notion_ground_truth["token"] not in str(caught.value)
    assert ctx.notes is not None and ctx.notes.status == "error" and not ctx.notes_connected
    assert ctx.apartments == before


# --- the booking-system row --------------------------------------------------------------------


async def test_link_kross_before_the_facility_exists_creates_an_unlinked_row_then_links_it(
    database_url: str,
) -> None:
    async with enrolled_sandbox(database_url, register_facility=False, sync=False) as box:
        ctx = await box.context()
        assert ctx.kross is not None and ctx.kross.facility_hotel_id is None
        facility = box.facility
        await box.services.facilities.add(
            new_facility_from_seed(facility, integration_id=ctx.kross.id)
        )
        await box.services.facilities.mark_error(box.hotel_id, "authentication failed")
        linked = await link_kross(box.services, box.student_id, box.hotel_id)
        again = await link_kross(box.services, box.student_id, box.hotel_id)

    assert linked.id == ctx.kross.id
    assert linked.facility_hotel_id == box.hotel_id
    # The row takes the facility's state.
    assert (linked.status, linked.last_error) == ("error", "authentication failed")
    assert again == linked


async def test_link_kross_to_a_facility_registered_for_another_row_is_a_conflict(
    database_url: str,
) -> None:
    async with enrolled_sandbox(database_url, register_facility=False, sync=False) as box:
        facility = box.facility
        await box.services.facilities.add(
            new_facility_from_seed(facility, integration_id=new_integration_id())
        )
        with pytest.raises(PmsgateError) as caught:
            await link_kross(box.services, box.student_id, box.hotel_id)
    assert caught.value.code == "facility_of_another_integration"


async def test_link_kross_to_an_unknown_facility_while_linked_elsewhere_is_a_conflict(
    database_url: str,
) -> None:
    async with enrolled_sandbox(database_url, sync=False) as box:
        with pytest.raises(PmsgateError) as caught:
            await link_kross(box.services, box.student_id, "999999")
        ctx = await box.context()
    assert caught.value.code == "pms_linked_to_another_facility"
    assert ctx.kross is not None and ctx.kross.facility_hotel_id == box.hotel_id


async def test_set_kross_status_moves_the_row_and_without_a_row_says_so(database_url: str) -> None:
    async with enrolled_sandbox(database_url, sync=False) as box:
        broken = await set_kross_status(box.services, box.student_id, "error", error="auth failed")
        fixed = await set_kross_status(box.services, box.student_id, "connected")
        await register_customer(
            box.services,
            CustomerProfile(student_id="stu-bare", email="bare@example.com", name="B", kind="own"),
        )
        with pytest.raises(PmsgateError) as caught:
            await set_kross_status(box.services, "stu-bare", "error")
    assert (broken.status, broken.last_error) == ("error", "auth failed")
    assert (fixed.status, fixed.last_error) == ("connected", None)
    assert caught.value.code == "pms_not_linked"


# --- customer and workspace --------------------------------------------------------------------


async def test_enrolling_again_changes_nothing_on_the_assistant_or_in_the_records(
    database_url: str,
) -> None:
    async with enrolled_sandbox(database_url) as box:
        before = await box.context()
        workspaces = len(box.sandbox.assistant.workspaces())
        posts = box.sandbox.assistant.stats.requests_by_route["POST /v1/workspaces"]
        await register_customer(
            box.services,
            profile_of(box.facility),
            subscription=Subscription(
                before.customer.subscription_id,
                before.customer.subscription_status,
                before.customer.subscription_price_id,
            ),
        )
        config = await configure_workspace(
            box.services,
            box.student_id,
            plan_limit_usd=150,
            alert_threshold_pct=80,
            workspace_slug=f"sandbox-{box.hotel_id}",
        )
        await link_kross(box.services, box.student_id, box.hotel_id)
        await box.sync()
        after = await box.context()
        posts_after = box.sandbox.assistant.stats.requests_by_route["POST /v1/workspaces"]

    assert config.workspace_id == before.workspace_id
    assert len(box.sandbox.assistant.workspaces()) == workspaces
    assert after.kross == before.kross and after.notes == before.notes
    assert after.apartments == before.apartments
    assert after.workspace is not None and before.workspace is not None
    assert after.workspace.workspace_id == before.workspace.workspace_id
    assert posts == 1 and posts_after == 1


async def test_configure_workspace_finds_a_workspace_the_assistant_already_has_by_slug(
    database_url: str,
) -> None:
    async with enrolled_sandbox(database_url, sync=False) as box:
        existing = box.sandbox.assistant.create_workspace("Precreated", "precreated-ws")
        await register_customer(
            box.services,
            CustomerProfile(student_id="stu-pre", email="pre@example.com", name="Pre", kind="own"),
        )
        config = await configure_workspace(
            box.services,
            "stu-pre",
            plan_limit_usd="99.50",
            alert_threshold_pct=75,
            workspace_slug="precreated-ws",
        )
    assert config.workspace_id == existing.id
    assert config.billing_mode == "partner_markup"
    assert str(config.plan_limit_usd) == "99.50"


async def test_operations_on_an_unknown_customer_are_customer_not_found(
    database_url: str,
) -> None:
    async with enrolled_sandbox(database_url, sync=False) as box:
        for call in (
            configure_workspace(
                box.services, "stu-ghost", plan_limit_usd=1, alert_threshold_pct=50
            ),
            connect_notion(box.services, "stu-ghost", SecretStr("t"), "db"),
            link_kross(box.services, "stu-ghost", box.hotel_id),
            sync_registry(box.services, "stu-ghost"),
        ):
            with pytest.raises(PmsgateError) as caught:
                await call
            assert caught.value.code == "customer_not_found"
