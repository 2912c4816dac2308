"""The notify-incidents tick reconciles the incidents first: opened with the notices of the
same tick, resolved on the tick after the recovery; the job run's detail says which."""

from __future__ import annotations

import pytest

from pmsgate.jobs.connections import check_facility
from pmsgate.jobs.notify import NOTIFY_INCIDENTS
from pmsgate.web.incident_views import IncidentQuery
from tests.jobs.support import job_stack

pytestmark = pytest.mark.anyio


async def test_the_tick_opens_the_incident_with_its_notices_and_resolves_it_after(
    database_url: str, tmp_path: object
) -> None:
    overrides = {"data_dir": tmp_path, "notify_team_email": "ops@platform.example"}
    async with job_stack(database_url, settings_overrides=overrides) as stack:
        stack.enrolled.sandbox.kross.change_password(stack.hotel_id, "changed-in-the-tick-23")
        assert (await check_facility(stack.gateway, stack.hotel_id))[0] == "now_in_error"

        run = await stack.run(NOTIFY_INCIDENTS)
        assert run.status == "succeeded", run.detail
        assert run.detail is not None
        assert run.detail["incidents"]["opened"] == [f"pms_error facility:{stack.hotel_id}"]
        [view] = await stack.web.incidents.listed(IncidentQuery(), "nobody@example.com")
        incident = await stack.web.incidents.get(view.record.id)
        assert [n.channel for n in incident.sent_notices] == ["customer", "team"]

        again = await stack.run(NOTIFY_INCIDENTS)
        assert again.detail is not None and again.detail["incidents"]["opened"] == []

        await stack.gateway.facilities.mark_connected(stack.hotel_id)
        stack.clock.advance(60)
        recovered = await stack.run(NOTIFY_INCIDENTS)
        assert recovered.detail is not None
        assert recovered.detail["incidents"]["resolved"] == [f"pms_error facility:{stack.hotel_id}"]
        assert (await stack.web.incidents.get(view.record.id)).state == "resolved"
