"""The registry check and its fix (spec §7 "Listing unavailable"), against the emulators."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from pmsgate.audit.actions import Actor
from pmsgate.customers.registry_check import (
    ProblemKind,
    RegistryReport,
    assess,
    check_and_record,
    check_registry,
    fix_registry,
    latest_registry_check,
    registry_checks,
)
from pmsgate.errors import Conflict
from pmsgate.integrations.assistant.client import Listing
from pmsgate.storage.apartments import ApartmentView
from pmsgate.storage.audit import AuditFilter
from tests.customers.support import EnrolledSandbox, enrolled_sandbox

pytestmark = pytest.mark.anyio

FOUR_APARTMENTS = 1  # seed 7: a partner facility with four apartments
ACTOR = Actor.cli("pmsgate customers fix-registry")
WHEN = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


async def swap_mapping(enrolled: EnrolledSandbox) -> tuple[str, str]:
    """Map the second apartment to the first one's listing, leaving the first without any.

    Returns the two room types (first, second).
    """
    first, second = enrolled.room_type_ids[:2]
    apartments = enrolled.services.apartments
    listing = (await apartments.get(enrolled.student_id, first)).assistant_listing_id
    await apartments.update_listing(enrolled.student_id, first, None)
    await apartments.update_listing(enrolled.student_id, second, listing)
    return first, second


async def registry_events(enrolled: EnrolledSandbox) -> list[dict[str, Any]]:
    owner = await enrolled.container.audit.owner(enrolled.student_id)
    page = await enrolled.container.audit.page(AuditFilter(owner=owner, action_prefix="registry."))
    return [dict(e.details) | {"actor": e.actor} for e in page.events]


async def test_an_enrolled_customer_maps_every_apartment_to_its_listing(database_url: str) -> None:
    async with enrolled_sandbox(database_url, student_index=FOUR_APARTMENTS) as enrolled:
        report = await check_registry(enrolled.services, enrolled.student_id)
    assert report.status == "ok", report.problems
    assert report.problems == []
    assert [a.room_type for a in report.apartments] == enrolled.room_type_ids
    names = {str(a["id_room_type"]): a["name"] for a in enrolled.facility["apartments"]}
    for mapping in report.apartments:
        assert mapping.ok
        assert mapping.listing_room_type == mapping.room_type
        assert mapping.listing_name == names[mapping.room_type]


async def test_a_swapped_mapping_is_caught_and_fixed_once_with_its_audit_event(
    database_url: str,
) -> None:
    async with enrolled_sandbox(database_url, student_index=FOUR_APARTMENTS) as enrolled:
        before_rows = {
            a.pms_room_type_id: a.assistant_listing_id
            for a in (await enrolled.context()).apartments
        }
        first, second = await swap_mapping(enrolled)
        services = enrolled.services

        report = await check_and_record(services, enrolled.student_id)
        assert report.status == "problems"
        kinds = {p.room_type: p.kind for p in report.problems}
        assert kinds == {first: ProblemKind.NOT_MAPPED, second: ProblemKind.ROOM_TYPE_MISMATCH}
        mismatch = next(p for p in report.problems if p.room_type == second)
        assert f"room type {first}" in mismatch.reason and "Listing unavailable" in mismatch.reason
        assert mismatch.target_listing_id == before_rows[second]
        assert mismatch.automatic and mismatch.fix
        stored = await latest_registry_check(services, enrolled.student_id)
        assert stored is not None and stored == RegistryReport.from_dict(report.as_dict())
        assert [(v.student_id, v.status) for v in await registry_checks(services).all()] == [
            (enrolled.student_id, "problems")
        ]

        dry = await fix_registry(
            services, enrolled.student_id, audit=enrolled.container.audit, actor=ACTOR, dry_run=True
        )
        assert {(c.action, c.room_type) for c in dry.changes} == {
            ("attach", first),
            ("replace", second),
        }
        assert not dry.changed
        rows = {
            a.pms_room_type_id: a.assistant_listing_id
            for a in (await enrolled.context()).apartments
        }
        assert rows[first] is None  # a dry run changes nothing
        assert await registry_events(enrolled) == []

        fixed = await fix_registry(
            services, enrolled.student_id, audit=enrolled.container.audit, actor=ACTOR
        )
        assert fixed.changed and fixed.after.status == "ok"
        rows = {
            a.pms_room_type_id: a.assistant_listing_id
            for a in (await enrolled.context()).apartments
        }
        assert rows == before_rows
        [event] = await registry_events(enrolled)
        assert event["actor"] == ACTOR.name
        assert {c["room_type"] for c in event["changes"]} == {first, second}
        latest = await latest_registry_check(services, enrolled.student_id)
        assert latest is not None and latest.status == "ok"
        assert [v.status for v in await registry_checks(services).all()] == ["ok"]

        again = await fix_registry(
            services, enrolled.student_id, audit=enrolled.container.audit, actor=ACTOR
        )
        assert again.changes == [] and not again.changed
        assert len(await registry_events(enrolled)) == 1  # nothing changed, nothing recorded


async def test_a_deleted_listing_is_left_for_a_person_and_a_missing_row_is_created(
    database_url: str,
) -> None:
    async with enrolled_sandbox(database_url, student_index=FOUR_APARTMENTS) as enrolled:
        gone, unregistered = enrolled.room_type_ids[:2]
        # The apartment leaves the booking system: the platform lists no listing for it.
        del enrolled.sandbox.kross.facility(enrolled.hotel_id).apartments[int(gone)]
        await enrolled.services.apartments.remove(enrolled.student_id, unregistered)
        report = await check_registry(enrolled.services, enrolled.student_id)
        kinds = {p.room_type: p.kind for p in report.problems}
        assert kinds == {
            gone: ProblemKind.LISTING_DELETED,
            unregistered: ProblemKind.LISTING_WITHOUT_APARTMENT,
        }
        assert [p.room_type for p in report.for_a_person] == [gone]
        assert [p.room_type for p in report.fixable] == [unregistered]

        fixed = await fix_registry(
            enrolled.services, enrolled.student_id, audit=enrolled.container.audit, actor=ACTOR
        )
        assert [(c.action, c.room_type) for c in fixed.changes] == [("create", unregistered)]
        assert [p.room_type for p in fixed.left_for_a_person] == [gone]
        assert fixed.after.status == "problems"
        row = await enrolled.services.apartments.get(enrolled.student_id, unregistered)
        assert row.assistant_listing_id is not None and row.name


async def test_no_listings_at_all_is_the_connection_not_the_registry(database_url: str) -> None:
    async with enrolled_sandbox(database_url, student_index=FOUR_APARTMENTS) as enrolled:
        await enrolled.break_kross()
        report = await check_registry(enrolled.services, enrolled.student_id)
        assert report.status == "unchecked"
        assert report.fix is not None and "Reconnect" in report.fix
        with pytest.raises(Conflict) as refused:
            await fix_registry(
                enrolled.services,
                enrolled.student_id,
                audit=enrolled.container.audit,
                actor=ACTOR,
            )
        assert refused.value.code == "registry_unchecked"
        rows = (await enrolled.context()).apartments
        assert all(a.assistant_listing_id for a in rows)  # nothing detached
        stored = await latest_registry_check(enrolled.services, enrolled.student_id)
        assert stored is not None and stored.status == "unchecked"


def _row(room_type: str, listing: str | None) -> ApartmentView:
    return ApartmentView(
        id=int(room_type),
        student_id="s",
        pms_room_type_id=room_type,
        assistant_listing_id=listing,
        notes_page_id=None,
        name=f"Apt {room_type}",
        created_at=WHEN,
        updated_at=WHEN,
    )


def test_two_listings_of_one_room_type_are_left_for_a_person() -> None:
    listings = [
        Listing(id="L1", name="Rosa", external_id="1"),
        Listing(id="L1b", name="Rosa (copy)", external_id="1"),
        Listing(id="L2", name="Viola", external_id="2"),
        Listing(id="LX", name="Unknown"),
    ]
    report = assess(
        "s", [_row("1", None), _row("2", "L2")], listings, checked_at=WHEN, workspace_id="w"
    )
    kinds = [(p.kind, p.room_type) for p in report.problems]
    assert kinds == [
        (ProblemKind.AMBIGUOUS_LISTING, "1"),
        (ProblemKind.LISTING_WITHOUT_APARTMENT, None),
    ]
    assert report.fixable == []
    assert "Rosa (copy)" in report.problems[0].fix
    # A Route B customer: no listings, no apartments — nothing to check.
    route_b = assess("s", [], [], checked_at=WHEN, workspace_id="w")
    assert route_b.status == "not_applicable" and route_b.ok
