"""`pmsgate webhooks …`: signed event webhooks from the command line (docs/webhooks.md).

``list`` shows subscriptions (``--customer``: one customer's, ``--team``: the team's, else
all), ``add`` creates one and prints its signing secret once (on standard output, nothing
else there, so ``add … > secret.txt`` keeps it off the screen), ``remove`` deletes one,
``rotate`` prints a new secret (the previous one signs during ``--overlap``),
``deliveries`` shows the delivery log and ``replay`` sends a delivery again. Every change
is audited with the command as actor.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from pmsgate.audit.actions import Actor
from pmsgate.cli.support import command_group, console, err_console, run_on_container
from pmsgate.storage.views import json_fields
from pmsgate.webhooks.service import EVERY_OWNER, WebhookService

if TYPE_CHECKING:
    from pmsgate.container import Container

webhooks_app = command_group(
    "Signed event webhooks: subscriptions, secrets, deliveries and replays (docs/webhooks.md)."
)

CustomerOption = Annotated[
    str | None,
    typer.Option("--customer", help="The customer's student_id (its own subscriptions)."),
]
TeamOption = Annotated[
    bool, typer.Option("--team", help="The team's subscriptions (every customer's events).")
]
JsonLines = Annotated[bool, typer.Option("--json", help="JSON lines instead of a table.")]


def _scope(customer: str | None, team: bool) -> str | None:
    if customer and team:
        raise typer.BadParameter("give --customer or --team, not both")
    if customer:
        return customer.strip()
    return None if team else EVERY_OWNER


def _when(value: object) -> str:
    return "" if value is None else str(value)[:19].replace("T", " ")


@webhooks_app.command("list")
def list_subscriptions(
    customer: CustomerOption = None, team: TeamOption = False, as_json: JsonLines = False
) -> None:
    """Show the subscriptions (never their secrets)."""
    scope = _scope(customer, team)

    async def work(container: Container) -> None:
        found = await container.web.webhooks.subscriptions(scope)
        if as_json:
            for subscription in found:
                sys.stdout.write(json.dumps(json_fields(subscription)) + "\n")
            return
        table = Table("id", "owner", "url", "events", "state", "previous secret until")
        for s in found:
            table.add_row(
                str(s.id),
                escape(s.student_id or "team"),
                escape(s.url),
                escape(", ".join(s.events)),
                "enabled" if s.enabled else f"disabled ({s.disabled_reason or 'by hand'})",
                _when(s.previous_secret_expires_at),
            )
        console.print(table)

    run_on_container(work)


@webhooks_app.command("add")
def add(
    url: Annotated[str, typer.Argument(help="The receiver's https:// address.")],
    events: Annotated[
        list[str],
        typer.Option("--event", "-e", help="An event to send (repeat the option for more)."),
    ],
    customer: CustomerOption = None,
    team: TeamOption = False,
    description: Annotated[str, typer.Option(help="A label, for people.")] = "",
) -> None:
    """Subscribe a receiver; its signing secret is printed once, on standard output."""
    if not customer and not team:
        raise typer.BadParameter("give --customer STUDENT_ID or --team")
    owner = _scope(customer, team)

    async def work(container: Container) -> None:
        created = await container.web.webhooks.subscribe(
            owner, url, events, actor=Actor.cli("webhooks add"), description=description
        )
        err_console.print(
            f"subscription {created.subscription.id} created; its signing secret follows "
            "(shown once):"
        )
        sys.stdout.write(created.secret + "\n")

    run_on_container(work)


def _change(work: Callable[[WebhookService], Awaitable[None]], done: str) -> None:
    """Run one change on the container's webhook service, then say ``done`` on stderr."""

    async def on_container(container: Container) -> None:
        await work(container.web.webhooks)

    run_on_container(on_container)
    err_console.print(done)


@webhooks_app.command("remove")
def remove(subscription_id: Annotated[int, typer.Argument(min=1)]) -> None:
    """Delete a subscription and its deliveries."""

    async def work(webhooks: WebhookService) -> None:
        await webhooks.remove(subscription_id, EVERY_OWNER, actor=Actor.cli("webhooks remove"))

    _change(work, f"subscription {subscription_id} removed")


@webhooks_app.command("rotate")
def rotate(
    subscription_id: Annotated[int, typer.Argument(min=1)],
    overlap: Annotated[
        float | None,
        typer.Option(
            min=0,
            help="Seconds the previous secret keeps signing (default "
            "PMSGATE_WEBHOOK_ROTATION_OVERLAP_S; 0: replaced at once).",
        ),
    ] = None,
) -> None:
    """A new signing secret, printed once on standard output."""

    async def work(container: Container) -> None:
        rotated = await container.web.webhooks.rotate(
            subscription_id, EVERY_OWNER, actor=Actor.cli("webhooks rotate"), overlap_s=overlap
        )
        until = rotated.subscription.previous_secret_expires_at
        err_console.print(
            f"subscription {subscription_id}: new secret follows (shown once)"
            + (f"; the previous one signs until {_when(until)} UTC" if until else "")
        )
        sys.stdout.write(rotated.secret + "\n")

    run_on_container(work)


@webhooks_app.command("deliveries")
def deliveries(
    customer: CustomerOption = None,
    team: TeamOption = False,
    subscription: Annotated[
        int | None, typer.Option("--subscription", min=1, help="One subscription's.")
    ] = None,
    status: Annotated[
        str | None, typer.Option(help="pending, delivered, failed or disabled.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="How many.")] = 50,
    as_json: JsonLines = False,
) -> None:
    """The delivery log, newest first: status, attempts, answer, next attempt."""
    scope = _scope(customer, team)

    async def work(container: Container) -> None:
        found = await container.web.webhooks.deliveries(
            scope, subscription_id=subscription, status=status, limit=limit
        )
        if as_json:
            for delivery in found:
                sys.stdout.write(json.dumps(json_fields(delivery)) + "\n")
            return
        table = Table(
            "id", "event", "type", "subscription", "status", "attempts", "answer", "next (UTC)"
        )
        for d in found:
            table.add_row(
                str(d.id),
                escape(d.event_id),
                escape(d.event_type),
                str(d.subscription_id),
                d.status,
                str(d.attempts),
                escape(str(d.response_status or d.last_error or "")),
                _when(d.next_attempt_at) if d.status == "pending" else "",
            )
        console.print(table)

    run_on_container(work)


@webhooks_app.command("replay")
def replay(delivery_id: Annotated[int, typer.Argument(min=1)]) -> None:
    """Send a delivery again on the next tick (same event, same webhook-id)."""

    async def work(webhooks: WebhookService) -> None:
        await webhooks.replay(delivery_id, EVERY_OWNER, actor=Actor.cli("webhooks replay"))

    _change(work, f"delivery {delivery_id} will be sent again on the next tick")
