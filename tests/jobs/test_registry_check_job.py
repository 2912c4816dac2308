"""check-registry: a wrongly mapped apartment is found by the scheduled check and stored."""

from __future__ import annotations

import pytest

from pmsgate.customers.registry_check import latest_registry_check, registry_checks
from pmsgate.jobs.registry_check import CHECK_REGISTRY
from tests.customers.test_registry_check import FOUR_APARTMENTS, swap_mapping
from tests.jobs.support import job_stack

pytestmark = pytest.mark.anyio


async def test_the_job_finds_a_wrong_mapping_and_stores_it_for_the_console(
    database_url: str,
) -> None:
    async with job_stack(database_url, student_index=FOUR_APARTMENTS) as stack:
        customers = stack.web.customers
        clean = await stack.run(CHECK_REGISTRY)
        assert clean.status == "succeeded", clean.detail
        assert clean.detail is not None
        assert clean.detail["statuses"] == {"ok": 1} and clean.detail["problems"] == []

        first, second = await swap_mapping(stack.enrolled)
        run = await stack.run(CHECK_REGISTRY)
        assert run.status == "succeeded", run.detail
        assert run.detail is not None
        [found] = run.detail["problems"]
        assert found["student_id"] == stack.student_id
        assert found["kinds"] == {"not_mapped": 1, "room_type_mismatch": 1}
        assert found["fixable"] == 2
        latest = await latest_registry_check(customers, stack.student_id)
        assert latest is not None and latest.status == "problems"
        assert {p.room_type for p in latest.problems} == {first, second}
        stored = await registry_checks(customers).all()
        assert [(v.student_id, v.status, v.problems) for v in stored] == [
            (stack.student_id, "problems", 2)
        ]


async def test_a_assistant_failure_keeps_the_previous_check_and_fails_the_tick(
    database_url: str,
) -> None:
    async with job_stack(database_url, student_index=FOUR_APARTMENTS) as stack:
        await swap_mapping(stack.enrolled)
        assert (await stack.run(CHECK_REGISTRY)).status == "succeeded"
        # Every attempt of the listings read (the client retries a GET four times) answers 503.
        await stack.sandbox_post("/assistant/_sandbox/faults", {"fail_next": 4, "fail_status": 503})
        run = await stack.run(CHECK_REGISTRY)
        assert run.status == "failed"
        assert run.detail is not None
        [failed] = run.detail["failed"]
        assert failed["student_id"] == stack.student_id
        latest = await latest_registry_check(stack.web.customers, stack.student_id)
        assert latest is not None and latest.status == "problems"  # not replaced by a guess
