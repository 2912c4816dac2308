"""Incidents as objects: opened, counted, resolved and acted on, through the real services.

The booking-system password changes in the emulator, the connection check puts the facility
in ``error`` and the ``notify-incidents`` tick reconciles: one incident opens, linked to the
notices of the same tick. Time is the sandbox's ManualClock; nothing sleeps. The sandbox
holds two containers over one database (the enrolled one and the web app's): two replicas.
"""

from __future__ import annotations

import email.policy
from collections.abc import AsyncIterator
from email.parser import BytesParser
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import SecretStr

from pmsgate.audit.actions import Actor
from pmsgate.errors import PmsgateError
from pmsgate.gateway.limiter import Priority
from pmsgate.jobs.connections import check_facility
from pmsgate.jobs.notify import notify_incidents
from pmsgate.storage.audit import AuditFilter
from pmsgate.storage.job_runs import JobRunRepository
from pmsgate.web.incident_views import IncidentQuery, IncidentView
from tests.conftest import database_url as database_url  # both databases: see conftest.py
from tests.customers.support import profile_of
from tests.web.support import WebSandbox, web_sandbox

pytestmark = pytest.mark.anyio

TEAM = "ops@platform.example"
ADMIN = Actor.admin("lead@platform.example")
NEW_PASSWORD = "changed-by-the-customer-23"


@pytest.fixture
async def sandbox(database_url: str, tmp_path: Path) -> AsyncIterator[WebSandbox]:
    overrides = {
        "data_dir": tmp_path,
        "notify_team_email": TEAM,
        "public_url": "https://console.example.com",
    }
    async with web_sandbox(database_url, settings_overrides=overrides) as web:
        yield web


async def _break(s: WebSandbox) -> None:
    s.enrolled.sandbox.kross.change_password(s.hotel_id, NEW_PASSWORD)
    outcome, _ = await check_facility(s.gateway, s.hotel_id)
    assert outcome == "now_in_error"


async def _active(s: WebSandbox) -> list[IncidentView]:
    return await s.web.incidents.listed(IncidentQuery(), "nobody@example.com")


async def _only(s: WebSandbox) -> IncidentView:
    [view] = await _active(s)
    return await s.web.incidents.get(view.record.id)


async def _audit(s: WebSandbox, prefix: str) -> list[Any]:
    page = await s.web.audit.page(AuditFilter(action_prefix=prefix), limit=200)
    return list(page.events)


async def test_an_error_opens_one_incident_that_counts_attempts_and_resolves_on_recovery(
    sandbox: WebSandbox,
) -> None:
    s = sandbox
    assert await _active(s) == []
    await _break(s)
    await notify_incidents(s.web)

    view = await _only(s)
    assert (view.record.kind, view.state, view.record.failures) == ("pms_error", "open", 1)
    assert view.record.hotel_id == s.hotel_id and view.record.student_id == s.student_id
    # The notices of the tick are the incident's (read from incident_notices, not copied).
    assert sorted(n.channel for n in view.sent_notices) == ["customer", "team"]
    assert view.customer_told_at is not None and view.team_told_at is not None
    assert view.timeline()[0].kind == "opened"
    first_seen = view.record.first_seen

    # An hour on, the gateway's re-authentication is refused again: one more failed attempt.
    s.enrolled.clock.advance(3600)
    with pytest.raises(PmsgateError) as refused:
        await s.gateway.gateway.read(
            await s.gateway.facilities.get(s.hotel_id),
            "reservations/get-list",
            {"limit": 1},
            priority=Priority.INTERACTIVE,
        )
    assert refused.value.code == "pms_auth_failed"
    await notify_incidents(s.web)
    await notify_incidents(s.web)  # the same attempt seen twice counts once
    view = await _only(s)
    assert view.record.failures == 2
    assert view.record.last_seen > first_seen
    assert view.age_words == "in error for 1 h"

    # Reconnected: resolved, with a "recovered" line; it leaves the active list.
    await s.gateway.facilities.mark_connected(s.hotel_id)
    await notify_incidents(s.web)
    resolved = await s.web.incidents.get(view.record.id)
    assert resolved.state == "resolved"
    assert resolved.timeline()[-1].kind in ("recovered", "notice")
    assert "recovered" in [line.kind for line in resolved.timeline()]
    assert await _active(s) == []

    # It recurs: a new incident, the old one stays resolved.
    s.enrolled.clock.advance(60)
    await s.gateway.facilities.mark_error(s.hotel_id, "refused again")
    await notify_incidents(s.web)
    again = await _only(s)
    assert again.record.id != view.record.id
    assert (await s.web.incidents.get(view.record.id)).state == "resolved"
    opened = await _audit(s, "incident.opened")
    assert len(opened) == 2
    assert len(await _audit(s, "incident.resolved")) == 1


async def test_two_replicas_reconciling_open_one_incident(sandbox: WebSandbox) -> None:
    s = sandbox
    replicas = [s.web.incidents, s.enrolled.container.web.incidents]
    await _break(s)
    if s.web.settings.database_url.startswith("postgresql"):
        async with anyio.create_task_group() as group:
            for replica in replicas * 2:
                group.start_soon(replica.reconcile)
    else:  # SQLite has one writer: the replicas take turns
        for replica in replicas * 2:
            await replica.reconcile()
    [view] = await _active(s)
    assert [line.kind for line in (await s.web.incidents.get(view.record.id)).timeline()] == [
        "opened"
    ]
    await s.gateway.facilities.mark_connected(s.hotel_id)
    for replica in replicas:
        await replica.reconcile()
    resolved = await s.web.incidents.get(view.record.id)
    assert [line.kind for line in resolved.timeline()] == ["opened", "recovered"]
    assert len(await _audit(s, "incident.resolved")) == 1


async def test_a_snoozed_incident_wakes_up_when_its_time_passes(sandbox: WebSandbox) -> None:
    s = sandbox
    await _break(s)
    await s.web.incidents.reconcile()
    incident_id = (await _only(s)).record.id
    service = s.web.incidents
    await service.snooze(incident_id, service.snooze_until("4h"), actor=ADMIN)
    snoozed = await service.get(incident_id)
    assert snoozed.state == "snoozed" and snoozed.state_words.startswith("snoozed until")
    assert await service.listed(IncidentQuery(state="open"), "x") == []

    s.enrolled.clock.advance(4 * 3600 + 1)
    summary = await service.reconcile()
    assert summary.woke == [str(incident_id)]
    woke = await service.get(incident_id)
    assert woke.state == "open"
    assert [line.kind for line in woke.timeline()][-1] == "woke"
    with pytest.raises(PmsgateError) as refused:
        service.snooze_until("date", "2020-01-01")
    assert refused.value.code == "invalid_snooze"


async def test_the_teams_actions_are_in_the_timeline_and_audited(sandbox: WebSandbox) -> None:
    s = sandbox
    service = s.web.incidents
    lead, _ = await s.add_user("admin", email="lead@platform.example")
    await _break(s)
    await notify_incidents(s.web)
    incident_id = (await _only(s)).record.id

    assert await service.acknowledge(incident_id, actor=ADMIN)
    assert not await service.acknowledge(incident_id, actor=ADMIN)  # once is enough
    await service.assign(incident_id, lead, actor=ADMIN)
    with pytest.raises(PmsgateError) as unknown:
        await service.assign(incident_id, "stranger@example.com", actor=ADMIN)
    assert unknown.value.code == "unknown_assignee"
    await service.add_note(incident_id, "Called the owner: new password tonight.", actor=ADMIN)

    # Check now, still refused: the attempt counts, the facility stays in error.
    s.enrolled.clock.advance(60)
    assert await service.check_now(incident_id, actor=ADMIN) == "refused"
    refused = await service.get(incident_id)
    assert refused.record.failures == 2
    assert refused.state_words == "acknowledged by lead@platform.example"
    assert refused.record.assignee_email == lead

    # Resend: the customer has no console password yet, so the invitation goes.
    assert await service.resend_link(incident_id, actor=ADMIN) == "invitation"
    # With a password: the one-time sign-in link to the reconnect form, as the notice.
    owner = profile_of(s.enrolled.facility).email
    await s.web.users.set_password(owner, SecretStr("a customer password 23"))
    assert await service.resend_link(incident_id, actor=ADMIN) == "sign-in link"
    outbox = s.web.settings.data_dir / "outbox"
    resent = list(outbox.glob("incident-*.resent.*.eml"))
    assert len(resent) == 1
    with resent[0].open("rb") as handle:
        message = BytesParser(policy=email.policy.default).parse(handle)
    assert message["To"] == owner
    assert "/login/link/" in message.get_body(preferencelist=("plain",)).get_content()  # type: ignore[union-attr]

    # Check now after the customer's password is back: connected, and the incident resolves.
    s.enrolled.sandbox.kross.change_password(s.hotel_id, str(s.enrolled.facility["password"]))
    assert await service.check_now(incident_id, actor=ADMIN) == "connected"
    assert (await s.gateway.facilities.get(s.hotel_id)).status == "connected"
    done = await service.get(incident_id)
    assert done.state == "resolved"
    kinds = [line.kind for line in done.timeline() if line.kind != "notice"]
    assert kinds == [
        "opened",
        "acknowledged",
        "assigned",
        "note",
        "check",
        "link_resent",
        "link_resent",
        "check",
        "recovered",
    ]
    [note] = [line for line in done.timeline() if line.kind == "note"]
    assert note.note == "Called the owner: new password tonight." and note.actor == ADMIN.name
    actions = sorted(e.action for e in await _audit(s, "incident.") if e.actor == ADMIN.name)
    assert actions == sorted(
        [
            "incident.acknowledged",
            "incident.assigned",
            "incident.note_added",
            "incident.checked",
            "incident.checked",
            "incident.link_resent",
            "incident.link_resent",
        ]
    )
    # A note's words stay in the timeline, never in the trail.
    for event in await _audit(s, "incident.note_added"):
        assert "Called the owner" not in str(event.details)


async def test_a_job_that_keeps_failing_opens_an_incident_until_a_run_succeeds(
    sandbox: WebSandbox,
) -> None:
    s = sandbox
    sessions = s.web.customers.sessions

    async def run(status: str) -> None:
        async with sessions.begin() as session:
            runs = JobRunRepository(session)
            started = await runs.start("refresh-usage", s.enrolled.clock.now())
            await runs.finish(
                started.id, status, s.enrolled.clock.now(), {"error": {"code": "boom"}}
            )
        s.enrolled.clock.advance(60)

    await run("failed")
    await s.web.incidents.reconcile()
    assert await _active(s) == []  # one failure is retried on the next tick
    await run("failed")
    await s.web.incidents.reconcile()
    [view] = await _active(s)
    assert (view.record.kind, view.record.job, view.record.failures) == (
        "job_failing",
        "refresh-usage",
        1,
    )
    await run("failed")
    await s.web.incidents.reconcile()
    assert (await s.web.incidents.get(view.record.id)).record.failures == 2
    await run("succeeded")
    await s.web.incidents.reconcile()
    assert (await s.web.incidents.get(view.record.id)).state == "resolved"
