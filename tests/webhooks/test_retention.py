"""Old webhook events and their settled deliveries are purged (PMSGATE_WEBHOOK_RETENTION_DAYS),
on the injected clock; a pending delivery keeps its event until it is settled."""

from __future__ import annotations

import pytest

from pmsgate.jobs.registry import JOB_SPECS
from pmsgate.storage.webhooks import EVERY_OWNER
from pmsgate.webhooks.delivery import PURGE_WEBHOOK_DELIVERIES, purge_webhook_deliveries
from tests.webhooks.support import ADMIN, receiver, webhook_sandbox

pytestmark = pytest.mark.anyio

DAY_S = 86400


async def test_old_events_and_settled_deliveries_are_purged_after_the_retention(
    database_url: str,
) -> None:
    with receiver() as kept, receiver() as failing:
        async with webhook_sandbox(database_url, webhook_retention_days=2) as web:
            clock, deliverer, service = (
                web.enrolled.clock,
                web.web.webhook_deliverer,
                web.web.webhooks,
            )
            for hook in (kept, failing):
                await service.subscribe(
                    web.student_id, hook.url, ["facility.connection_lost"], actor=ADMIN
                )
            failing.statuses = [500]
            await web.gateway.facilities.mark_error(web.hotel_id, "refused")
            await deliverer.run()
            statuses = sorted(d.status for d in await service.deliveries(EVERY_OWNER))
            assert statuses == ["delivered", "pending"]

            clock.advance(2 * DAY_S)  # exactly the retention: nothing is old enough yet
            assert await purge_webhook_deliveries(deliverer) == {"events": 0, "deliveries": 0}

            clock.advance(1)
            # The delivered one goes; the pending one keeps itself and its event.
            assert await deliverer.purge() == {"events": 0, "deliveries": 1}
            [pending] = await service.deliveries(EVERY_OWNER)
            assert pending.status == "pending"

            await deliverer.run()  # due long ago: sent now, and delivered
            [settled] = await service.deliveries(EVERY_OWNER)
            assert settled.status == "delivered"
            await web.gateway.facilities.mark_connected(web.hotel_id)  # a new event: kept
            await deliverer.run()
            assert await deliverer.purge() == {"events": 1, "deliveries": 1}
            assert await service.deliveries(EVERY_OWNER) == []
            assert await deliverer.purge() == {"events": 0, "deliveries": 0}


def test_the_purge_is_a_scheduled_job() -> None:
    [spec] = [spec for spec in JOB_SPECS if spec.name == PURGE_WEBHOOK_DELIVERIES]
    assert spec.default_interval_s == 3600.0
    assert "PMSGATE_WEBHOOK_RETENTION_DAYS" in spec.description
