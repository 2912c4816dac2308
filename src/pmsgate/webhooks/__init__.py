"""Signed event webhooks (Standard Webhooks): subscriptions, signing and delivery.

signing.py (secrets ``whsec_…`` and the ``webhook-*`` headers), events.py (the event types
and the body a receiver gets), service.py (WebhookService: subscriptions of a customer or
of the team, rotation, the delivery log, replay; every change audited), delivery.py
(WebhookDeliverer: events fanned out to subscriptions, sent with retries and backoff, each
once per subscription across replicas; the ``deliver-webhooks`` job). The outbox rows are
written where the changes happen, in their transactions (storage/webhooks.py). See
docs/webhooks.md.
"""
