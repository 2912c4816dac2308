"""Step 11 holds only while every apartment maps to its own listing (spec §7)."""

from __future__ import annotations

import pytest

from pmsgate.onboarding.steps_knowledge import apply_registry, check_registry
from tests.customers.test_registry_check import FOUR_APARTMENTS, swap_mapping

from .step_support import onboarding_context, run_step, step_sandbox

pytestmark = pytest.mark.anyio


async def test_a_wrongly_mapped_apartment_fails_step_11_until_the_sync_maps_it(
    database_url: str,
) -> None:
    async with step_sandbox(database_url, seed=7, student_index=FOUR_APARTMENTS) as enrolled:
        assert (await check_registry(onboarding_context(enrolled))).done
        first, second = await swap_mapping(enrolled)
        first_check, last = await run_step(
            onboarding_context(enrolled), check_registry, apply_registry
        )

    assert first_check.done is False
    kinds = {(p["kind"], p["room_type"]) for p in first_check.evidence["registry_problems"]}
    assert kinds == {("not_mapped", first), ("room_type_mismatch", second)}
    assert "mapping problems" in first_check.message
    assert first_check.waiting_for is None  # the apply (the listings sync) repairs it
    assert last.done is True, last.message
    assert last.evidence["registry_problems"] == []


async def test_a_listing_only_a_person_can_restore_makes_step_11_wait(database_url: str) -> None:
    async with step_sandbox(database_url, seed=7, student_index=FOUR_APARTMENTS) as enrolled:
        gone = enrolled.room_type_ids[0]
        del enrolled.sandbox.kross.facility(enrolled.hotel_id).apartments[int(gone)]
        result = await check_registry(onboarding_context(enrolled))

    assert result.done is False
    [problem] = result.evidence["registry_problems"]
    assert (problem["kind"], problem["room_type"]) == ("listing_deleted", gone)
    assert result.waiting_for is not None and "booking system" in result.waiting_for
    assert result.fix == problem["fix"]
