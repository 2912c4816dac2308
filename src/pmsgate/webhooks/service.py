"""Subscriptions, secrets, the delivery log and replay: what the console and the CLI do.

A subscription belongs to a customer (``student_id``) or to the team (``None``: it receives
every customer's events). Every call names the *scope* it acts in — a customer's
``student_id``, ``None`` for the team's own, or :data:`EVERY_OWNER` (an admin: any
subscription); a subscription outside the scope is ``webhook_not_found``, never "forbidden",
so a customer learns nothing of another's. The signing secret is returned once, by
:meth:`WebhookService.subscribe` and :meth:`WebhookService.rotate`, and stored only as vault
ciphertext bound to its row. Every change is an audit event in its transaction.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.audit.actions import Actor, AuditAction
from pmsgate.audit.trail import AuditTrail
from pmsgate.boundary import has_control_characters
from pmsgate.clock import Clock
from pmsgate.config import Settings, is_loopback_host
from pmsgate.customers.checks import customer_not_found, one_of
from pmsgate.errors import InvalidInput, NotFound
from pmsgate.gateway.vault import Vault
from pmsgate.storage.models import Ciphertext
from pmsgate.storage.records import Records
from pmsgate.storage.webhooks import (
    EVERY_OWNER,
    DeliveryView,
    SubscriptionSecrets,
    SubscriptionView,
    WebhookRepository,
    secret_context,
)
from pmsgate.webhooks.events import EVENT_TYPES
from pmsgate.webhooks.signing import new_secret

MAX_URL = 2000
MAX_DESCRIPTION = 200
DELIVERY_STATUSES = ("pending", "delivered", "failed", "disabled")

__all__ = ["EVERY_OWNER", "NewSecret", "WebhookService", "secret_context"]


@dataclass(frozen=True)
class NewSecret:
    """A subscription with its new secret: shown once, never stored in clear."""

    subscription: SubscriptionView
    secret: str

    def __repr__(self) -> str:  # the secret never reaches a log line or a traceback
        return f"NewSecret(subscription={self.subscription.id})"


# What a missing number is: its error code and what lists the numbers.
_NOT_FOUND = {
    "subscription": ("webhook_not_found", "subscriptions"),
    "delivery": ("webhook_delivery_not_found", "deliveries"),
}


def _not_found(kind: str, number: int) -> NotFound:
    code, listed = _NOT_FOUND[kind]
    return NotFound(
        f"There is no webhook {kind} {number}.",
        code=code,
        hint=f"List the {listed} to see their numbers.",
    )


def webhook_not_found(subscription_id: int) -> NotFound:
    """The subscription does not exist, or not in the caller's scope."""
    return _not_found("subscription", subscription_id)


def delivery_not_found(delivery_id: int) -> NotFound:
    """The delivery does not exist, or not in the caller's scope."""
    return _not_found("delivery", delivery_id)


def _invalid_url(message: str) -> InvalidInput:
    return InvalidInput(
        message,
        code="invalid_webhook_url",
        hint="Give the receiver's full https:// address, e.g. https://example.com/hooks/pmsgate.",
    )


def check_url(url: str, *, allow_loopback_http: bool) -> str:
    """The receiver's URL, checked: https (http only to a loopback host, when allowed), a
    host, no credentials, no fragment, not a private, link-local or loopback address."""
    url = url.strip()
    if not url or len(url) > MAX_URL or has_control_characters(url) or " " in url:
        raise _invalid_url(f"A webhook URL is one address of at most {MAX_URL} characters.")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  # a port out of range raises here
    except ValueError:
        raise _invalid_url("The webhook URL cannot be read as an address.") from None
    host = (parts.hostname or "").lower()
    if not host:
        raise _invalid_url("The webhook URL has no host.")
    if parts.username is not None or parts.password is not None:
        raise _invalid_url(
            "The webhook URL carries a user name or password; the signature authenticates "
            "each delivery instead."
        )
    if parts.fragment:
        raise _invalid_url("The webhook URL has a #fragment, which is never sent.")
    loopback = is_loopback_host(host)
    if parts.scheme == "http" and loopback and allow_loopback_http:
        return url
    if parts.scheme != "https":
        raise _invalid_url("The webhook URL must start with https://.")
    if loopback and not allow_loopback_http:
        raise _invalid_url("The webhook URL names this machine (a loopback address).")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return url  # a host name
    if not loopback and not address.is_global:
        raise _invalid_url("The webhook URL names a private or reserved address.")
    return url


def check_events(events: Sequence[str]) -> list[str]:
    """The chosen event types: at least one, each known, in the catalogue's order."""
    chosen = {event.strip() for event in events if event.strip()}
    unknown = sorted(chosen - set(EVENT_TYPES))
    if unknown or not chosen:
        raise InvalidInput(
            f"Unknown webhook events: {', '.join(unknown)}."
            if unknown
            else "Choose at least one event.",
            code="invalid_webhook_events",
            hint=f"Choose among: {', '.join(EVENT_TYPES)}.",
        )
    return [event for event in EVENT_TYPES if event in chosen]


def check_description(description: str) -> str:
    """An optional label of at most 200 characters, one line."""
    description = description.strip()
    if len(description) > MAX_DESCRIPTION or has_control_characters(description):
        raise InvalidInput(
            f"The description is one line of at most {MAX_DESCRIPTION} characters.",
            code="invalid_webhook_description",
            hint="Shorten it, or leave it empty.",
        )
    return description


def check_status(status: str) -> str:
    """One of the delivery statuses (a filter of the delivery log): invalid_webhook_status."""
    return one_of(status, DELIVERY_STATUSES, "webhook_status")


def _origin(url: str) -> str:
    """Scheme, host and port of a URL: what the audit trail keeps (a path or query may
    hold a token the receiver chose)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _subject(subscription_id: int) -> str:
    return f"webhook:{subscription_id}"


def _in_scope(subscription: SubscriptionView | None, scope: str | None) -> bool:
    return subscription is not None and (scope == EVERY_OWNER or subscription.student_id == scope)


class WebhookService(Records):
    """Subscriptions of customers and of the team, their secrets, deliveries and replays."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        *,
        clock: Clock,
        settings: Settings,
        vault: Vault,
        audit: AuditTrail,
    ) -> None:
        super().__init__(sessions, clock)
        self._settings, self._vault, self._audit = settings, vault, audit

    def __repr__(self) -> str:
        return "WebhookService()"

    # --- subscriptions ---------------------------------------------------------------------

    async def subscribe(
        self,
        owner: str | None,
        url: str,
        events: Sequence[str],
        *,
        actor: Actor,
        description: str = "",
    ) -> NewSecret:
        """A new subscription of a customer (``owner``) or of the team (None), its secret once."""
        url = check_url(url, allow_loopback_http=self._settings.webhook_allow_loopback_http)
        chosen = check_events(events)
        description = check_description(description)
        owner = owner.strip() if owner is not None else None
        secret = new_secret()
        now = self._clock.now()
        try:
            async with self._sessions.begin() as session:
                repository = WebhookRepository(session)
                subscription_id = await repository.add_subscription(
                    student_id=owner,
                    url=url,
                    description=description,
                    events=chosen,
                    created_by=str(actor),
                    now=now,
                )
                await repository.set_secrets(
                    subscription_id, self._seal(subscription_id, secret), previous=None, now=now
                )
                subscription = await repository.subscription(subscription_id)
                await self._audit.record_in(
                    session,
                    AuditAction.WEBHOOK_SUBSCRIBED,
                    actor=actor,
                    subject=_subject(subscription_id),
                    details={"url": _origin(url), "events": chosen, "owner": owner or "team"},
                    student_id=owner,
                )
        except IntegrityError:
            raise customer_not_found(owner or "") from None
        assert subscription is not None
        return NewSecret(subscription, secret)

    async def subscriptions(self, scope: str | None) -> list[SubscriptionView]:
        """The subscriptions of a customer, of the team (None), or all (:data:`EVERY_OWNER`)."""
        async with self._sessions() as session:
            return await WebhookRepository(session).subscriptions(scope)

    async def get(self, subscription_id: int, scope: str | None) -> SubscriptionView:
        """One subscription in ``scope``; ``webhook_not_found`` otherwise."""
        async with self._sessions() as session:
            return await self._require(session, subscription_id, scope)

    async def remove(self, subscription_id: int, scope: str | None, *, actor: Actor) -> None:
        """Delete a subscription and its deliveries (pending ones are never sent)."""
        await self._change(
            subscription_id, scope, actor, AuditAction.WEBHOOK_REMOVED, self._delete_subscription
        )

    @staticmethod
    async def _delete_subscription(repository: WebhookRepository, subscription_id: int) -> None:
        await repository.delete_subscription(subscription_id)

    async def _enable_subscription(
        self, repository: WebhookRepository, subscription_id: int
    ) -> None:
        await repository.enable_subscription(subscription_id, self._clock.now())

    async def _change(
        self,
        subscription_id: int,
        scope: str | None,
        actor: Actor,
        action: AuditAction,
        apply: Callable[[WebhookRepository, int], Awaitable[None]],
    ) -> None:
        """``apply`` to a subscription in ``scope``, audited as ``action`` in its transaction."""
        async with self._sessions.begin() as session:
            found = await self._require(session, subscription_id, scope)
            await apply(WebhookRepository(session), subscription_id)
            await self._audit.record_in(
                session,
                action,
                actor=actor,
                subject=_subject(subscription_id),
                details={"url": _origin(found.url)},
                student_id=found.student_id,
            )

    async def rotate(
        self,
        subscription_id: int,
        scope: str | None,
        *,
        actor: Actor,
        overlap_s: float | None = None,
    ) -> NewSecret:
        """A new secret; the previous one keeps signing next to it for ``overlap_s`` seconds
        (default ``PMSGATE_WEBHOOK_ROTATION_OVERLAP_S``; 0: at once replaced)."""
        overlap = self._settings.webhook_rotation_overlap_s if overlap_s is None else overlap_s
        if not 0 <= overlap <= 30 * 86400:
            raise InvalidInput(
                "The overlap is between 0 seconds and 30 days.",
                code="invalid_webhook_overlap",
                hint="Give the overlap in seconds, e.g. 86400 for a day.",
            )
        secret = new_secret()
        now = self._clock.now()
        async with self._sessions.begin() as session:
            await self._require(session, subscription_id, scope)
            repository = WebhookRepository(session)
            stored = await repository.secrets_of(subscription_id)
            assert stored is not None
            previous = None
            if overlap > 0:
                current = self._vault.decrypt(
                    stored.secret_enc, context=secret_context(subscription_id, "secret")
                )
                previous = (
                    self._vault.encrypt(
                        current, context=secret_context(subscription_id, "previous")
                    ),
                    now + timedelta(seconds=overlap),
                )
            await repository.set_secrets(
                subscription_id, self._seal(subscription_id, secret), previous=previous, now=now
            )
            subscription = await repository.subscription(subscription_id)
            assert subscription is not None
            await self._audit.record_in(
                session,
                AuditAction.WEBHOOK_ROTATED,
                actor=actor,
                subject=_subject(subscription_id),
                details={"overlap_s": overlap},
                student_id=subscription.student_id,
            )
        return NewSecret(subscription, secret)

    async def enable(self, subscription_id: int, scope: str | None, *, actor: Actor) -> None:
        """Enable a subscription a receiver's 410 (or a person) disabled; new events only."""
        await self._change(
            subscription_id, scope, actor, AuditAction.WEBHOOK_ENABLED, self._enable_subscription
        )

    # --- the delivery log ------------------------------------------------------------------

    async def deliveries(
        self,
        scope: str | None,
        *,
        subscription_id: int | None = None,
        status: str | None = None,
        limit: int = 100,
    ) -> list[DeliveryView]:
        """Deliveries of the subscriptions in ``scope``, newest first."""
        if status is not None:
            check_status(status)
        async with self._sessions() as session:
            if subscription_id is not None:
                await self._require(session, subscription_id, scope)
            return await WebhookRepository(session).deliveries(
                scope, subscription_id=subscription_id, status=status, limit=max(1, limit)
            )

    async def replay(self, delivery_id: int, scope: str | None, *, actor: Actor) -> DeliveryView:
        """Send a delivery again (same event, same ``webhook-id``) on the next tick."""
        now = self._clock.now()
        async with self._sessions.begin() as session:
            repository = WebhookRepository(session)
            found = await repository.delivery(delivery_id)
            if found is None or not (scope == EVERY_OWNER or found.student_id == scope):
                raise delivery_not_found(delivery_id)
            subscription = await repository.subscription(found.subscription_id)
            if subscription is None or not subscription.enabled:
                raise InvalidInput(
                    f"Webhook subscription {found.subscription_id} is disabled.",
                    code="webhook_disabled",
                    hint="Enable the subscription first, then replay.",
                )
            await repository.replay(delivery_id, now)
            await self._audit.record_in(
                session,
                AuditAction.WEBHOOK_REPLAYED,
                actor=actor,
                subject=_subject(found.subscription_id),
                details={"delivery": delivery_id, "event": found.event_id},
                student_id=found.student_id,
            )
            replayed = await repository.delivery(delivery_id)
        assert replayed is not None
        return replayed

    # --- secrets ---------------------------------------------------------------------------

    def signing_secrets(
        self, subscription_id: int, stored: SubscriptionSecrets, now: datetime
    ) -> list[str]:
        """The secrets that sign now: the current one, and the previous one until its end."""
        found = [
            self._vault.decrypt(
                stored.secret_enc, context=secret_context(subscription_id, "secret")
            )
        ]
        expires = stored.previous_secret_expires_at
        if stored.previous_secret_enc is not None and expires is not None and now < expires:
            found.append(
                self._vault.decrypt(
                    stored.previous_secret_enc,
                    context=secret_context(subscription_id, "previous"),
                )
            )
        return found

    def _seal(self, subscription_id: int, secret: str) -> Ciphertext:
        return self._vault.encrypt(secret, context=secret_context(subscription_id, "secret"))

    async def _require(
        self, session: AsyncSession, subscription_id: int, scope: str | None
    ) -> SubscriptionView:
        found = await WebhookRepository(session).subscription(subscription_id)
        if found is None or not _in_scope(found, scope):
            raise webhook_not_found(subscription_id)
        return found
