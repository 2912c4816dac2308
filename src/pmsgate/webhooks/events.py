"""The events a subscription may ask for, and the body each delivery carries.

A body is the Standard Webhooks payload: ``{"type", "timestamp", "data"}`` — the type, when
it happened (ISO 8601, UTC) and its data (identifiers and states: a hotel id, a job id, a
status; never a secret nor a guest's data), with ``student_id`` naming the customer when
the event has one. Every attempt of an event sends the same bytes; the ``webhook-id``
header (the event's ``msg_…`` id) is what a receiver de-duplicates on.
"""

from __future__ import annotations

import json
from typing import get_args

from pmsgate.i18n import N_
from pmsgate.storage.models import WebhookEventType
from pmsgate.storage.webhooks import EventView

EVENT_TYPES: tuple[str, ...] = get_args(WebhookEventType)

# What each event means, in the words of the console (translated where shown).
EVENT_WORDS: dict[str, str] = {
    "facility.connection_lost": N_("The booking-system connection was lost"),
    "facility.connection_restored": N_("The booking-system connection works again"),
    "facility.budget_exhausted": N_("The daily budget of booking-system requests is spent"),
    "knowledge.sync_finished": N_("A knowledge sync finished"),
    "knowledge.sync_failed": N_("A knowledge sync failed"),
    "onboarding.completed": N_("The onboarding was completed"),
}


def event_body(event: EventView) -> str:
    """The JSON body of every delivery of ``event`` (compact, keys in a stable order)."""
    data = dict(event.payload)
    if event.student_id is not None:
        data.setdefault("student_id", event.student_id)
    body = {
        "type": event.type,
        "timestamp": event.occurred_at.isoformat().replace("+00:00", "Z"),
        "data": data,
    }
    return json.dumps(body, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
