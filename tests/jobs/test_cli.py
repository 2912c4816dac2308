"""`pmsgate jobs …` through the real command line, on an enrolled in-process sandbox.

The CLI opens its own services from the environment; its httpx clients reach the
sandbox's ASGI app through the ``jobs.cli.upstreams`` seam, with the sandbox's
ManualClock and a sleep that moves it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from pmsgate.cli import jobs as jobs_cli
from tests.cli_support import CliRecorder
from tests.customers.support import EnrolledSandbox, enrolled_sandbox
from tests.jobs.support import add_a_customer_whose_workspace_is_gone
from tests.support.cli import cli_on_sandbox

pytestmark = pytest.mark.anyio


class Cli(CliRecorder):
    """The enrolled sandbox and a way to run `pmsgate` on it."""

    def __init__(self, enrolled: EnrolledSandbox, monkeypatch: pytest.MonkeyPatch) -> None:
        super().__init__()
        self.enrolled = enrolled
        self.monkeypatch = monkeypatch


@pytest.fixture
async def cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Cli]:
    async with enrolled_sandbox(database_url) as enrolled:
        with cli_on_sandbox(monkeypatch, enrolled, jobs_cli):
            yield Cli(enrolled, monkeypatch)


async def test_refresh_usage_records_every_customer_and_exits_0(cli: Cli) -> None:
    body = await cli.json("jobs", "refresh-usage")
    assert body["job"] == "refresh-usage"
    assert body["status"] == "succeeded"
    assert body["detail"]["recorded"] == [cli.enrolled.student_id]
    assert body["detail"]["taken_at"] == "2026-11-22T06:00:00+00:00"
    snapshots = await cli.enrolled.services.usage.series(cli.enrolled.student_id)
    assert [s.kind for s in snapshots] == ["periodic"]
    # Run again in the same slot (cron and the server both ran it): nothing is added.
    again = await cli.json("jobs", "refresh-usage")
    assert again["detail"]["already_recorded"] == [cli.enrolled.student_id]
    assert len(await cli.enrolled.services.usage.series(cli.enrolled.student_id)) == 1


async def test_refresh_usage_exits_1_when_some_customer_failed(cli: Cli) -> None:
    services = cli.enrolled.services
    await add_a_customer_whose_workspace_is_gone(services)
    result = await cli.run("jobs", "refresh-usage")
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert "job refresh-usage failed" in result.stdout
    assert "stu-000-gone" in result.stdout
    assert "error job_partly_failed:" in result.stderr
    assert len(await services.usage.series(cli.enrolled.student_id)) == 1


async def test_refresh_usage_exits_2_when_it_cannot_run(cli: Cli) -> None:
    cli.monkeypatch.delenv("PMSGATE_ASSISTANT_API_TOKEN")
    result = await cli.run("jobs", "refresh-usage")
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert "error platform_not_configured:" in result.stderr


async def test_run_runs_any_job_and_list_shows_its_last_run(cli: Cli) -> None:
    body = await cli.json("jobs", "run", "check-connections")
    assert body["status"] == "succeeded"
    assert body["detail"]["ok"] == [cli.enrolled.hotel_id]

    listing = await cli.json("jobs", "list")
    jobs = {job["job"]: job for job in listing["jobs"]}
    assert list(jobs) == [
        "refresh-usage",
        "flush-gateway-usage",
        "check-connections",
        "restart-listings-syncs",
        "check-registry",
        "notify-incidents",
        "purge-audit-events",
        "purge-tool-calls",
        "deliver-webhooks",
        "purge-webhook-deliveries",
        "record-key-expiry",
    ]
    assert jobs["refresh-usage"]["interval_s"] == 21600
    assert jobs["refresh-usage"]["setting"] == 'PMSGATE_JOB_INTERVALS_S["refresh-usage"]'
    assert jobs["refresh-usage"]["last_run"] is None
    assert jobs["check-connections"]["last_run"]["status"] == "succeeded"

    table = await cli.run("jobs", "list")
    assert table.exit_code == 0, table.stderr
    assert "check-connections" in table.stdout
    assert "never" in table.stdout
    assert "6 h" in table.stdout
    assert "succeeded" in table.stdout


async def test_run_of_an_unknown_job_exits_2_with_job_not_found(cli: Cli) -> None:
    result = await cli.run("jobs", "run", "make-coffee")
    assert result.exit_code == 2
    assert "error job_not_found:" in result.stderr
    assert "hint:" in result.stderr


async def test_no_secret_is_printed(cli: Cli) -> None:
    await cli.run("jobs", "run", "check-connections")
    await cli.run("jobs", "refresh-usage")
    await cli.run("jobs", "list")
    printed = "\n".join(cli.printed)
    settings = cli.enrolled.settings
    assert settings.assistant_api_token is not None
    assert settings.assistant_api_token.get_secret_value() not in printed
    assert str(cli.enrolled.facility["password"]) not in printed
