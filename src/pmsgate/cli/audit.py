"""`pmsgate audit …`: read the audit trail from the command line (docs/audit.md).

``export`` writes JSON lines on standard output (one event per line, newest first),
read from the database a page at a time, so a long trail never sits in memory;
``list`` shows the newest events as a table. Neither can change an event.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.markup import escape
from rich.table import Table

from pmsgate.audit.trail import AuditTrail
from pmsgate.cli.support import command_group, console, err_console, run_on_container
from pmsgate.errors import InvalidInput
from pmsgate.storage.audit import AuditFilter

if TYPE_CHECKING:
    from pmsgate.container import Container

T = TypeVar("T")

audit_app = command_group(
    "The audit trail: export it as JSON lines, list the newest events (docs/audit.md)."
)


Since = Annotated[
    str | None,
    typer.Option(help="First day or moment (YYYY-MM-DD or ISO 8601, UTC unless it says)."),
]
Until = Annotated[
    str | None, typer.Option(help="Up to this day or moment (exclusive), same format.")
]
CustomerOption = Annotated[
    str | None,
    typer.Option("--customer", help="Only this customer's events (its student_id)."),
]
FacilityOption = Annotated[
    str | None, typer.Option("--facility", help="Only this facility's events (its hotel_id).")
]
ActionOption = Annotated[
    str | None,
    typer.Option("--action", help="Only actions starting with this (`key.`, `signin.failed`)."),
]
OutcomeOption = Annotated[
    str | None, typer.Option("--outcome", help="success, failure, refused or unknown.")
]
ActorOption = Annotated[
    str | None, typer.Option("--actor", help="Only this actor (e-mail address, key prefix, …).")
]


def parse_moment(value: str, option: str) -> datetime:
    """A day (its midnight, UTC) or an ISO 8601 moment (UTC when it names no offset)."""
    text = value.strip()
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            return datetime(day.year, day.month, day.day, tzinfo=UTC)
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(
            f"{option} {value!r} is not a date or a moment.",
            code="invalid_date",
            hint=f"Give {option} as YYYY-MM-DD or an ISO 8601 time, e.g. 2026-11-01T08:00:00Z.",
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class FilterOptions:
    """The filter options of a command, as given (each None when left out)."""

    since: str | None
    until: str | None
    customer: str | None
    facility: str | None
    action: str | None
    outcome: str | None
    actor: str | None

    async def build_filter(self, trail: AuditTrail) -> AuditFilter:
        """The filter the options describe (the customer and facility looked up by name)."""
        customer, facility, action = self.customer, self.facility, self.action
        owner = await trail.owner(customer.strip()) if customer else None
        if owner is not None and owner.customer_id is None and not owner.facility_ids:
            err_console.print(f"[yellow]warning[/] no customer {escape(customer or '')} is stored")
        return AuditFilter(
            since=parse_moment(self.since, "--since") if self.since else None,
            until=parse_moment(self.until, "--until") if self.until else None,
            owner=owner,
            facility_ids=await trail.facility_ids(facility.strip()) if facility else None,
            action_prefix=action.strip() if action else None,
            outcome=self.outcome.strip().lower() if self.outcome else None,
            actor=self.actor.strip() if self.actor else None,
        )


def _with_filter(
    options: FilterOptions, work: Callable[[AuditTrail, AuditFilter], Awaitable[T]]
) -> T:
    """Run ``work`` on the trail with the filter the options describe."""

    async def on_trail(container: Container) -> T:
        trail = container.audit
        return await work(trail, await options.build_filter(trail))

    return run_on_container(on_trail)


@audit_app.command("export")
def export(
    since: Annotated[str, typer.Option(help="First day or moment (YYYY-MM-DD or ISO 8601, UTC).")],
    until: Until = None,
    customer: CustomerOption = None,
    facility: FacilityOption = None,
    action: ActionOption = None,
    outcome: OutcomeOption = None,
    actor: ActorOption = None,
) -> None:
    """Write the matching events as JSON lines on standard output, newest first."""

    async def work(trail: AuditTrail, where: AuditFilter) -> int:
        count = 0
        async for event in trail.export(where):
            sys.stdout.write(json.dumps(event.as_json(), ensure_ascii=False) + "\n")
            count += 1
        sys.stdout.flush()
        return count

    options = FilterOptions(since, until, customer, facility, action, outcome, actor)
    count = _with_filter(options, work)
    err_console.print(f"[dim]{count} events[/]")


@audit_app.command("list")
def list_events(
    since: Since = None,
    until: Until = None,
    customer: CustomerOption = None,
    facility: FacilityOption = None,
    action: ActionOption = None,
    outcome: OutcomeOption = None,
    actor: ActorOption = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="How many events.")] = 50,
) -> None:
    """Show the newest matching events as a table."""

    async def work(trail: AuditTrail, where: AuditFilter) -> Table:
        page = await trail.page(where, limit=limit)
        table = Table("when (UTC)", "action", "outcome", "actor", "subject", "details")
        for event in page.events:
            table.add_row(
                event.occurred_at.strftime("%Y-%m-%d %H:%M:%S"),
                escape(event.action),
                escape(event.outcome),
                escape(f"{event.actor_kind}:{event.actor}"),
                escape(event.subject),
                escape(json.dumps(event.details, ensure_ascii=False) if event.details else ""),
            )
        return table

    options = FilterOptions(since, until, customer, facility, action, outcome, actor)
    console.print(_with_filter(options, work))
