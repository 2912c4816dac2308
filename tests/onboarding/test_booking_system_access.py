"""Every booking-system request of the onboarding goes through the gateway (DESIGN §3).

The onboarding's requests take permits of the facility's budget in the gateway's
limiter and use the gateway's token manager: a spent budget is a clear problem of the
step, never a request the booking system answers with 429. (That a fresh onboarding
opens one booking-system session is in test_runner's second-run test.)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pmsgate.onboarding
from pmsgate.gateway.facilities import Limits
from pmsgate.onboarding.registry import STEPS
from pmsgate.onboarding.runner import OnboardingRunner, StepEvent
from tests.onboarding.sandbox_customer import onboarding_sandbox

pytestmark = pytest.mark.anyio


async def test_a_spent_facility_budget_is_the_steps_problem_not_an_upstream_429(
    database_url: str, tmp_path: Path
) -> None:
    overrides = {"limiter_wait_s": 0.0}
    async with onboarding_sandbox(database_url, tmp_path, settings_overrides=overrides) as box:
        facilities = box.services.facilities

        async def one_call_a_minute(event: StepEvent) -> None:
            # Once registered (step 3), the facility may make one call a minute: step 1's
            # auth/get-token has taken it (the clock does not move).
            if event.step.id == "workspace-configuration" and event.phase == "finished":
                await facilities.set_limits(box.hotel_id, Limits(per_minute=1))

        report = await OnboardingRunner(box.services, STEPS).run(
            box.file(), progress=one_call_a_minute
        )
        kross = box.sandbox.kross.stats
        assert report.status == "failed" and report.ended_at_step == "route-choice"
        assert report.error_code == "upstream_budget_exhausted"
        assert report.message is not None and "budget" in report.message
        assert report.fix is not None and "Retry in" in report.fix
        # Step 9 did not ask the booking system, which never answered 429.
        assert kross.requests_by_operation["calendar/get-availability"] == 0
        assert kross.rate_limited.total() == 0
        assert kross.tokens_issued[box.hotel_id] == 1


def test_the_onboarding_reaches_the_gateway_only_through_its_public_methods() -> None:
    # No attribute of the gateway's insides (limiter, policy, client, tokens, cache) is read
    # anywhere in the onboarding: it uses Gateway.request_token / adopt_token /
    # facility_token / read (docs/architecture.md, Onboarding).
    insides = {"limiter", "policy", "pms", "tokens", "cache"}
    found = []
    for path in Path(pmsgate.onboarding.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in insides
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == "gateway"
            ):
                found.append(f"{path.name}:{node.lineno} gateway.{node.attr}")
    assert found == []
