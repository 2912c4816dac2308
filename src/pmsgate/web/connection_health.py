"""A facility's connection health, as the admin customer page's panel shows it.

Modelled on an integration platform's connection health / last-sync status: is the
connection good now, since when, what happened to it, when did it last work, and how much of
its booking-system budget is spent. Every fact comes from where it is already kept — nothing
is copied into a table of its own:

- **status history**: the audit trail's ``facility.status_changed`` events (from → to, the
  cause and the booking system's reason), newest first;
- **last successful and failed booking-system request**: ``upstream_health``, written by the
  gateway on the usage-flush tick (so up to a minute behind);
- **last token**: when the current token was obtained and until when it is valid
  (``facility_tokens``; never the token);
- **calls and errors** over the last 24 hours and 7 days: the tool-call log (as logged, so
  also up to a minute behind; stale answers and cache hits too);
- **budget use** now, per window (minute, hour, day) against the facility's limits: the
  limiter's own count, shared by every replica when Redis is configured.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote, urlencode

from pmsgate.audit.actions import AuditAction
from pmsgate.errors import NotFound
from pmsgate.gateway.facilities import FacilityView
from pmsgate.gateway.limiter import WINDOWS
from pmsgate.storage.audit import AuditEventView, AuditFilter
from pmsgate.storage.tokens import TokenRepository
from pmsgate.storage.tool_calls import CallCounts, UpstreamHealthView
from pmsgate.web.context import WebServices

# How many status changes the panel lists (the rest: the audit trail, linked).
HISTORY_SHOWN = 8
PERIODS: tuple[tuple[str, timedelta], ...] = (
    ("24 h", timedelta(hours=24)),
    ("7 days", timedelta(days=7)),
)


@dataclass(frozen=True)
class StatusChange:
    """One change of the facility's status: when, from what to what, why and by whom."""

    at: datetime
    before: str
    after: str
    cause: str
    reason: str | None
    actor: str

    @classmethod
    def of(cls, event: AuditEventView) -> StatusChange:
        """The change a ``facility.status_changed`` event records."""
        details = event.details
        return cls(
            at=event.occurred_at,
            before=str(details.get("from", "?")),
            after=str(details.get("to", "?")),
            cause=str(details.get("cause", "")),
            reason=str(details["reason"]) if details.get("reason") else None,
            actor=event.actor,
        )


@dataclass(frozen=True)
class PeriodCounts:
    """A period's calls as the panel shows them."""

    label: str
    counts: CallCounts

    @property
    def error_percent(self) -> float | None:
        """Failed calls as a share of all calls, in percent (None without calls)."""
        if not self.counts.calls:
            return None
        return 100.0 * self.counts.errors / self.counts.calls


@dataclass(frozen=True)
class BudgetWindow:
    """Upstream requests used in one limiter window against its limit."""

    name: str
    used: int
    limit: int

    @property
    def percent(self) -> float:
        """The share of the window's limit used, in percent."""
        return 100.0 * self.used / self.limit if self.limit else 0.0


@dataclass(frozen=True)
class ConnectionHealth:
    """Everything the health panel says about one facility."""

    hotel_id: str
    status: str
    last_error: str | None
    history: list[StatusChange]
    more_history: bool
    upstream: UpstreamHealthView | None
    token_obtained_at: datetime | None
    token_expires_at: datetime | None
    periods: list[PeriodCounts]
    budget: list[BudgetWindow]
    read_at: datetime

    @property
    def status_since(self) -> datetime | None:
        """When the facility entered its current status (None: no change recorded)."""
        return self.history[0].at if self.history else None

    @property
    def last_success_at(self) -> datetime | None:
        """The latest booking-system request that was answered."""
        return self.upstream.last_success_at if self.upstream is not None else None


async def read_health(web: WebServices, facility: FacilityView) -> ConnectionHealth:
    """The facility's connection health now (a handful of short reads)."""
    now = web.clock.now()
    gateway = web.gateway
    events = await web.audit.page(
        AuditFilter(
            facility_ids=(facility.id,),
            action_prefix=AuditAction.FACILITY_STATUS_CHANGED.value,
        ),
        limit=HISTORY_SHOWN,
    )
    call_log = gateway.gateway.call_log
    counts = await call_log.counts(facility.id, {label: now - span for label, span in PERIODS})
    async with web.customers.sessions() as session:
        token = await TokenRepository(session).get(facility.hotel_id)
    remaining = await gateway.limiter.remaining(
        gateway.gateway.limit_key(facility), facility.limits
    )
    limits = {
        "minute": facility.limits.per_minute,
        "hour": facility.limits.per_hour,
        "day": facility.limits.per_day,
    }
    budget = [
        BudgetWindow(name=name, used=max(0, limits[name] - remaining[name]), limit=limits[name])
        for name, _ in WINDOWS
        if name in remaining
    ]
    return ConnectionHealth(
        hotel_id=facility.hotel_id,
        status=facility.status,
        last_error=facility.last_error,
        history=[StatusChange.of(event) for event in events.events],
        more_history=events.next_cursor is not None,
        upstream=await call_log.upstream_health(facility.id),
        token_obtained_at=token.obtained_at if token is not None else None,
        token_expires_at=token.expires_at if token is not None else None,
        periods=[PeriodCounts(label, counts[label]) for label, _ in PERIODS],
        budget=budget,
        read_at=now,
    )


def calls_path(student_id: str) -> str:
    """The page of a customer's tool-call log."""
    return f"/console/customers/{quote(student_id, safe='')}/calls"


async def health_panel_context(web: WebServices, student_id: str) -> dict[str, Any]:
    """What ``_health_panel.html`` needs: the health of the customer's facility, if any."""
    context = await web.customers.context(student_id)
    health = None
    if context.hotel_id is not None:
        try:
            facility = await web.gateway.facilities.get(context.hotel_id)
        except NotFound:
            facility = None
        if facility is not None:
            health = await read_health(web, facility)
    return {
        "health": health,
        "calls_link": calls_path(student_id),
        "status_history_link": "/console/audit?"
        + urlencode({"customer": student_id, "action": AuditAction.FACILITY_STATUS_CHANGED.value}),
    }
