"""The runner's rules: check → apply → check, persisted results, resume, dry run, stop.

Rule tests use small steps of their own (the runner takes any list of steps); the
others run the real steps on the in-process sandbox, with faults injected through the
platform emulator's /_sandbox/faults control.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from pmsgate.errors import InvalidInput
from pmsgate.integrations.kross.operations import load_operations
from pmsgate.onboarding import steps_channels, steps_setup
from pmsgate.onboarding.registry import STEPS
from pmsgate.onboarding.report import Checklist
from pmsgate.onboarding.runner import OnboardingRunner, StepEvent, confirm_step
from pmsgate.onboarding.steps import (
    BOTH_ROUTES,
    ONLY_A,
    ONLY_B,
    OnboardingContext,
    Step,
    StepKind,
    StepResult,
)
from tests.onboarding.sandbox_customer import OnboardingSandbox
from tests.onboarding.step_support import synthetic_step

pytestmark = pytest.mark.anyio

Check = Callable[[OnboardingContext], Awaitable[StepResult]]

MY_STEPS = [
    steps_setup.PREREQUISITES,
    steps_setup.ALLOWLIST,
    steps_setup.WORKSPACE_CONFIGURATION,
    steps_setup.NOTION_INTEGRATION,
    steps_setup.WORKSPACE,
    steps_setup.PLATFORM_ADMIN,
    steps_channels.CHANNELS,
    steps_channels.ONBOARDING_MESSAGE,
]


class Flag:
    """A piece of state a synthetic step checks and sets, counting its applies."""

    def __init__(self, done: bool = False, *, works: bool = True) -> None:
        self.done = done
        self.works = works
        self.applied = 0

    async def check(self, _ctx: OnboardingContext) -> StepResult:
        return StepResult(done=self.done, message="done" if self.done else "not yet")

    async def apply(self, _ctx: OnboardingContext) -> None:
        self.applied += 1
        self.done = self.works

    async def describe(self, _ctx: OnboardingContext) -> str:
        return "set the flag"


def auto(number: int, flag: Flag, routes: frozenset[str] = BOTH_ROUTES) -> Step:
    return synthetic_step(
        number,
        StepKind.AUTO,
        flag.check,
        routes=routes,
        apply=flag.apply,
        describe=flag.describe,
    )


def manual(number: int) -> Step:
    async def check(_ctx: OnboardingContext) -> StepResult:
        return StepResult(done=False, message="a person must do it", waiting_for="call the owner")

    return synthetic_step(number, StepKind.MANUAL, check)


def route_choice(number: int, route: str) -> Step:
    async def check(ctx: OnboardingContext) -> StepResult:
        ctx.route = route
        return StepResult(done=True, message=f"Route {route}")

    return route_step(number, check)


def route_step(number: int, check: Check) -> Step:
    return synthetic_step(number, StepKind.CHECK, check, title="Route")


async def test_auto_steps_are_applied_once_and_a_rerun_repeats_no_side_effect(
    box: OnboardingSandbox,
) -> None:
    first, second = Flag(), Flag(done=True)
    runner = OnboardingRunner(box.services, [auto(1, first), auto(2, second)])
    report = await runner.run(box.file())
    assert report.status == "succeeded" and report.exit_code == 0
    assert [o.status for o in report.outcomes] == ["done", "done"]
    assert [o.applied for o in report.outcomes] == [True, False]
    again = await runner.run(box.file())
    assert again.status == "succeeded" and first.applied == 1 and second.applied == 0


async def test_an_auto_step_still_not_done_after_apply_fails_the_run_there(
    box: OnboardingSandbox,
) -> None:
    stuck, after = Flag(works=False), Flag()
    report = await OnboardingRunner(box.services, [auto(1, stuck), auto(2, after)]).run(box.file())
    assert report.status == "failed" and report.exit_code == 1
    assert report.ended_at_step == "step-1"
    assert report.outcomes[0].message.startswith("still not done after applying")
    assert after.applied == 0 and len(report.outcomes) == 1
    runs = await box.services.repository.runs(box.student_id)
    assert [(r.status, r.ended_at_step) for r in runs] == [("failed", "step-1")]


async def test_a_manual_step_waits_for_a_person_and_never_blocks_the_next_steps(
    box: OnboardingSandbox,
) -> None:
    later = Flag()
    report = await OnboardingRunner(box.services, [manual(1), auto(2, later)]).run(box.file())
    assert report.status == "succeeded" and report.exit_code == 0 and not report.complete
    assert report.outcomes[0].status == "waiting"
    assert report.outcomes[0].waiting_for == "call the owner"
    assert later.applied == 1


async def test_steps_of_the_other_route_are_skipped_once_the_route_is_chosen(
    box: OnboardingSandbox,
) -> None:
    only_a, only_b = Flag(), Flag()
    steps = [route_choice(9, "B"), auto(10, only_a, ONLY_A), auto(17, only_b, ONLY_B)]
    report = await OnboardingRunner(box.services, steps).run(box.file())
    assert report.route == "B"
    assert [o.status for o in report.outcomes] == ["done", "skipped", "done"]
    assert only_a.applied == 0 and only_b.applied == 1
    assert (await box.services.repository.last_run(box.student_id)).route == "B"  # type: ignore[union-attr]


async def test_an_exception_fails_the_run_with_its_code_and_no_secret(
    box: OnboardingSandbox,
) -> None:

    async def boom(ctx: OnboardingContext) -> StepResult:
        raise InvalidInput("The thing is wrong.", code="thing_wrong", hint="Fix the thing.")

    async def leaky(ctx: OnboardingContext) -> StepResult:
        raise RuntimeError(ctx.file.booking_system.password.get_secret_value())

    for check, code in ((boom, "thing_wrong"), (leaky, "internal_error")):
        step = synthetic_step(1, StepKind.CHECK, check)
        report = await OnboardingRunner(box.services, [step]).run(box.file())
        outcome = report.outcomes[0]
        assert report.status == "failed" and outcome.error_code == code
        assert outcome.evidence == {"error": code}
        for secret in box.secrets():
            assert secret not in report.to_json()
    assert report.outcomes[0].message == "unexpected RuntimeError"


async def test_dry_run_says_what_it_would_do_and_writes_nothing(
    box: OnboardingSandbox, tmp_path: Path
) -> None:
    report = await OnboardingRunner(box.services, MY_STEPS).run(box.file(), dry_run=True)
    assert report.status == "succeeded" and report.dry_run
    by_id = {o.id: o for o in report.outcomes}
    assert by_id["prerequisites"].status == "done"
    assert by_id["workspace"].status == "would_do"
    assert by_id["workspace"].message.startswith("would do: create workspace sandbox-")
    assert by_id["channels"].status == "waiting"
    assert box.upstream_writes() == {"platform": 0, "notes": 0}
    services = box.services.customers
    assert await services.customers.find(box.student_id) is None
    assert await services.allowlist.find(box.document["email"]) is None
    assert await services.facilities.list() == []
    assert not (tmp_path / "outbox").exists()
    # Dry runs are kept apart: the checklist has none of their results.
    assert await box.services.repository.checklist(box.student_id) == {}


async def test_a_failed_prerequisite_stops_the_run_with_reason_and_fix(
    box: OnboardingSandbox,
) -> None:
    box.env[f"KROSS_PASSWORD_{box.hotel_id}"] = "not-the-password"
    report = await OnboardingRunner(box.services).run(box.file())
    assert report.status == "stopped" and report.exit_code == 1
    assert report.ended_at_step == "prerequisites" and len(report.outcomes) == 1
    assert report.message is not None and "rejected the credentials" in report.message
    assert report.fix is not None and box.facility["username"] in report.fix
    assert await box.services.customers.customers.find(box.student_id) is None
    assert "not-the-password" not in report.to_json()


async def test_a_failure_injected_at_a_step_is_resumed_there_by_the_next_run(
    box: OnboardingSandbox,
) -> None:
    runner = OnboardingRunner(box.services, MY_STEPS)

    async def break_assistant_at_workspace(event: StepEvent) -> None:
        if event.step.id == "workspace" and event.phase == "applying":
            await box.control("POST", "/assistant/_sandbox/faults", json={"fail_next": 100})

    report = await runner.run(box.file(), progress=break_assistant_at_workspace)
    assert report.status == "failed" and report.ended_at_step == "workspace"
    assert report.error_code == "platform_unavailable"
    assert [o.status for o in report.outcomes][:4] == ["done"] * 4
    await box.control("DELETE", "/assistant/_sandbox/faults")

    applied: list[str] = []

    def watch(event: StepEvent) -> None:
        if event.phase == "applying":
            applied.append(event.step.id)

    resumed = await runner.run(box.file(), progress=watch)
    assert resumed.status == "succeeded"
    # Steps 1-4 were re-checked, not re-applied: the run resumed at step 5.
    assert applied == ["workspace", "platform-admin", "onboarding-message"]
    checklist = await box.services.repository.checklist(box.student_id)
    assert checklist["workspace"].status == "done"
    assert checklist["channels"].status == "waiting"


async def test_a_second_run_of_a_finished_onboarding_changes_nothing_upstream(
    box: OnboardingSandbox,
) -> None:
    workspace_id = box.prepare_route_a()
    runner = OnboardingRunner(box.services, STEPS)
    finished = await runner.run(box.file())
    assert finished.status == "succeeded", finished.as_dict()
    assert finished.route == "A"
    assert finished.outcomes[4].evidence["workspace_id"] == workspace_id
    assert [o.id for o in finished.outcomes if o.status not in ("done", "skipped")] == ["channels"]
    writes = box.upstream_writes()
    kross: dict[str, int] = dict(box.sandbox.kross.stats.requests_by_operation)
    # One booking-system session for the whole onboarding: step 1's token became the
    # facility's at registration (step 3), and steps 9-10 used it through the gateway.
    tokens_issued = box.sandbox.kross.stats.tokens_issued
    assert tokens_issued[box.hotel_id] == 1
    assert kross["calendar/get-availability"] >= 1
    again = await runner.run(box.file())
    assert again.status == "succeeded"
    assert not any(o.applied for o in again.outcomes)
    assert box.upstream_writes() == writes
    kross_after = dict(box.sandbox.kross.stats.requests_by_operation)
    table = load_operations({})
    new_calls = {op: n - kross.get(op, 0) for op, n in kross_after.items()}
    # Not even a new booking-system session: the gateway's stored token is reused.
    assert all(not table.resolve(op).is_write for op, n in new_calls.items() if n), new_calls
    assert tokens_issued[box.hotel_id] == 1


async def test_confirmed_channel_items_make_the_manual_step_done_on_the_next_run(
    box: OnboardingSandbox,
) -> None:
    runner = OnboardingRunner(box.services, MY_STEPS)
    await runner.run(box.file())
    items = [i.id for i in steps_channels.required_channel_items(box.services.context(box.file()))]
    latest = (await box.services.repository.checklist(box.student_id))["channels"]
    assert latest.due is not None  # the WhatsApp number's lead time
    # The due date stands while the dated item (the WhatsApp number) waits.
    order = [i for i in items[:-1] if i != "whatsapp-number"] + ["whatsapp-number"]
    for item in order:
        recorded = await confirm_step(
            box.services,
            box.student_id,
            "channels",
            f"{item}: checked",
            item=item,
            person="ops",
        )
        assert recorded.status == "waiting"
        assert recorded.due == (None if item == "whatsapp-number" else latest.due)
    assert recorded.waiting_for is not None and "check-escalation" in recorded.waiting_for
    recorded = await confirm_step(
        box.services, box.student_id, "15", "escalation reached #ops", item=items[-1]
    )
    assert recorded.status == "done" and recorded.recorded_by == "person"
    report = await runner.run(box.file())
    channels = next(o for o in report.outcomes if o.id == "channels")
    assert channels.status == "done"
    assert channels.evidence["items"]["check-escalation"]["evidence"] == ("escalation reached #ops")


async def test_confirm_refuses_unknown_steps_items_and_automatable_steps(
    box: OnboardingSandbox,
) -> None:

    async def confirm(step: str, item: str | None = None, sid: str | None = None) -> str:
        with pytest.raises(Exception) as caught:
            await confirm_step(box.services, sid or box.student_id, step, "evidence", item=item)
        code: Any = getattr(caught.value, "code", None)
        return str(code)

    assert await confirm("channels", "whatsapp-number") == "onboarding_not_found"
    await OnboardingRunner(box.services, MY_STEPS).run(box.file())
    assert await confirm("no-such-step") == "unknown_step"
    assert await confirm("channels") == "item_required"
    assert await confirm("channels", "fax") == "unknown_item"
    assert await confirm("workspace") == "step_not_manual"


async def _run_and_events(box: OnboardingSandbox) -> list[tuple[int, str]]:
    events: list[tuple[int, str]] = []
    await OnboardingRunner(box.services, MY_STEPS).run(
        box.file(), progress=lambda e: events.append((e.step.number, e.phase))
    )
    return events


async def test_progress_reports_each_phase_of_each_step(box: OnboardingSandbox) -> None:
    events = await _run_and_events(box)
    assert events[:4] == [(1, "checking"), (1, "finished"), (2, "checking"), (2, "applying")]
    assert (16, "rechecking") in events and events[-1] == (16, "finished")


async def test_the_checklist_follows_the_latest_route_and_leaves_out_dry_runs(
    box: OnboardingSandbox,
) -> None:
    route = {"now": "B"}

    async def choose(ctx: OnboardingContext) -> StepResult:
        ctx.route = route["now"]
        return StepResult(done=True, message=f"Route {ctx.route}")

    steps = [
        route_step(9, choose),
        auto(10, Flag(), ONLY_A),
        auto(17, Flag(), ONLY_B),
    ]
    runner = OnboardingRunner(box.services, steps)
    await runner.run(box.file())
    route["now"] = "A"  # listings appeared: the next run takes Route A
    await runner.run(box.file())
    await runner.run(box.file(), dry_run=True)
    repo = box.services.repository
    checklist = Checklist.build(
        box.student_id,
        await repo.checklist(box.student_id),
        await repo.last_run(box.student_id),
        steps,
    )
    assert checklist.route == "A"
    assert [(o.id, o.status) for o in checklist.outcomes] == [
        ("step-9", "done"),
        ("step-10", "done"),
        ("step-17", "skipped"),
    ]
    assert all(o.recorded_at is not None for o in checklist.outcomes[:2])
