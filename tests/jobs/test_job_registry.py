"""A scheduled job is one JobSpec in pmsgate.jobs.registry.JOB_SPECS (docs/extending.md).

Its interval comes from the spec (``PMSGATE_JOB_INTERVALS_S`` may override it), the four
older per-job settings still work for one release (deprecated, a warning logged), and an extra
spec is scheduled and run like the others.
"""

from __future__ import annotations

from typing import Any

import pytest

from pmsgate.config import Settings
from pmsgate.jobs.registry import JOB_SPECS, PER_PROCESS_JOBS
from pmsgate.jobs.scheduler import build_scheduler
from pmsgate.jobs.spec import JobSpec, check_specs
from pmsgate.web.context import WebServices
from tests.jobs.support import job_stack


def _spec(name: str) -> JobSpec:
    return next(spec for spec in JOB_SPECS if spec.name == name)


def test_every_job_has_its_default_interval() -> None:
    defaults = Settings()
    assert {spec.name: spec.interval_s(defaults) for spec in JOB_SPECS} == {
        "refresh-usage": 21600.0,
        "flush-gateway-usage": 60.0,
        "check-connections": 900.0,
        "restart-listings-syncs": 60.0,
        "check-registry": 3600.0,
        "notify-incidents": 60.0,
        "purge-audit-events": 86400.0,
        "purge-tool-calls": 3600.0,
        "record-key-expiry": 300.0,
        "deliver-webhooks": 15.0,
        "purge-webhook-deliveries": 3600.0,
    }
    for spec in JOB_SPECS:
        assert spec.variable() == f'PMSGATE_JOB_INTERVALS_S["{spec.name}"]'
    assert set(PER_PROCESS_JOBS) == {"flush-gateway-usage"}


def test_intervals_come_from_the_one_mapping(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PMSGATE_JOB_INTERVALS_S", '{"restart-listings-syncs": 30}')
    settings = Settings()
    assert _spec("restart-listings-syncs").interval_s(settings) == 30
    assert _spec("check-connections").interval_s(settings) == 900
    extra = JobSpec("tidy-up", default_interval_s=3600, run=_tidy_up, description="t")
    assert extra.interval_s(settings) == 3600
    assert extra.interval_s(Settings(job_intervals_s={"tidy-up": 120})) == 120
    assert extra.variable() == 'PMSGATE_JOB_INTERVALS_S["tidy-up"]'


@pytest.mark.parametrize(
    ("variable", "job"),
    [
        ("PMSGATE_USAGE_REFRESH_INTERVAL_S", "refresh-usage"),
        ("PMSGATE_USAGE_FLUSH_INTERVAL_S", "flush-gateway-usage"),
        ("PMSGATE_PMS_CHECK_INTERVAL_S", "check-connections"),
        ("PMSGATE_LISTINGS_SYNC_INTERVAL_S", "restart-listings-syncs"),
    ],
)
def test_the_deprecated_interval_settings_still_work_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, variable: str, job: str
) -> None:
    monkeypatch.setenv(variable, "300")
    with caplog.at_level("WARNING", logger="pmsgate.config"):
        settings = Settings()
    assert _spec(job).interval_s(settings) == 300
    [warning] = [r.getMessage() for r in caplog.records if r.name == "pmsgate.config"]
    assert variable in warning
    assert "deprecated" in warning
    assert f"PMSGATE_JOB_INTERVALS_S='{{\"{job}\": 300}}'" in warning


def test_the_mapping_wins_over_a_deprecated_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PMSGATE_PMS_CHECK_INTERVAL_S", "300")
    monkeypatch.setenv("PMSGATE_JOB_INTERVALS_S", '{"check-connections": 600}')
    assert _spec("check-connections").interval_s(Settings()) == 600


def test_a_job_declared_twice_or_badly_fails_at_once() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        check_specs([*JOB_SPECS, _spec("check-connections")])
    with pytest.raises(ValueError, match="positive interval"):
        JobSpec("tidy-up", default_interval_s=0, run=_tidy_up, description="")
    with pytest.raises(ValueError, match="kebab-case"):
        JobSpec("Tidy_Up", default_interval_s=60, run=_tidy_up, description="")


ran: list[str] = []


async def _tidy_up(web: WebServices) -> dict[str, Any]:
    ran.append(web.settings.redis_namespace)
    return {"tidied": len(ran)}


@pytest.mark.anyio
async def test_an_extra_job_spec_is_scheduled_at_its_interval_and_recorded(
    database_url: str,
) -> None:
    extra = JobSpec(
        "tidy-up", default_interval_s=1800, run=_tidy_up, description="Tidy up, for the test."
    )
    async with job_stack(database_url) as stack:
        scheduler = build_scheduler(
            stack.web, sleep=stack.enrolled.sleep, specs=[*JOB_SPECS, extra]
        )
        assert list(scheduler.jobs) == [*(spec.name for spec in JOB_SPECS), "tidy-up"]
        assert scheduler.jobs["tidy-up"].interval_s == 1800
        assert scheduler.jobs["tidy-up"].description == "Tidy up, for the test."
        run = await scheduler.run_once("tidy_up")
    assert run.status == "succeeded"
    assert run.detail == {"tidied": len(ran)}
