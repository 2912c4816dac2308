"""The audit trail's scheduled jobs (issue 14 item 3): key expiry recorded once, retention purge.

Both are JobSpecs of jobs/registry.py, run here as the scheduler runs them (their ``run`` on
the container's web services), on a ManualClock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest

from pmsgate.audit import Actor, AuditAction
from pmsgate.clock import ManualClock
from pmsgate.container import Container
from pmsgate.jobs.registry import JOB_SPECS
from pmsgate.jobs.spec import JobSpec
from pmsgate.sandbox.kross.store import KrossStore
from pmsgate.storage.audit import AuditFilter
from tests.support.facilities import container_with_facility, emulator_settings

pytestmark = pytest.mark.anyio


def _job(name: str) -> JobSpec:
    return next(spec for spec in JOB_SPECS if spec.name == name)


@pytest.fixture
async def container(
    database_url: str, kross_http: httpx.AsyncClient, kross_store: KrossStore, clock: ManualClock
) -> AsyncIterator[tuple[Container, str]]:
    settings = emulator_settings(database_url, kross_http, audit_retention_days=30)
    async with container_with_facility(settings, kross_http, kross_store, clock) as (
        opened,
        record,
    ):
        yield opened, record["hotel_id"]


async def test_a_key_past_its_expiry_is_recorded_expired_once(
    container: tuple[Container, str], clock: ManualClock
) -> None:
    opened, hotel_id = container
    facilities = opened.gateway.facilities
    soon, _ = await facilities.mint_key(
        hotel_id, "soon", scopes=["tools:read"], expires_at=clock.now() + timedelta(hours=1)
    )
    later, _ = await facilities.mint_key(
        hotel_id, "later", scopes=["tools:read"], expires_at=clock.now() + timedelta(days=3)
    )
    job = _job("record-key-expiry")

    assert await job.run(opened.web) == {"recorded": 0}
    clock.advance(3600)
    assert await job.run(opened.web) == {"recorded": 1}
    assert await job.run(opened.web) == {"recorded": 0}  # once per key, however often it runs
    clock.advance(3 * 24 * 3600)
    assert await job.run(opened.web) == {"recorded": 1}

    page = await opened.audit.page(AuditFilter(action_prefix="key.expired"))
    events = list(reversed(page.events))
    facility = await facilities.get(hotel_id)
    assert [e.subject for e in events] == [f"key:{soon.prefix}", f"key:{later.prefix}"]
    assert [e.details["key_id"] for e in events] == [soon.id, later.id]
    assert {(e.actor_kind, e.actor, e.facility_id) for e in events} == {
        ("job", "record-key-expiry", facility.id)
    }


async def test_the_purge_job_removes_events_past_the_retention_and_records_itself(
    container: tuple[Container, str], clock: ManualClock
) -> None:
    opened, hotel_id = container
    audit = opened.audit
    await audit.record(
        AuditAction.ADMIN_ACTION, actor=Actor.cli("test"), subject="old", hotel_id=hotel_id
    )
    clock.advance(31 * 24 * 3600)
    await audit.record(AuditAction.ADMIN_ACTION, actor=Actor.cli("test"), subject="recent")

    summary = await _job("purge-audit-events").run(opened.web)

    assert summary is not None and summary["retention_days"] == 30
    assert summary["removed"] >= 1
    subjects = [e.subject for e in (await audit.page(AuditFilter(), limit=500)).events]
    assert "old" not in subjects and "recent" in subjects
    assert "audit_events" in subjects  # the purge's own audit.purged event
    assert _job("purge-audit-events").default_interval_s == 86400
