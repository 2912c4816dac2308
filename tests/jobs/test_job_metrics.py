"""Job runs in the metrics (docs/operations.md, What to watch): outcomes counted, the last
success and the interval exported, from the one place jobs run (the scheduler)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pmsgate.clock import ManualClock
from pmsgate.gateway.metrics import GatewayMetrics
from pmsgate.jobs.runs import JobRuns
from pmsgate.jobs.scheduler import Scheduler
from pmsgate.jobs.spec import Job
from tests.jobs.support import START, Flaky, ParkingSleep

pytestmark = pytest.mark.anyio


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


def sample(metrics: GatewayMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


async def test_runs_are_counted_by_outcome_and_the_last_success_is_exported(
    runs: JobRuns, clock: ManualClock
) -> None:
    metrics = GatewayMetrics()
    sleep = ParkingSleep(clock, allowed=2)
    scheduler = Scheduler([Job("flaky", 60, Flaky(failures=2))], clock, runs, sleep=sleep,
                          metrics=metrics)  # fmt: skip
    # Scheduled: both outcomes at 0 (so increase() works from the first failure), intervals.
    assert sample(metrics, "pmsgate_job_runs_total", scheduled_job="flaky", outcome="failed") == 0
    assert sample(metrics, "pmsgate_job_interval_seconds", scheduled_job="flaky") == 60
    assert (
        sample(metrics, "pmsgate_job_last_success_timestamp_seconds", scheduled_job="flaky") is None
    )
    async with scheduler:
        await sleep.parked.wait()
    # At once (failed), 09:01 (failed), 09:02 (succeeded).
    assert sample(metrics, "pmsgate_job_runs_total", scheduled_job="flaky", outcome="failed") == 2
    assert (
        sample(metrics, "pmsgate_job_runs_total", scheduled_job="flaky", outcome="succeeded") == 1
    )
    last = await runs.last_succeeded("flaky")
    assert last is not None
    assert (
        sample(metrics, "pmsgate_job_last_success_timestamp_seconds", scheduled_job="flaky")
        == last.started_at.timestamp()
        == datetime(2026, 11, 22, 9, 2, tzinfo=UTC).timestamp()
    )
    # run_once (the CLI's and the console's path) counts too.
    await scheduler.run_once("flaky")
    assert (
        sample(metrics, "pmsgate_job_runs_total", scheduled_job="flaky", outcome="succeeded") == 2
    )


async def test_a_restarted_process_exports_the_last_success_recorded_before_it(
    runs: JobRuns, clock: ManualClock
) -> None:
    before = Scheduler([Job("hourly", 3600, Flaky(0))], clock, runs)
    await before.run_once("hourly")  # a previous process, without metrics
    succeeded_at = clock.now().timestamp()
    clock.advance(60)
    metrics = GatewayMetrics()
    sleep = ParkingSleep(clock, allowed=0)  # no tick: the hour's run is already done
    async with Scheduler([Job("hourly", 3600, Flaky(0))], clock, runs, sleep=sleep,
                         metrics=metrics):  # fmt: skip
        await sleep.parked.wait()
    assert (
        sample(metrics, "pmsgate_job_runs_total", scheduled_job="hourly", outcome="succeeded") == 0
    )
    assert (
        sample(metrics, "pmsgate_job_last_success_timestamp_seconds", scheduled_job="hourly")
        == succeeded_at
    )
