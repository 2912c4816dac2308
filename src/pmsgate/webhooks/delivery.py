"""Delivering the outbox: each event to each subscription wanting it, once, with retries.

Every tick of the ``deliver-webhooks`` job (every replica may run it) first *fans out* the
new events — one pending delivery per enabled subscription asking for the event's type:
the customer's own and the team's — then *sends* the due deliveries. A delivery is sent by
the replica that claimed it (storage/webhooks.py: a conditional UPDATE setting a lease,
after ``FOR UPDATE SKIP LOCKED`` on PostgreSQL), so two replicas never send the same one;
its outcome is written only while that lease is held.

One attempt is one POST of the event's body with the ``webhook-id`` (the event's id, the
same on every attempt and replay), ``webhook-timestamp`` and ``webhook-signature`` headers,
waiting at most ``PMSGATE_WEBHOOK_TIMEOUT_S``, redirects not followed and the answer's body
never read:

- a 2xx answer: delivered;
- 410 Gone: the receiver is gone for good — the subscription is disabled (its pending
  deliveries too) and ``webhook.disabled`` audited;
- anything else (another status, a timeout, no connection): retried after
  ``PMSGATE_WEBHOOK_RETRY_BASE_S`` * 4^(attempts - 1), at most ``PMSGATE_WEBHOOK_RETRY_MAX_S``;
  after ``PMSGATE_WEBHOOK_MAX_ATTEMPTS`` attempts it is given up (``failed``,
  ``webhook.gave_up`` audited) and can be replayed.

A receiver that got an attempt whose outcome could not be recorded (the process stopped)
gets it again: receivers de-duplicate on ``webhook-id``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import anyio
import httpx
import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.audit.actions import Actor, AuditAction, Outcome
from pmsgate.audit.trail import AuditTrail
from pmsgate.clock import Clock
from pmsgate.config import Settings
from pmsgate.gateway.vault import VaultError
from pmsgate.storage.records import Records
from pmsgate.storage.webhooks import WebhookRepository
from pmsgate.version import build_info
from pmsgate.webhooks.events import event_body
from pmsgate.webhooks.service import WebhookService
from pmsgate.webhooks.signing import signed_headers

log = structlog.get_logger(__name__)

DELIVER_WEBHOOKS = "deliver-webhooks"
DELIVERER = Actor.job(DELIVER_WEBHOOKS)
PURGE_WEBHOOK_DELIVERIES = "purge-webhook-deliveries"
# Events planned per transaction, and deliveries sent at once per batch.
FAN_OUT_BATCH = 100
SEND_BATCH = 10
# Batches one tick sends at most (the next tick goes on).
MAX_BATCHES = 20
# The lease covers the request's timeout and this margin for recording its outcome.
LEASE_MARGIN_S = 30.0


def retry_delay(attempts: int, *, base_s: float, max_s: float) -> float:
    """Seconds to wait after the ``attempts``-th failed attempt: base * 4^(attempts - 1),
    at most ``max_s``."""
    return min(base_s * 4 ** max(0, attempts - 1), max_s)


# What one tick counts, in the order of its summary.
OUTCOMES = ("planned", "delivered", "retrying", "failed", "disabled", "lost_lease")


class DeliverySummary:
    """What one tick did (the job run's detail): a count per outcome, and per error code."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter(dict.fromkeys(OUTCOMES, 0))
        self.errors: Counter[str] = Counter()

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {**self.counts, "errors": dict(self.errors)}


@dataclass(frozen=True)
class _Answer:
    """One attempt's outcome: the receiver's status, or the error's code."""

    status: int | None
    error: str | None


class WebhookDeliverer(Records):
    """Fans the outbox out and sends due deliveries (one replica per delivery)."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        *,
        clock: Clock,
        settings: Settings,
        service: WebhookService,
        audit: AuditTrail,
        http: httpx.AsyncClient,
    ) -> None:
        super().__init__(sessions, clock)
        self._settings, self._service, self._audit, self._http = settings, service, audit, http

    def __repr__(self) -> str:
        return "WebhookDeliverer()"

    async def purge(self) -> dict[str, int]:
        """Remove the events older than PMSGATE_WEBHOOK_RETENTION_DAYS and their settled
        deliveries (a pending delivery and its event stay until settled)."""
        cutoff = self._clock.now() - timedelta(days=self._settings.webhook_retention_days)
        async with self._sessions.begin() as session:
            events, deliveries = await WebhookRepository(session).purge_before(cutoff)
        return {"events": events, "deliveries": deliveries}

    async def run(self) -> dict[str, Any]:
        """One tick: fan out the new events, then send what is due."""
        summary = DeliverySummary()
        summary.counts["planned"] = await self.fan_out()
        await self.send_due(summary)
        if summary.counts["delivered"] or summary.counts["failed"] or summary.counts["disabled"]:
            log.info("webhooks_delivered", **summary.as_dict())
        return summary.as_dict()

    async def fan_out(self) -> int:
        """One pending delivery per subscription wanting each new event; how many planned."""
        planned = 0
        while True:
            now = self._clock.now()
            async with self._sessions.begin() as session:
                repository = WebhookRepository(session)
                events = await repository.events_to_fan_out(FAN_OUT_BATCH)
                for event in events:
                    subscribers = await repository.subscribers(event.type, event.student_id)
                    planned += await repository.plan_deliveries(event.id, subscribers, now)
            if len(events) < FAN_OUT_BATCH:
                return planned

    async def send_due(self, summary: DeliverySummary | None = None) -> DeliverySummary:
        """Claim and send the due deliveries, a batch at a time."""
        summary = summary or DeliverySummary()
        for _ in range(MAX_BATCHES):
            now = self._clock.now()
            lease = now + timedelta(seconds=self._settings.webhook_timeout_s + LEASE_MARGIN_S)
            async with self._sessions.begin() as session:
                repository = WebhookRepository(session)
                claimed = [
                    delivery_id
                    for delivery_id in await repository.due_deliveries(now, SEND_BATCH)
                    if await repository.claim(delivery_id, now, lease)
                ]
            if not claimed:
                break
            async with anyio.create_task_group() as group:
                for delivery_id in claimed:
                    group.start_soon(self._attempt, delivery_id, lease, summary)
        return summary

    async def _attempt(self, delivery_id: int, lease: datetime, summary: DeliverySummary) -> None:
        """One attempt of a claimed delivery, and its outcome recorded under the lease."""
        now = self._clock.now()
        async with self._sessions() as session:
            repository = WebhookRepository(session)
            delivery = await repository.delivery(delivery_id)
            event = await repository.event(delivery.event_id) if delivery else None
            subscription = (
                await repository.subscription(delivery.subscription_id) if delivery else None
            )
            stored = await repository.secrets_of(delivery.subscription_id) if delivery else None
        if delivery is None or event is None or subscription is None or stored is None:
            return  # removed meanwhile (its deliveries went with it)
        if not subscription.enabled:
            await self._settle(
                delivery_id, lease, {"status": "disabled", "next_attempt_at": None}, now
            )
            summary.counts["disabled"] += 1
            return
        body = event_body(event)
        try:
            signing = self._service.signing_secrets(subscription.id, stored, now)
        except VaultError:  # a vault key went missing: nothing is sent, retried later
            answer = _Answer(None, "secret_unreadable")
        else:
            answer = await self._post(
                subscription.url, body, signed_headers(signing, event.id, now, body)
            )
        attempts = delivery.attempts + 1
        done = self._clock.now()
        values: dict[str, Any] = {
            "attempts": attempts,
            "last_attempt_at": now,
            "response_status": answer.status,
            "last_error": answer.error,
        }
        if answer.status is not None and 200 <= answer.status < 300:
            values.update(status="delivered", delivered_at=done, next_attempt_at=None)
            if await self._settle(delivery_id, lease, values, done):
                summary.counts["delivered"] += 1
            else:
                summary.counts["lost_lease"] += 1
            return
        code = answer.error or "unknown"
        summary.errors[code] += 1
        if answer.status == 410:
            values.update(status="disabled", next_attempt_at=None)
            if await self._settle(delivery_id, lease, values, done, disable=subscription.id):
                summary.counts["disabled"] += 1
            return
        if attempts >= self._settings.webhook_max_attempts:
            values.update(status="failed", next_attempt_at=None)
            if await self._settle(delivery_id, lease, values, done, gave_up=subscription.id):
                summary.counts["failed"] += 1
            return
        wait = retry_delay(
            attempts,
            base_s=self._settings.webhook_retry_base_s,
            max_s=self._settings.webhook_retry_max_s,
        )
        values["next_attempt_at"] = done + timedelta(seconds=wait)
        if await self._settle(delivery_id, lease, values, done):
            summary.counts["retrying"] += 1
        else:
            summary.counts["lost_lease"] += 1

    async def _post(self, url: str, body: str, headers: dict[str, str]) -> _Answer:
        """POST one attempt; the answer's status, or an error code (never its text)."""
        try:
            async with self._http.stream(
                "POST",
                url,
                content=body.encode(),
                headers={**headers, "user-agent": f"pmsgate-webhooks/{build_info().version}"},
                timeout=self._settings.webhook_timeout_s,
                follow_redirects=False,
            ) as response:
                status = response.status_code
        except httpx.TimeoutException:
            return _Answer(None, "timeout")
        except (httpx.HTTPError, httpx.InvalidURL):
            return _Answer(None, "connection_failed")
        return _Answer(status, None if 200 <= status < 300 else f"http_{status}")

    async def _settle(
        self,
        delivery_id: int,
        lease: datetime,
        values: dict[str, Any],
        now: datetime,
        *,
        disable: int | None = None,
        gave_up: int | None = None,
    ) -> bool:
        """Record the outcome while the lease is ours; disable or audit in the same transaction."""
        async with self._sessions.begin() as session:
            repository = WebhookRepository(session)
            if not await repository.settle(delivery_id, lease, {**values, "updated_at": now}):
                return False
            if disable is not None and await repository.disable_subscription(disable, "gone", now):
                await _audit_outcome(
                    self._audit,
                    session,
                    AuditAction.WEBHOOK_DISABLED,
                    disable,
                    {"reason": "gone", "delivery": delivery_id},
                )
            if gave_up is not None:
                await _audit_outcome(
                    self._audit,
                    session,
                    AuditAction.WEBHOOK_GAVE_UP,
                    gave_up,
                    {"delivery": delivery_id, "last_error": values.get("last_error")},
                )
        return True


async def _audit_outcome(
    audit: AuditTrail,
    session: AsyncSession,
    action: AuditAction,
    subscription_id: int,
    details: dict[str, Any],
) -> None:
    """A delivery's outcome that concerns its subscription, audited with the job as actor."""
    subscription = await WebhookRepository(session).subscription(subscription_id)
    await audit.record_in(
        session,
        action,
        actor=DELIVERER,
        subject=f"webhook:{subscription_id}",
        outcome=Outcome.FAILURE,
        details=details,
        student_id=subscription.student_id if subscription else None,
    )


async def deliver_webhooks(deliverer: WebhookDeliverer) -> dict[str, Any]:
    """The ``deliver-webhooks`` job: one tick of :meth:`WebhookDeliverer.run`."""
    return await deliverer.run()


async def purge_webhook_deliveries(deliverer: WebhookDeliverer) -> dict[str, Any]:
    """The ``purge-webhook-deliveries`` job: one tick of :meth:`WebhookDeliverer.purge`."""
    return await deliverer.purge()
