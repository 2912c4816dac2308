"""The runner's one hook into the audit trail: onboarding.side_effect per applied step.

Synthetic steps on the sandbox's onboarding services: applied once → one event; already
done, dry run → none; an apply that broke off or left the step undone → a failure; a
secret-looking evidence key is left out of the event, not refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pmsgate.audit import Actor
from pmsgate.audit.trail import fit_details
from pmsgate.errors import InvalidInput
from pmsgate.onboarding.runner import OnboardingRunner
from pmsgate.onboarding.steps import OnboardingContext, Step, StepKind, StepResult
from pmsgate.storage.audit import AuditEventView, AuditFilter
from tests.onboarding.sandbox_customer import OnboardingSandbox, onboarding_sandbox
from tests.onboarding.step_support import synthetic_step

pytestmark = pytest.mark.anyio


class Thing:
    """Something outside a synthetic step creates (its evidence names a secret's key)."""

    def __init__(self, *, works: bool = True, breaks: bool = False) -> None:
        self.made = False
        self.works = works
        self.breaks = breaks

    async def check(self, _ctx: OnboardingContext) -> StepResult:
        evidence = {"thing_id": "t-1" if self.made else None, "api_token": "tok-sekrit-123456"}
        return StepResult(done=self.made, evidence=evidence, message="checked")

    async def apply(self, _ctx: OnboardingContext) -> None:
        if self.breaks:
            raise InvalidInput("half made", code="thing_half_made")
        self.made = self.works


def step(number: int, thing: Thing) -> Step:
    return synthetic_step(
        number,
        StepKind.AUTO,
        thing.check,
        name="thing",
        title=f"Make thing {number}",
        apply=thing.apply,
    )


async def _side_effects(box: OnboardingSandbox) -> list[AuditEventView]:
    assert box.services.audit is not None
    page = await box.services.audit.page(AuditFilter(action_prefix="onboarding."), limit=500)
    return list(reversed(page.events))


async def test_an_applied_step_is_recorded_once_for_its_customer_without_secret_keys(
    database_url: str, tmp_path: Path
) -> None:
    async with onboarding_sandbox(database_url, tmp_path) as box:
        made, done_already = Thing(), Thing()
        done_already.made = True
        runner = OnboardingRunner(
            box.services, [step(1, made), step(2, done_already)], actor=Actor.job("onboard-job")
        )
        assert (await runner.run(box.file(), dry_run=True)).status == "succeeded"
        assert await _side_effects(box) == []  # a dry run applies nothing
        await runner.run(box.file())
        await runner.run(box.file())  # done: nothing applied, nothing recorded
        (event,) = await _side_effects(box)

    assert (event.actor_kind, event.actor, event.outcome) == ("job", "onboard-job", "success")
    assert event.subject == f"customer:{box.student_id}"
    # (No customer row: these steps enrol no one. The scenario test shows customer_id set.)
    assert event.details["step"] == "thing-1" and event.details["completed"] is True
    assert event.details["evidence"] == {"thing_id": "t-1", "withheld": ["api_token"]}
    assert "tok-sekrit" not in str(event.as_json())


async def test_an_apply_that_broke_off_or_did_not_finish_is_a_failure(
    database_url: str, tmp_path: Path
) -> None:
    async with onboarding_sandbox(database_url, tmp_path) as box:
        broken = OnboardingRunner(box.services, [step(1, Thing(breaks=True))])
        assert (await broken.run(box.file())).status == "failed"
        stuck = OnboardingRunner(box.services, [step(1, Thing(works=False))])
        assert (await stuck.run(box.file())).status == "failed"
        first, second = await _side_effects(box)

    assert (first.outcome, first.details["completed"]) == ("failure", False)
    assert first.details["error_code"] == "thing_half_made"
    assert (second.outcome, second.details["completed"]) == ("failure", True)
    assert second.details["status"] == "failed"
    assert {first.actor, second.actor} == {"pmsgate onboard"}


def test_fit_details_summarises_what_does_not_fit_and_never_refuses() -> None:
    deep = {"a": {"b": {"c": {"d": {"e": 1}}}}}
    wide = {f"k{n}": n for n in range(80)}
    fitted = fit_details({"deep": deep, "wide": wide, "password": "x", "when": object()})
    assert fitted["withheld"] == ["password"]
    assert isinstance(fitted["when"], str)
    assert len(fitted["wide"]) <= 50 and "more" in fitted["wide"]
    assert "keys}" in str(fitted["deep"])
