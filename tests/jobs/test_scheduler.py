"""The scheduler: every tick recorded, failures retried on the next tick, jobs isolated."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
import structlog
import structlog.testing

from pmsgate.clock import ManualClock
from pmsgate.errors import PmsgateError
from pmsgate.jobs.runs import JobRuns
from pmsgate.jobs.scheduler import Scheduler, next_tick
from pmsgate.jobs.spec import Job, JobPartlyFailed, grid_start
from tests.jobs.support import START, Flaky, ParkingSleep, ParkingSleepEach, ticks_until_parked

pytestmark = pytest.mark.anyio


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


async def test_a_failing_job_is_recorded_failed_and_runs_again_on_the_next_tick_then_succeeds(
    runs: JobRuns, clock: ManualClock
) -> None:
    work = Flaky(failures=1)
    await ticks_until_parked([Job("flaky", 60, work)], clock, runs, 1)
    recorded = list(reversed(await runs.recent("flaky")))
    assert [r.status for r in recorded] == ["failed", "succeeded"]
    assert recorded[0].error_code == "upstream_unavailable"
    assert recorded[0].detail == {
        "error": {"code": "upstream_unavailable", "message": "The upstream was unavailable."}
    }
    assert recorded[1].detail == {"call": 2}
    assert recorded[1].started_at == datetime(2026, 11, 22, 9, 1, tzinfo=UTC)
    assert all(r.finished_at is not None for r in recorded)


async def test_ticks_fall_on_the_interval_grid_of_the_manual_clock(
    runs: JobRuns, clock: ManualClock
) -> None:
    work = Flaky(failures=0)
    sleep = await ticks_until_parked([Job("every-minute", 60, work)], clock, runs, 3)
    started = sorted(r.started_at for r in await runs.recent("every-minute"))
    # At once on start (never ran), then on the minute: 09:01, 09:02, 09:03.
    assert started == [
        START,
        datetime(2026, 11, 22, 9, 1, tzinfo=UTC),
        datetime(2026, 11, 22, 9, 2, tzinfo=UTC),
        datetime(2026, 11, 22, 9, 3, tzinfo=UTC),
    ]
    assert sleep.calls[:3] == [30.0, 60.0, 60.0]
    assert work.calls == 4


async def test_one_job_failing_does_not_stop_another(runs: JobRuns, clock: ManualClock) -> None:
    healthy = Flaky(failures=0)

    async def broken() -> dict[str, Any]:
        raise RuntimeError("connection to postgresql://app:hunter2@db failed")

    sleep = ParkingSleepEach(clock, allowed=2, jobs=2)
    jobs = [Job("broken", 60, broken), Job("healthy", 60, healthy)]
    with structlog.testing.capture_logs() as logs:
        async with Scheduler(jobs, clock, runs, sleep=sleep):
            await sleep.parked.wait()
    failures = [line for line in logs if line["event"] == "job_failed"]
    assert failures
    assert {line["code"] for line in failures} == {"unexpected_error"}
    assert "hunter2" not in str(logs)
    failed = await runs.recent("broken")
    assert len(failed) >= 2
    assert {r.status for r in failed} == {"failed"}
    assert {r.error_code for r in failed} == {"unexpected_error"}
    # The exception's text may hold a secret: only its type is recorded.
    assert all("hunter2" not in str(r.detail) for r in failed)
    assert failed[0].detail == {
        "error": {"code": "unexpected_error", "message": "The job raised RuntimeError."}
    }
    succeeded = await runs.recent("healthy")
    assert len(succeeded) >= 2
    assert {r.status for r in succeeded} == {"succeeded"}


async def test_a_partly_failed_job_keeps_its_summary_next_to_the_error(
    runs: JobRuns, clock: ManualClock
) -> None:
    async def partial() -> dict[str, Any]:
        raise JobPartlyFailed("1 of 2 failed.", {"done": ["a"], "failed": [{"id": "b"}]})

    run = await Scheduler([Job("partial", 60, partial)], clock, runs).run_once("partial")
    assert run.status == "failed"
    assert run.detail == {
        "done": ["a"],
        "failed": [{"id": "b"}],
        "error": {"code": "job_partly_failed", "message": "1 of 2 failed."},
    }


async def test_a_job_that_succeeded_in_the_current_interval_does_not_run_again_at_start(
    runs: JobRuns, clock: ManualClock
) -> None:
    work = Flaky(failures=0)
    scheduler = Scheduler([Job("hourly", 3600, work)], clock, runs)
    await scheduler.run_once("hourly")
    clock.advance(600)
    sleep = await ticks_until_parked([Job("hourly", 3600, work)], clock, runs, 0)
    assert work.calls == 1
    assert sleep.calls == [3600 - 630.0]  # until 10:00


async def test_a_job_that_last_failed_runs_at_start(runs: JobRuns, clock: ManualClock) -> None:
    work = Flaky(failures=1)
    await Scheduler([Job("hourly", 3600, work)], clock, runs).run_once("hourly")
    await ticks_until_parked([Job("hourly", 3600, work)], clock, runs, 0)
    assert [r.status for r in reversed(await runs.recent("hourly"))] == ["failed", "succeeded"]


async def test_a_job_stopped_mid_run_is_recorded_failed_as_cancelled(
    runs: JobRuns, clock: ManualClock
) -> None:
    started = anyio.Event()

    async def endless() -> dict[str, Any]:
        started.set()
        await anyio.sleep_forever()
        return {}

    scheduler = Scheduler(
        [Job("endless", 60, endless)], clock, runs, sleep=ParkingSleep(clock, 0), exit_grace_s=0
    )
    async with scheduler:
        await started.wait()
    [run] = await runs.recent("endless")
    assert run.status == "failed"
    assert run.error_code == "cancelled"


async def test_stopping_lets_a_tick_under_way_finish_instead_of_cutting_it(
    runs: JobRuns, clock: ManualClock
) -> None:
    started, release = anyio.Event(), anyio.Event()

    async def slow() -> dict[str, Any]:
        started.set()
        await release.wait()
        return {"finished": True}

    scheduler = Scheduler([Job("slow", 60, slow)], clock, runs, sleep=ParkingSleep(clock, 0))
    async with anyio.create_task_group() as group, scheduler:
        await started.wait()
        # The stop begins while the tick runs; the tick is let through, then recorded.
        group.start_soon(release_soon, release)
    [run] = await runs.recent("slow")
    assert (run.status, run.detail) == ("succeeded", {"finished": True})


async def release_soon(release: anyio.Event) -> None:
    """Let the slow job go once the scheduler is already stopping."""
    await anyio.lowlevel.checkpoint()
    release.set()


async def test_a_job_marked_to_run_at_exit_runs_once_more_when_the_scheduler_stops(
    runs: JobRuns, clock: ManualClock
) -> None:
    work = Flaky(failures=0)
    await ticks_until_parked([Job("flush", 60, work, run_at_exit=True)], clock, runs, 0)
    assert work.calls == 2  # at start, and at exit
    assert [r.status for r in await runs.recent("flush")] == ["succeeded", "succeeded"]


async def test_run_once_of_an_unknown_job_is_job_not_found_and_underscores_are_dashes(
    runs: JobRuns, clock: ManualClock
) -> None:
    scheduler = Scheduler([Job("refresh-usage", 60, Flaky(0))], clock, runs)
    with pytest.raises(PmsgateError) as raised:
        await scheduler.run_once("nope")
    assert raised.value.code == "job_not_found"
    assert (await scheduler.run_once("refresh_usage")).status == "succeeded"


async def test_runs_older_than_the_retention_are_pruned(runs: JobRuns, clock: ManualClock) -> None:
    scheduler = Scheduler([Job("daily", 86400, Flaky(0))], clock, runs)
    first = await scheduler.run_once("daily")
    clock.advance(15 * 86400)
    second = await scheduler.run_once("daily")
    assert [r.id for r in await runs.recent("daily")] == [second.id]
    assert first.id != second.id


async def test_latest_by_job_gives_each_job_its_newest_run(
    runs: JobRuns, clock: ManualClock
) -> None:
    scheduler = Scheduler([Job("a", 60, Flaky(0)), Job("b", 60, Flaky(1))], clock, runs)
    await scheduler.run_once("a")
    await scheduler.run_once("b")
    clock.advance(60)
    last_a = await scheduler.run_once("a")
    latest = await runs.latest_by_job()
    assert latest["a"].id == last_a.id
    assert latest["b"].status == "failed"


def test_the_grid_counts_from_the_epoch_so_six_hours_fall_on_00_06_12_18_utc() -> None:
    six_hours = 6 * 3600.0
    assert grid_start(START, six_hours) == datetime(2026, 11, 22, 6, tzinfo=UTC)
    assert next_tick(START, six_hours) == datetime(2026, 11, 22, 12, tzinfo=UTC)
    # A wake-up a hair early never runs the same tick twice.
    due = datetime(2026, 11, 22, 12, tzinfo=UTC)
    early = due - timedelta(microseconds=1)
    assert next_tick(early, six_hours, after=due) == due + timedelta(hours=6)
    with pytest.raises(ValueError):
        Job("bad", 0, Flaky(0))
