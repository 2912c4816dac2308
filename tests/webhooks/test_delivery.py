"""Events delivered to receivers on loopback: signed, retried with backoff on an injected
clock, disabled on 410, given up after the stated attempts, replayed, rotated with overlap;
each delivered once per subscription while both replicas' deliverers run."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import timedelta
from typing import Any

import anyio
import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from pmsgate.audit.actions import AuditAction
from pmsgate.gateway.usage import UsageHistory
from pmsgate.onboarding.records import OnboardingRecords
from pmsgate.storage.audit import AuditFilter
from pmsgate.storage.gateway_usage import HourCounts, hour_start
from pmsgate.storage.webhooks import EVERY_OWNER
from pmsgate.webhooks.delivery import WebhookDeliverer
from tests.web.support import WebSandbox
from tests.webhooks.support import ADMIN, receiver, replicas, webhook_sandbox

pytestmark = pytest.mark.anyio


async def audited(web: WebSandbox, action: AuditAction) -> list[Any]:
    return [e async for e in web.web.audit.export(AuditFilter(action_prefix=action.value))]


async def test_a_lost_connection_reaches_the_customer_and_the_team_signed(database_url: str):
    with receiver() as customer_hook, receiver() as team_hook:
        async with webhook_sandbox(database_url, real_time=True) as web:
            service = web.web.webhooks
            mine = await service.subscribe(
                web.student_id, customer_hook.url, ["facility.connection_lost"], actor=ADMIN
            )
            team = await service.subscribe(
                None, team_hook.url, ["facility.connection_lost"], actor=ADMIN
            )
            await web.gateway.facilities.mark_error(web.hotel_id, "password changed upstream")

            summary = await web.web.webhook_deliverer.run()

            assert summary["delivered"] == 2
            for hook, created in ((customer_hook, mine), (team_hook, team)):
                [request] = hook.requests
                payload = Webhook(created.secret).verify(request.body, request.headers)
                assert payload["type"] == "facility.connection_lost"
                assert payload["data"]["hotel_id"] == web.hotel_id
                assert payload["data"]["student_id"] == web.student_id
                assert request.headers["webhook-id"].startswith("msg_")
                # The same signature by the spec's recipe, with nothing but the stdlib.
                key = base64.b64decode(created.secret.removeprefix("whsec_"))
                signed = (
                    f"{request.headers['webhook-id']}.{request.headers['webhook-timestamp']}."
                ).encode() + request.body
                expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest())
                assert request.headers["webhook-signature"] == "v1," + expected.decode()
                with pytest.raises(WebhookVerificationError):  # another secret: refused
                    Webhook(mine.secret if created is team else team.secret).verify(
                        request.body, request.headers
                    )
            assert customer_hook.ids() == team_hook.ids()  # one event, one id

            # Restored: only subscribers of that event hear of it.
            await web.gateway.facilities.mark_connected(web.hotel_id)
            assert (await web.web.webhook_deliverer.run())["planned"] == 0


async def test_another_customers_events_reach_only_the_team(database_url: str):
    with receiver() as customer_hook, receiver() as team_hook:
        async with webhook_sandbox(database_url) as web:
            other = await web.second_customer()
            service = web.web.webhooks
            await service.subscribe(
                other, customer_hook.url, ["knowledge.sync_failed"], actor=ADMIN
            )
            await service.subscribe(None, team_hook.url, ["knowledge.sync_finished"], actor=ADMIN)
            await web.web.sync_jobs.run(web.student_id, commit=False)
            await web.web.webhook_deliverer.run()

            assert customer_hook.requests == []
            [request] = team_hook.requests
            body = json.loads(request.body)
            assert body["type"] == "knowledge.sync_finished"
            assert body["data"]["student_id"] == web.student_id


async def test_failures_are_retried_with_backoff_on_the_clock_and_given_up(database_url: str):
    with receiver() as hook:
        async with webhook_sandbox(database_url, webhook_max_attempts=3) as web:
            clock, deliverer = web.enrolled.clock, web.web.webhook_deliverer
            created = await web.web.webhooks.subscribe(
                web.student_id, hook.url, ["facility.connection_lost"], actor=ADMIN
            )
            hook.statuses = [500, 503, 502]
            await web.gateway.facilities.mark_error(web.hotel_id, "refused")

            first = clock.now()
            await deliverer.run()
            [delivery] = await web.web.webhooks.deliveries(web.student_id)
            assert (delivery.status, delivery.attempts, delivery.response_status) == (
                "pending",
                1,
                500,
            )
            assert delivery.last_error == "http_500"
            assert delivery.next_attempt_at == first + timedelta(seconds=30)

            clock.advance(29)  # not due yet: nothing is sent
            await deliverer.run()
            assert len(hook.requests) == 1

            clock.advance(1)
            await deliverer.run()
            [delivery] = await web.web.webhooks.deliveries(web.student_id)
            assert delivery.attempts == 2
            # The second wait is four times the first.
            assert delivery.next_attempt_at == clock.now() + timedelta(seconds=120)

            clock.advance(120)
            await deliverer.run()
            [delivery] = await web.web.webhooks.deliveries(web.student_id)
            assert (delivery.status, delivery.attempts, delivery.next_attempt_at) == (
                "failed",
                3,
                None,
            )
            assert len(hook.requests) == 3
            assert len(set(hook.ids())) == 1  # every attempt carries the event's id
            [gave_up] = await audited(web, AuditAction.WEBHOOK_GAVE_UP)
            assert gave_up.subject == f"webhook:{created.subscription.id}"

            clock.advance(86400)
            await deliverer.run()
            assert len(hook.requests) == 3  # given up: never sent again

            # Replay: sent again now, same webhook-id, from a first attempt.
            replayed = await web.web.webhooks.replay(delivery.id, web.student_id, actor=ADMIN)
            assert (replayed.status, replayed.attempts) == ("pending", 0)
            await deliverer.run()
            [delivery] = await web.web.webhooks.deliveries(web.student_id)
            assert (delivery.status, delivery.attempts, delivery.response_status) == (
                "delivered",
                1,
                204,
            )
            assert hook.ids() == [hook.ids()[0]] * 4
            assert len(await audited(web, AuditAction.WEBHOOK_REPLAYED)) == 1


async def test_a_410_disables_the_subscription(database_url: str):
    with receiver() as hook:
        async with webhook_sandbox(database_url) as web:
            service = web.web.webhooks
            created = await service.subscribe(
                web.student_id,
                hook.url,
                ["facility.connection_lost", "facility.connection_restored"],
                actor=ADMIN,
            )
            hook.statuses = [410]
            await web.gateway.facilities.mark_error(web.hotel_id, "refused")
            await web.web.webhook_deliverer.run()

            subscription = await service.get(created.subscription.id, web.student_id)
            assert (subscription.enabled, subscription.disabled_reason) == (False, "gone")
            [delivery] = await service.deliveries(web.student_id)
            assert (delivery.status, delivery.response_status) == ("disabled", 410)
            assert len(await audited(web, AuditAction.WEBHOOK_DISABLED)) == 1

            await web.gateway.facilities.mark_connected(web.hotel_id)  # no longer planned
            assert (await web.web.webhook_deliverer.run())["planned"] == 0
            assert len(hook.requests) == 1

            # Enabled again by a person: new events are sent (the missed one is not).
            await service.enable(created.subscription.id, web.student_id, actor=ADMIN)
            assert len(await audited(web, AuditAction.WEBHOOK_ENABLED)) == 1
            await web.gateway.facilities.mark_error(web.hotel_id, "refused again")
            assert (await web.web.webhook_deliverer.run())["delivered"] == 1
            assert json.loads(hook.requests[1].body)["type"] == "facility.connection_lost"


async def test_a_rotated_secret_signs_next_to_the_old_one_during_the_overlap(database_url: str):
    with receiver() as hook:
        async with webhook_sandbox(database_url, real_time=True) as web:
            clock, service = web.enrolled.clock, web.web.webhooks
            old = await service.subscribe(
                web.student_id,
                hook.url,
                ["facility.connection_lost", "facility.connection_restored"],
                actor=ADMIN,
            )
            new = await service.rotate(
                old.subscription.id, web.student_id, actor=ADMIN, overlap_s=120
            )
            assert new.secret != old.secret
            await web.gateway.facilities.mark_error(web.hotel_id, "refused")
            await web.web.webhook_deliverer.run()
            [during] = hook.requests
            assert len(during.headers["webhook-signature"].split(" ")) == 2
            for secret in (old.secret, new.secret):  # a receiver on either verifies
                Webhook(secret).verify(during.body, during.headers)

            clock.advance(121)  # the overlap is over: only the new secret signs
            await web.gateway.facilities.mark_connected(web.hotel_id)
            await web.web.webhook_deliverer.run()
            after = hook.requests[1]
            assert len(after.headers["webhook-signature"].split(" ")) == 1
            Webhook(new.secret).verify(after.body, after.headers)
            with pytest.raises(WebhookVerificationError):
                Webhook(old.secret).verify(after.body, after.headers)
            assert len(await audited(web, AuditAction.WEBHOOK_ROTATED)) == 1


async def test_both_replicas_deliver_each_event_once_per_subscription(database_url: str):
    events = 12
    with receiver() as first, receiver() as second:
        async with webhook_sandbox(database_url) as web:
            service = web.web.webhooks
            for owner, hook in ((web.student_id, first), (None, second)):
                await service.subscribe(owner, hook.url, ["onboarding.completed"], actor=ADMIN)
            onboarding = OnboardingRecords(web.web.customers.sessions, web.enrolled.clock)
            for _ in range(events):
                run = await onboarding.start_run(web.student_id, dry_run=False)
                await onboarding.finish_run(run.id, "succeeded", route="A")

            one, other = replicas(web)
            results: list[dict[str, Any]] = []

            async def tick(deliverer: WebhookDeliverer) -> None:
                results.append(await deliverer.run())

            async with anyio.create_task_group() as group:
                group.start_soon(tick, one)
                group.start_soon(tick, other)

            assert sorted(first.ids()) == sorted(set(first.ids()))
            assert len(first.ids()) == events and len(second.ids()) == events
            assert sorted(first.ids()) == sorted(second.ids())
            assert sum(int(r["delivered"]) for r in results) == 2 * events
            assert sum(int(r["planned"]) for r in results) == 2 * events
            statuses = {d.status for d in await service.deliveries(EVERY_OWNER)}
            assert statuses == {"delivered"}


async def test_a_spent_daily_budget_is_told_once_per_incident(database_url: str):
    with receiver() as hook:
        async with webhook_sandbox(database_url) as web:
            await web.web.webhooks.subscribe(
                web.student_id, hook.url, ["facility.budget_exhausted"], actor=ADMIN
            )
            now = web.enrolled.clock.now()
            await UsageHistory(web.web.customers.sessions).add(
                {(web.hotel_id, hour_start(now)): HourCounts(upstream_calls=5000)}
            )
            await web.web.incidents.reconcile()
            await web.web.incidents.reconcile()  # still spent: the same incident, no event
            await web.web.webhook_deliverer.run()

            [request] = hook.requests
            body = json.loads(request.body)
            assert body["type"] == "facility.budget_exhausted"
            assert body["data"]["hotel_id"] == web.hotel_id
            assert body["data"]["student_id"] == web.student_id
