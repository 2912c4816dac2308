"""What the console shows, read from the stores in one place (the pages only render it).

:func:`customer_page` is everything one customer's page shows (the admin overview of every
customer is read in a few aggregate queries by :mod:`pmsgate.web.admin_views`). Both only
read: no upstream is called while a page renders, so a slow or failing upstream never makes
the console slow or fail.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from pmsgate.customers.context import CustomerContext
from pmsgate.errors import NotFound
from pmsgate.gateway.facilities import FacilityView, KeyView
from pmsgate.gateway.scopes import all_scopes
from pmsgate.gateway.usage import UsageHistory
from pmsgate.onboarding.records import OnboardingRecords
from pmsgate.onboarding.report import Checklist
from pmsgate.storage.gateway_usage import HourUsage
from pmsgate.storage.knowledge import SyncJobView
from pmsgate.storage.usage import UsageSnapshotView
from pmsgate.web.context import WebServices

# How far back the charts look.
USAGE_HISTORY = timedelta(days=30)
HOURLY_HISTORY = timedelta(hours=48)

DRY_RUN_COUNTERS = ("apartments", "unresolvedApartments", "incompleteTemplates")
COMMIT_COUNTERS = (
    "created",
    "failed",
    "blockedByTemplate",
    "directoriesCreated",
    "updated",
    "unchanged",
)


def week_start(now: datetime) -> datetime:
    """Monday 00:00 UTC of the week ``now`` falls in."""
    day = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return day - timedelta(days=day.weekday())


@dataclass(frozen=True)
class Budget:
    """This week's upstream requests of a facility against what its daily limit allows."""

    used: int
    allowed: int

    @property
    def percent(self) -> float:
        """The share used, in percent."""
        return 100.0 * self.used / self.allowed if self.allowed else 0.0


@dataclass(frozen=True)
class Onboarding:
    """Progress of the runbook as the checklist records it."""

    checklist: Checklist | None

    @property
    def route(self) -> str | None:
        """Route A or B once step 9 chose it."""
        return self.checklist.route if self.checklist is not None else None

    @property
    def applicable(self) -> int:
        """Steps on the customer's route."""
        if self.checklist is None:
            return 0
        return sum(1 for o in self.checklist.outcomes if o.status != "skipped")

    @property
    def done(self) -> int:
        """Steps done."""
        if self.checklist is None:
            return 0
        return sum(1 for o in self.checklist.outcomes if o.status == "done")

    @property
    def waiting(self) -> int:
        """Steps waiting for a person."""
        if self.checklist is None:
            return 0
        return sum(1 for o in self.checklist.outcomes if o.status == "waiting")


@dataclass(frozen=True)
class CustomerRow:
    """One customer on the admin home."""

    ctx: CustomerContext
    assistant: str
    onboarding: Onboarding
    last_sync: SyncJobView | None
    budget: Budget | None

    @property
    def pms_status(self) -> str:
        """``connected``, ``error`` or ``not linked``."""
        return self.ctx.kross.status if self.ctx.kross is not None else "not linked"


@dataclass(frozen=True)
class KeyRow:
    """One gateway key of the customer's facility as the console lists it.

    Only the :class:`KeyView` (display prefix, label, scopes, dates): the stored hash and
    the raw key never reach a page, so no template can show them by mistake.
    """

    key: KeyView
    state: str

    @property
    def active(self) -> bool:
        """Whether the key still works (only then may its scopes change or it be revoked)."""
        return self.state == "active"


@dataclass(frozen=True)
class CustomerPage:
    """Everything one customer's page shows."""

    row: CustomerRow
    facility: FacilityView | None
    active_sync: SyncJobView | None
    snapshots: list[UsageSnapshotView]
    hours: list[HourUsage]
    keys: list[KeyRow] = field(default_factory=list)

    @property
    def scope_choices(self) -> tuple[str, ...]:
        """Every scope a key may hold (the mint and change-scopes forms' checkboxes)."""
        return all_scopes()

    @property
    def ctx(self) -> CustomerContext:
        """The customer's stored records."""
        return self.row.ctx


def assistant_of(ctx: CustomerContext) -> str:
    """The ``{assistant}`` path segment of the customer: its workspace slug, else its student_id."""
    if ctx.workspace is not None and ctx.workspace.workspace_slug:
        return ctx.workspace.workspace_slug
    return ctx.student_id


async def _facility(web: WebServices, ctx: CustomerContext) -> FacilityView | None:
    if ctx.hotel_id is None:
        return None
    try:
        return await web.gateway.facilities.get(ctx.hotel_id)
    except NotFound:
        return None


async def _row(
    web: WebServices, ctx: CustomerContext, facility: FacilityView | None
) -> CustomerRow:
    onboarding = OnboardingRecords(web.customers.sessions, web.clock)
    latest = await onboarding.checklist(ctx.student_id)
    checklist = (
        Checklist.build(ctx.student_id, latest, await onboarding.last_run(ctx.student_id))
        if latest
        else None
    )
    budget = None
    if facility is not None:
        now = web.clock.now()
        start = week_start(now)
        used = await UsageHistory(web.customers.sessions).total(facility.hotel_id, start, now)
        budget = Budget(used=used.upstream_calls, allowed=facility.limits.per_day * 7)
    return CustomerRow(
        ctx=ctx,
        assistant=assistant_of(ctx),
        onboarding=Onboarding(checklist),
        last_sync=await web.sync_jobs.latest(ctx.student_id),
        budget=budget,
    )


async def customer_page(web: WebServices, student_id: str) -> CustomerPage:
    """One customer's page (``customer_not_found`` when unknown)."""
    ctx = await web.customers.context(student_id)
    facility = await _facility(web, ctx)
    row = await _row(web, ctx, facility)
    now = web.clock.now()
    hours: list[HourUsage] = []
    keys: list[KeyRow] = []
    if facility is not None:
        hours = await UsageHistory(web.customers.sessions).series(
            facility.hotel_id, now - HOURLY_HISTORY, now
        )
        keys = [
            KeyRow(key=key, state=key.state(now))
            for key in await web.gateway.facilities.list_keys(facility.hotel_id)
        ]
    active = row.last_sync if row.last_sync is not None and row.last_sync.active else None
    return CustomerPage(
        row=row,
        facility=facility,
        active_sync=active,
        snapshots=await web.customers.usage.series(ctx.student_id, since=now - USAGE_HISTORY),
        hours=hours,
        keys=keys,
    )
