"""Steps 9-14 against the emulators: route choice, listings, registry, dry run, patch, commit."""

from __future__ import annotations

from collections import Counter

import pytest

from pmsgate.onboarding.steps import ROUTE_A, ROUTE_B
from pmsgate.onboarding.steps_knowledge import (
    apply_knowledge_commit,
    apply_registry,
    apply_templates,
    check_knowledge_commit,
    check_knowledge_dry_run,
    check_listings_count,
    check_registry,
    check_route_choice,
    check_templates,
)
from tests.customers.support import EnrolledSandbox

from .step_support import (
    WRITE_METHODS,
    assistant_routes,
    assistant_writes,
    customer_file,
    onboarding_context,
    run_step,
    step_sandbox,
    workspace_of,
)

pytestmark = pytest.mark.anyio

SEED = 7
PARTNER_FOUR = 1  # partner, four apartments; Magnolia lacks "how to reach"
OWN_TWO = 0  # own key, two apartments
PARTNER_VIOLA = 3  # partner, four apartments; Viola has no WiFi section at all


async def unlink_listings(enrolled: EnrolledSandbox) -> None:
    """The platform workspace without a booking-system connection: 0 listings (Route B)."""
    workspace_id = await workspace_of(enrolled)
    async with enrolled.http() as http:
        answer = await http.delete(f"/assistant/_sandbox/workspaces/{workspace_id}/pms-connection")
        answer.raise_for_status()


def notion_writes(enrolled: EnrolledSandbox) -> Counter[str]:
    """Notes write requests so far, by endpoint (a database query is a POST but a read)."""
    counts = enrolled.sandbox.notion.stats.requests_by_endpoint
    return Counter(
        {k: v for k, v in counts.items() if k.startswith(WRITE_METHODS) and "/query" not in k}
    )


# --- 9 route choice ----------------------------------------------------------------------------


async def test_listings_choose_route_a(database_url):
    async with step_sandbox(database_url, seed=SEED, student_index=PARTNER_FOUR) as enrolled:
        ctx = onboarding_context(enrolled)
        result = await check_route_choice(ctx)

    assert result.done is True
    assert ctx.route == ROUTE_A
    assert result.evidence["route"] == ROUTE_A
    assert result.evidence["listings"] == 4


async def test_no_listings_with_working_authentication_choose_route_b_without_new_tokens(
    database_url,
):
    async with step_sandbox(database_url, seed=SEED, student_index=OWN_TWO) as enrolled:
        await unlink_listings(enrolled)
        tokens = enrolled.sandbox.kross.stats.tokens_issued

        ctx = onboarding_context(enrolled)
        result = await check_route_choice(ctx)
        issued_first = tokens[enrolled.hotel_id]
        again = await check_route_choice(onboarding_context(enrolled))  # a re-run
        issued_again = tokens[enrolled.hotel_id]

    assert result.done is True, result.message
    assert ctx.route == ROUTE_B
    assert result.evidence["route"] == ROUTE_B
    assert result.evidence["listings"] == 0
    assert result.evidence["authentication"] == "verified"
    assert result.evidence["active_apartments"] == 2
    assert again.done and again.evidence["route"] == ROUTE_B
    # The gateway's stored token is shared: the re-run opens no new booking-system session.
    assert issued_first == 1
    assert issued_again == issued_first


async def test_no_listings_because_authentication_fails_stops_the_run_saying_so(database_url):
    async with step_sandbox(database_url, seed=SEED, student_index=PARTNER_FOUR) as enrolled:
        # The customer changed the API password: the platform's listings drop to 0, and the
        # gateway has not noticed yet (its facility still says connected).
        enrolled.sandbox.kross.change_password(enrolled.hotel_id, "changed-by-the-customer")
        ctx = onboarding_context(enrolled)

        result = await check_route_choice(ctx)
        facility = await enrolled.services.facilities.get(enrolled.hotel_id)
        customer = await enrolled.context()

    assert result.done is False
    assert result.stop is True
    assert ctx.route is None
    assert result.evidence["route"] == "stop"
    assert "authentication failed" in result.message
    assert result.fix is not None and "reconnect" in result.fix
    # Spec §3: the integration is now in error, on the facility and on the kross row.
    assert facility.status == "error"
    assert customer.kross is not None and customer.kross.status == "error"


async def test_a_failed_prerequisite_authentication_stops_the_route_choice(database_url):
    async with step_sandbox(database_url, seed=SEED, student_index=OWN_TWO) as enrolled:
        await unlink_listings(enrolled)
        ctx = onboarding_context(enrolled)
        ctx.run.booking_system_authenticated = False  # what step 1 recorded

        result = await check_route_choice(ctx)

    assert result.stop is True
    assert "authentication failed" in result.message


# --- 10 listings count -------------------------------------------------------------------------


async def test_listings_count_equals_the_booking_systems_active_apartments(database_url):
    async with step_sandbox(database_url, seed=SEED, student_index=PARTNER_FOUR) as enrolled:
        result = await check_listings_count(onboarding_context(enrolled))

    assert result.done is True, result.message
    assert result.evidence["listings"] == 4
    assert result.evidence["active_apartments"] == 4
    assert result.evidence["room_types"] == enrolled.room_type_ids
    assert result.evidence["source"].startswith("calendar/get-availability")


async def test_zero_listings_at_step_10_stop_with_the_fix(database_url):
    async with step_sandbox(database_url, seed=SEED, student_index=PARTNER_FOUR) as enrolled:
        await unlink_listings(enrolled)
        result = await check_listings_count(onboarding_context(enrolled))

    assert result.done is False and result.stop is True
    assert "authentication failed or the partner is not linked" in result.message
    assert result.fix


# --- 11 registry -------------------------------------------------------------------------------


async def test_registry_gets_one_row_per_apartment_and_a_second_sync_adds_none(database_url):
    async with step_sandbox(
        database_url, seed=SEED, student_index=PARTNER_FOUR, sync=False
    ) as enrolled:
        ctx = onboarding_context(enrolled)
        first, last = await run_step(ctx, check_registry, apply_registry)
        await apply_registry(ctx)  # applied again: rows are updated in place, not duplicated
        again = await check_registry(onboarding_context(enrolled))
        rows = (await enrolled.context()).apartments

    assert first.done is False
    assert len(first.evidence["listings_without_row"]) == 4
    assert last.done is True, last.message
    assert again.done is True
    assert sorted(r.pms_room_type_id for r in rows) == enrolled.room_type_ids
    assert all(r.assistant_listing_id and r.notes_page_id for r in rows)


# --- 12-14 knowledge ---------------------------------------------------------------------------


async def test_incomplete_pages_are_patched_then_committed_and_a_rerun_writes_nothing(
    database_url,
):
    async with step_sandbox(database_url, seed=SEED, student_index=PARTNER_FOUR) as enrolled:
        ctx = onboarding_context(enrolled)
        dry_run = await check_knowledge_dry_run(ctx)
        templates = await run_step(ctx, check_templates, apply_templates)
        commit = await run_step(ctx, check_knowledge_commit, apply_knowledge_commit)
        # The commit is in the customer's sync history: the console's knowledge card and
        # the admin's last sync read that one fact (never "not loaded yet" after onboarding).
        history = await ctx.knowledge.repo.jobs_of(ctx.student_id)

        assistant_before = assistant_routes(enrolled)
        notion_before = notion_writes(enrolled)
        rerun = onboarding_context(enrolled)
        dry_run_again = await check_knowledge_dry_run(rerun)
        templates_again = await check_templates(rerun)
        commit_again = await check_knowledge_commit(rerun)
        assistant_after = assistant_routes(enrolled)
        notion_after = notion_writes(enrolled)

    # 12: the counters are recorded; the incomplete templates are left to step 13.
    assert dry_run.done is True, dry_run.message
    assert dry_run.evidence["apartments"] == 4
    assert dry_run.evidence["unresolvedApartments"] == 0
    assert dry_run.evidence["incompleteTemplates"] >= 1
    assert "step 13 patches them" in dry_run.message
    # 13: every page canonical after one apply.
    assert templates[0].done is False
    assert templates[1].done is True, templates[1].message
    assert templates[1].evidence["canonical"] == 4
    # 14: the first commit's counters as the spec expects.
    assert commit[0].done is False
    assert commit[1].done is True, commit[1].message
    counters = commit[1].evidence["commit"]["counters"]
    assert counters["failed"] == 0
    assert counters["blockedByTemplate"] == 0
    assert counters["directoriesCreated"] == 4
    assert 4 * 25 <= counters["created"] <= 4 * 45
    assert commit[1].evidence["wifi_nodes"] == {rt: True for rt in enrolled.room_type_ids}
    [recorded] = history
    assert (recorded.kind, recorded.status) == ("commit", "succeeded")
    assert recorded.counters is not None and recorded.counters["created"] == counters["created"]
    # The re-run: incompleteTemplates 0, every step done, nothing written anywhere.
    assert dry_run_again.done and dry_run_again.evidence["incompleteTemplates"] == 0
    assert templates_again.done is True
    assert commit_again.done is True
    assert "already synced" in commit_again.message
    assert assistant_writes(assistant_before, assistant_after) == {}
    assert notion_after == notion_before


async def test_unknown_wifi_makes_step_13_wait_for_a_person_while_other_pages_are_patched(
    database_url,
):
    async with step_sandbox(database_url, seed=SEED, student_index=PARTNER_VIOLA) as enrolled:
        viola = next(p for p in enrolled.notes_pages if "wifi" in p["sections_missing"])
        room_type = str(viola["pms_room_type_id"])
        ctx = onboarding_context(enrolled, customer_file(enrolled, wifi=False))

        templates = await run_step(ctx, check_templates, apply_templates)
        commit = await run_step(ctx, check_knowledge_commit, apply_knowledge_commit)

        # A person adds the WiFi credentials to the customer file; the next run finishes.
        rerun = onboarding_context(enrolled, customer_file(enrolled))
        templates_after = await run_step(rerun, check_templates, apply_templates)
        commit_after = await run_step(rerun, check_knowledge_commit, apply_knowledge_commit)

    first, last = templates
    assert first.done is False
    assert last.done is False
    assert last.stop is False  # not a failure of the run
    assert last.waiting_for is not None and viola["title"] in last.waiting_for
    pages = last.evidence["by_room_type"]
    assert pages[room_type]["blockers"] == ["wifi_credentials_unknown"]
    assert all(p["canonical"] for rt, p in pages.items() if rt != room_type)
    assert commit[1].done is False
    assert commit[1].waiting_for is not None
    assert commit[1].evidence["synced"] == {rt: rt != room_type for rt in enrolled.room_type_ids}
    assert commit[1].evidence["commit"]["counters"]["blockedByTemplate"] == 1
    assert templates_after[1].done is True, templates_after[1].message
    assert commit_after[1].done is True, commit_after[1].message
    assert commit_after[1].evidence["commit"]["counters"]["directoriesCreated"] == 1
