"""A scheduled job is one JobSpec in pmsgate.jobs.registry.JOB_SPECS (docs/extending.md).

Its interval comes from the spec (``PMSGATE_JOB_INTERVALS_S`` may override it), the four
jobs' own settings keep working, and an extra spec is scheduled and run like the others.
"""

from __future__ import annotations

from typing import Any

import pytest

from pmsgate.config import Settings
from pmsgate.jobs.registry import JOB_SPECS, PER_PROCESS_JOBS
from pmsgate.jobs.scheduler import JobSpec, build_scheduler, check_specs
from pmsgate.web.context import WebServices
from tests.jobs.support import job_stack


def _spec(name: str) -> JobSpec:
    return next(spec for spec in JOB_SPECS if spec.name == name)


def test_the_four_jobs_keep_their_settings_and_defaults() -> None:
    defaults = Settings()
    assert {spec.name: spec.interval_s(defaults) for spec in JOB_SPECS} == {
        "refresh-usage": 21600.0,
        "flush-gateway-usage": 60.0,
        "check-connections": 900.0,
        "restart-listings-syncs": 60.0,
        # Later jobs have no setting of their own (PMSGATE_JOB_INTERVALS_S).
        "check-registry": 3600.0,
        "notify-incidents": 60.0,
        "purge-audit-events": 86400.0,
        "purge-tool-calls": 3600.0,
        "record-key-expiry": 300.0,
    }
    # Each default is the one its old setting has: one value, written twice only for them.
    for spec in JOB_SPECS:
        if spec.name in (
            "check-registry",
            "notify-incidents",
            "purge-audit-events",
            "purge-tool-calls",
            "record-key-expiry",
        ):
            assert spec.setting is None
            continue
        assert spec.setting is not None
        assert spec.default_interval_s == Settings.model_fields[spec.setting].default
    assert set(PER_PROCESS_JOBS) == {"flush-gateway-usage"}


def test_intervals_come_from_the_old_variables_or_the_one_mapping(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PMSGATE_PMS_CHECK_INTERVAL_S", "300")
    monkeypatch.setenv("PMSGATE_JOB_INTERVALS_S", '{"restart-listings-syncs": 30}')
    settings = Settings()
    assert _spec("check-connections").interval_s(settings) == 300
    assert _spec("restart-listings-syncs").interval_s(settings) == 30
    extra = JobSpec("tidy-up", default_interval_s=3600, run=_tidy_up, description="t")
    assert extra.interval_s(settings) == 3600
    assert extra.interval_s(Settings(job_intervals_s={"tidy-up": 120})) == 120
    assert extra.variable() == 'PMSGATE_JOB_INTERVALS_S["tidy-up"]'
    assert _spec("check-connections").variable() == "PMSGATE_PMS_CHECK_INTERVAL_S"


def test_a_job_declared_twice_or_badly_fails_at_once() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        check_specs([*JOB_SPECS, _spec("check-connections")])
    with pytest.raises(ValueError, match="no setting"):
        JobSpec("tidy-up", default_interval_s=60, run=_tidy_up, description="", setting="nope")
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
