"""A fleet of generated customers for trying the admin console (300 customers).

:func:`generate_customers` registers ``count`` customers through the real services (the
customer registry, workspace configuration, the gateway's facility service, the
booking-system link and status, the onboarding records and the hourly usage), in varied
states, deterministic for a seed:

- every 10th customer (index 3, 13, 23, …) has its booking system in ``error``;
- every 7th has no booking system linked yet; the others are ``connected``;
- routes A and B alternate among the onboarded ones; every 5th has not started onboarding;
- the onboarded ones have done their first 1 to 4 steps; a third of them wait on the
  channels step (15), and a third of those are past due;
- every 25th facility spent 90 % of its daily budget in the last hours.

Nothing is sent upstream: the facilities are stored as proven (the onboarding's way), the
workspaces are configured without creating them on the platform. The names and e-mails are
clearly fake (``Demo Residence 042``, ``owner-042@demo.example``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pydantic import SecretStr

from pmsgate.clock import Clock
from pmsgate.customers.context import CustomerServices
from pmsgate.customers.service import link_kross, register_customer
from pmsgate.gateway.facilities import NewFacility
from pmsgate.gateway.usage import UsageHistory
from pmsgate.onboarding.records import OnboardingRecords
from pmsgate.onboarding.registry import STEPS
from pmsgate.onboarding.runner import new_step_result
from pmsgate.storage.customers import CustomerProfile
from pmsgate.storage.gateway_usage import HourCounts, hour_start

# Called with each generated facility's member and API credentials before it is stored.
Upstream = Callable[["FleetMember", str, str], None]

ERROR_REASON = "The booking system refused the stored credentials (password changed?)."
CHANNELS_STEP = "channels"
FIRST_HOTEL_ID = 9_000_000  # 7 digits: never one of the sandbox's 6-digit hotels


@dataclass(frozen=True)
class FleetMember:
    """What was generated for one customer (what a test expects to see)."""

    student_id: str
    name: str
    hotel_id: str | None
    status: str  # connected | error | not linked
    route: str | None
    waiting: bool
    overdue: bool
    budget_heavy: bool


@dataclass
class Fleet:
    """The generated customers."""

    members: list[FleetMember] = field(default_factory=list)

    def with_status(self, status: str) -> list[FleetMember]:
        """The members whose booking system is in ``status``."""
        return [m for m in self.members if m.status == status]


def _student_id(index: int) -> str:
    return f"demo-{index:04d}"


def member_of(index: int) -> FleetMember:
    """The state the generator gives the customer of ``index`` (0-based)."""
    linked = index % 7 != 6
    status = "not linked" if not linked else ("error" if index % 10 == 3 else "connected")
    onboarded = index % 5 != 4
    route = ("A" if index % 2 == 0 else "B") if onboarded else None
    waiting = onboarded and index % 6 in (1, 2)  # on both routes
    return FleetMember(
        student_id=_student_id(index),
        name=f"Demo Residence {index:03d}",
        hotel_id=str(FIRST_HOTEL_ID + index) if linked else None,
        status=status,
        route=route,
        waiting=waiting,
        overdue=waiting and (index // 6) % 3 == 0,
        budget_heavy=linked and index % 25 == 0,
    )


async def _facility(
    services: CustomerServices, member: FleetMember, index: int, upstream: Upstream | None
) -> None:
    """The facility first (its integration id given), then the customer's row linked to it."""
    assert member.hotel_id is not None
    username, password = f"api{member.hotel_id}", f"demo-password-{index}"
    if upstream is not None:
        upstream(member, username, password)
    await services.facilities.add(
        NewFacility(
            hotel_id=member.hotel_id,
            username=username,
            password=SecretStr(password),
            kind="partner",
            integration_id=f"int-demo-{index:04d}",
            name=member.name,
        )
    )
    if member.status == "error":
        await services.facilities.mark_error(member.hotel_id, ERROR_REASON)
    await link_kross(services, member.student_id, member.hotel_id)  # takes the facility's status


async def _onboarding(
    records: OnboardingRecords, member: FleetMember, index: int, clock: Clock
) -> None:
    if member.route is None:
        return
    run = await records.start_run(member.student_id, dry_run=False)
    today = clock.now().date()
    # Varied progress, few writes: the first steps done, then (some) waiting on channels.
    done_up_to = 1 + index % 4
    for step in STEPS:
        if member.route not in step.routes:
            continue
        if step.number > done_up_to and not (step.id == CHANNELS_STEP and member.waiting):
            continue
        if step.id == CHANNELS_STEP and member.waiting:
            due = today - timedelta(days=2) if member.overdue else today + timedelta(days=5)
            await records.record(
                new_step_result(
                    member.student_id,
                    step,
                    "waiting",
                    done=False,
                    evidence={},
                    message="WhatsApp number and voice agent to be set up by the customer.",
                    waiting_for="the customer's WhatsApp Business number",
                    due=due,
                    run_id=run.id,
                )
            )
            break
        await records.record(
            new_step_result(
                member.student_id,
                step,
                "done",
                done=True,
                evidence={"generated": True},
                run_id=run.id,
            )
        )
    await records.finish_run(run.id, "succeeded", route=member.route)


async def generate_customers(
    services: CustomerServices,
    clock: Clock,
    *,
    count: int,
    start: int = 0,
    upstream: Upstream | None = None,
) -> Fleet:
    """Register ``count`` generated customers (indexes ``start`` …) in varied states.

    ``upstream(member, username, password)`` is called before each facility is stored: the
    demo registers it in the booking-system emulator so the scheduled checks find it.
    """
    fleet = Fleet()
    records = OnboardingRecords(services.sessions, clock)
    usage: dict[tuple[str, datetime], HourCounts] = {}
    hour = hour_start(clock.now())
    for index in range(start, start + count):
        member = member_of(index)
        await register_customer(
            services,
            CustomerProfile(
                student_id=member.student_id,
                email=f"owner-{index:03d}@demo.example",
                name=member.name,
                kind="partner",
                contract_ref=f"C-DEMO-{index:04d}",
            ),
        )
        await services.workspaces.upsert(
            member.student_id,
            workspace_name=member.name,
            workspace_slug=f"demo-residence-{index:03d}",
            plan_limit_usd=150,
            alert_threshold_pct=80,
            billing_mode="partner_markup",
            notes="generated",
        )
        if member.hotel_id is not None:
            await _facility(services, member, index, upstream)
            spent = 4_500 if member.budget_heavy else (index * 37) % 900
            usage[(member.hotel_id, hour)] = HourCounts(tool_calls=spent * 2, upstream_calls=spent)
        await _onboarding(records, member, index, clock)
        fleet.members.append(member)
    if usage:
        await UsageHistory(services.sessions).add(usage)
    return fleet
