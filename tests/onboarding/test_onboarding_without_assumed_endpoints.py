"""The runbook against a platform that lacks every endpoint the public reference omits.

The platform emulator's ``undocumented_endpoints = "absent"`` answers 404 for workspace
creation, secrets, members, usage, listings, the booking-system connection and test
conversations. Onboarding must not crash and must not leave a step half done: each step
that needs one of them becomes a person's task with instructions; every other step is done.
"""

from __future__ import annotations

import pytest

from pmsgate.onboarding.report import RunReport

from .test_onboarding_e2e import OWN_TWO, outcome, statuses, world

pytestmark = pytest.mark.anyio

# The steps that need an undocumented endpoint: secrets, members, listings (the route).
PERSON_TASKS = {"custom-tools", "platform-admin", "route-choice"}


def tasks(report: RunReport) -> set[str]:
    """The steps recorded as a person's task because the platform has no API for them."""
    return {o.id for o in report.outcomes if o.evidence.get("person_task")}


async def test_steps_needing_undocumented_endpoints_become_person_tasks_and_a_rerun_changes_nothing(
    database_url, tmp_path
):
    async with world(database_url, tmp_path, OWN_TWO) as w:
        store = w.sandbox.assistant
        store.configure(undocumented_endpoints="absent")
        # The person's part of step 5: the workspace made in the dashboard (no API creates it).
        store.create_workspace(w.file.name, w.file.workspace.slug or "")

        first = await w.onboard()
        writes_before = w.assistant_writes()
        second = await w.onboard()
        writes_after = w.assistant_writes()

    done = statuses(first)
    assert first.status == "succeeded", (first.ended_at_step, first.message)
    assert tasks(first) == PERSON_TASKS, statuses(first)
    for step_id in tasks(first):
        task = outcome(first, step_id)
        assert task.status == "waiting"
        assert task.waiting_for and "pmsgate onboard confirm" in task.waiting_for
        assert task.evidence["record"]
    # The assistant is not live while a person still has those to do: no "live" message.
    message = outcome(first, "onboarding-message")
    assert message.status == "waiting" and message.evidence["message"] == "not sent"
    assert set(message.evidence["waiting_for_steps"]) == PERSON_TASKS
    others = [
        o
        for o in first.outcomes
        if o.id not in {*tasks(first), message.id} and o.kind != "manual" and o.status != "skipped"
    ]
    assert all(o.status == "done" for o in others), [
        (o.id, o.status, o.message) for o in others if o.status != "done"
    ]
    assert done["workspace"] == "done"
    # The tools are created by the machine even though their secrets are a person's task.
    assert outcome(first, "custom-tools").evidence["tools"]
    # Re-running repeats no write and changes no status.
    assert statuses(second) == done
    assert writes_after == writes_before
