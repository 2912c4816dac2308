"""Knowledge-sync jobs: background runs with status and progress, bounded waits, interruptions."""

from __future__ import annotations

import pytest

from pmsgate.errors import Conflict
from pmsgate.knowledge.records import KnowledgeSyncRecords
from pmsgate.knowledge.sync_jobs import SyncJobs, job_summary
from pmsgate.knowledge.sync_reports import SyncProgress
from tests.customers.support import EnrolledSandbox
from tests.knowledge.sync_support import knowledge_sync, managed_nodes, sync_sandbox

pytestmark = pytest.mark.anyio


def jobs_of(enrolled: EnrolledSandbox, **options: object) -> SyncJobs:
    sync = knowledge_sync(enrolled)
    return SyncJobs(sync, sync.repo, **options)


async def test_a_started_commit_runs_in_the_background_and_reports_counters_and_progress(
    database_url: str,
) -> None:
    async with sync_sandbox(database_url) as enrolled, jobs_of(enrolled) as jobs:
        job_id = await jobs.start(enrolled.student_id, commit=True)
        queued = await jobs.status(job_id)
        assert queued.status in ("queued", "running") and queued.kind == "commit"

        done = await jobs.wait(job_id)

        assert done.status == "succeeded"
        assert done.started_at is not None and done.finished_at is not None
        assert (done.progress_done, done.progress_total) == (4, 4)
        assert done.counters is not None
        assert done.counters["directoriesCreated"] == 3
        assert done.counters["created"] == len(await managed_nodes(enrolled))
        assert done.report is not None and len(done.report["details"]) == 4
        summary = job_summary(done)
        assert summary["status"] == "succeeded" and summary["commit"] is True
        assert summary["progress"] == {"done": 4, "total": 4}
        assert (await jobs.latest(enrolled.student_id)) == done


async def test_a_foreground_run_reports_progress_per_apartment_and_node(database_url: str) -> None:
    async with sync_sandbox(database_url) as enrolled, jobs_of(enrolled) as jobs:
        events: list[SyncProgress] = []
        job, report = await jobs.run(enrolled.student_id, commit=True, progress=events.append)
        assert job.status == "succeeded" and report is not None
        assert [e.apartments_done for e in events] == sorted(e.apartments_done for e in events)
        assert {e.apartments_done for e in events} == {0, 1, 2, 3, 4}
        nodes_done = [e.nodes_done for e in events]
        assert nodes_done == sorted(nodes_done) and nodes_done[-1] == report.counters()["created"]


async def test_run_sync_within_answers_the_counters_when_the_sync_is_quick(
    database_url: str,
) -> None:
    async with sync_sandbox(database_url) as enrolled, jobs_of(enrolled) as jobs:
        outcome = await jobs.run_sync_within(enrolled.student_id, commit=False)
        assert outcome.finished
        assert outcome.counters == {
            "apartments": 4,
            "unresolvedApartments": 0,
            "incompleteTemplates": 1,
            "failed": 0,
        }


async def test_run_sync_within_answers_a_job_to_poll_when_the_time_is_up(database_url: str) -> None:
    async with sync_sandbox(database_url) as enrolled, jobs_of(enrolled) as jobs:
        outcome = await jobs.run_sync_within(enrolled.student_id, commit=True, max_duration_s=0)
        assert not outcome.finished and outcome.counters is None
        assert outcome.job.status in ("queued", "running")

        # The job goes on after the call has answered: poll it to the end.
        done = await jobs.wait(outcome.job_id)
        assert done.status == "succeeded"
        assert done.counters is not None and done.counters["directoriesCreated"] == 3


async def test_a_second_sync_of_the_same_customer_is_refused_while_one_runs(
    database_url: str,
) -> None:
    async with sync_sandbox(database_url) as enrolled, jobs_of(enrolled) as jobs:
        first = await jobs.start(enrolled.student_id, commit=True)
        with pytest.raises(Conflict) as refused:
            await jobs.start(enrolled.student_id, commit=False)
        assert refused.value.code == "sync_already_running"
        assert first in refused.value.message
        await jobs.wait(first)
        second = await jobs.start(enrolled.student_id, commit=False)
        assert (await jobs.wait(second)).status == "succeeded"


async def test_a_job_left_running_by_a_stopped_process_is_marked_interrupted_and_can_be_rerun(
    database_url: str,
) -> None:
    async with sync_sandbox(database_url) as enrolled:
        repo = KnowledgeSyncRecords(enrolled.services.sessions, enrolled.clock)
        # What a process killed mid-sync leaves behind: a running job, its heartbeat ageing.
        await repo.create_job("deadbeef" * 4, enrolled.student_id, "commit", runner_id="gone")
        await repo.start_job("deadbeef" * 4)
        async with jobs_of(enrolled) as jobs:
            with pytest.raises(Conflict):
                await jobs.start(enrolled.student_id, commit=True)  # its heartbeat is fresh
        enrolled.clock.advance(300)

        async with jobs_of(enrolled) as jobs:  # the next start of the process recovers
            stale = await jobs.status("deadbeef" * 4)
            assert (stale.status, stale.error_code) == ("failed", "sync_interrupted")
            rerun = await jobs.start(enrolled.student_id, commit=True)
            assert (await jobs.wait(rerun)).status == "succeeded"


async def test_a_sync_that_cannot_run_fails_its_job_with_the_reason(database_url: str) -> None:
    async with (
        sync_sandbox(database_url, with_notion=False) as enrolled,
        jobs_of(enrolled) as jobs,
    ):
        outcome = await jobs.run_sync_within(enrolled.student_id, commit=False)
        assert outcome.finished and outcome.counters is None
        assert (outcome.job.status, outcome.job.error_code) == ("failed", "notes_not_connected")


async def test_jobs_still_running_at_shutdown_are_marked_cancelled(database_url: str) -> None:
    async with sync_sandbox(database_url) as enrolled:
        async with jobs_of(enrolled) as jobs:
            job_id = await jobs.start(enrolled.student_id, commit=True)
        job = await KnowledgeSyncRecords(enrolled.services.sessions).get_job(job_id)
        assert (job.status, job.error_code) == ("failed", "sync_cancelled")


async def test_a_cancelled_job_ends_failed_and_a_new_one_resumes_it(database_url: str) -> None:
    async with sync_sandbox(database_url) as enrolled, jobs_of(enrolled) as jobs:

        async def cancel_midway(event: SyncProgress) -> None:
            if event.nodes_done >= 30:
                active = await jobs.repo.active_job(enrolled.student_id)
                assert active is not None
                jobs.cancel(active.id)

        run = await jobs.run(enrolled.student_id, commit=True, progress=cancel_midway)
        assert run[1] is None
        assert (run[0].status, run[0].error_code) == ("failed", "sync_cancelled")
        assert not jobs.cancel(run[0].id)

        outcome = await jobs.run_sync_within(enrolled.student_id, commit=True)
        assert outcome.counters is not None and outcome.counters["failed"] == 0
        assert outcome.counters["unchanged"] >= 30
