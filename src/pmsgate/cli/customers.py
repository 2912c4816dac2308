"""`pmsgate customers …`: register customers, connect their upstreams, sync, check and fix
their registry.

The notes integration token never travels as a flag (shell history, process
list): it comes from one line of standard input (``--token-stdin``) or a hidden
prompt, and no command ever prints it. ``--json`` prints exactly one JSON object
on standard output. Errors print ``error <code>: <message>`` and a hint on
standard error and exit with status 2.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, TypeVar

import typer
from pydantic import SecretStr
from rich.markup import escape
from rich.table import Table

from pmsgate.audit.actions import Actor
from pmsgate.cli.support import (
    JsonOption,
    StudentArgument,
    command_group,
    console,
    err_console,
    fail,
    open_cli_container,
    run,
    run_on_container,
)
from pmsgate.customers.context import CustomerContext, CustomerServices
from pmsgate.customers.registry_check import (
    RegistryFix,
    RegistryReport,
    check_and_record,
    fix_registry,
)
from pmsgate.customers.service import (
    Subscription,
    configure_workspace,
    connect_notion,
    link_kross,
    register_customer,
    sync_registry,
)
from pmsgate.errors import InvalidInput
from pmsgate.storage.customers import CustomerProfile, CustomerView
from pmsgate.storage.integrations import IntegrationView

T = TypeVar("T")

customers_app = command_group(
    "Customers: records, notes and booking-system integrations, apartment registry."
)


# --- plumbing ----------------------------------------------------------------------------------


def _with_services(work: Callable[[CustomerServices], Awaitable[T]]) -> T:
    return run_on_container(lambda container: work(container.customers))


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    return value


def _print_json(payload: dict[str, Any]) -> None:
    typer.echo(json.dumps(_plain(payload), ensure_ascii=False))


def _read_token(from_stdin: bool) -> SecretStr:
    if from_stdin:
        return SecretStr(typer.get_text_stream("stdin").readline().strip())
    # Prompts go to stderr so that stdout stays exactly the (JSON) answer.
    return SecretStr(
        typer.prompt(
            "Notes integration token", hide_input=True, default="", show_default=False, err=True
        )
    )


def _pairs_table(title: str, rows: dict[str, Any]) -> Table:
    table = Table(show_header=False, box=None, title=title, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    for name, value in rows.items():
        table.add_row(name, escape("" if value is None else str(_plain(value))))
    return table


def _integration_rows(view: IntegrationView) -> dict[str, Any]:
    rows: dict[str, Any] = {
        "id": view.id,
        "status": view.status,
        "last error": view.last_error,
        "since": view.status_changed_at,
    }
    if view.provider == "kross":
        rows["facility hotel_id"] = view.facility_hotel_id or "(not linked)"
    else:
        rows["apartments database"] = view.apartments_database_id
        rows["notes workspace"] = view.notes_workspace_id
        rows["token"] = "stored (encrypted)" if view.has_token else "none"
    return rows


def _integration_json(view: IntegrationView) -> dict[str, Any]:
    # has_token says whether one is stored; the token itself is never read here.
    plain: dict[str, Any] = _plain(view)
    return plain


def _customer_rows(view: CustomerView) -> dict[str, Any]:
    return {
        "student_id": view.student_id,
        "email": view.email,
        "name": view.name,
        "kind": view.kind,
        "contract": view.contract_ref,
        "contract price": view.contract_price_id,
        "subscription": view.subscription_id,
        "subscription status": view.subscription_status,
        "subscription price": view.subscription_price_id,
        "active on contract price": view.subscription_active_on_contract_price,
        "handles upsell": view.handles_upsell,
        "handles late check-in": view.handles_late_check_in,
    }


def _registry_counts(ctx: CustomerContext) -> dict[str, int]:
    return {
        "apartments": len(ctx.apartments),
        "with_listing": sum(1 for a in ctx.apartments if a.assistant_listing_id is not None),
        "with_notes_page": sum(1 for a in ctx.apartments if a.notes_page_id is not None),
    }


# --- commands ----------------------------------------------------------------------------------


@customers_app.command("add")
def add(
    student_id: StudentArgument,
    email: Annotated[str, typer.Option(help="The customer's e-mail address.")],
    name: Annotated[str, typer.Option(help="The customer's name.")],
    kind: Annotated[str, typer.Option(help="`partner` or `own` (booking-system api key).")],
    contract_ref: Annotated[str | None, typer.Option(help="The contract's reference.")] = None,
    contract_price_id: Annotated[
        str | None, typer.Option(help="The price the contract's subscription must be on.")
    ] = None,
    subscription_id: Annotated[str | None, typer.Option(help="The subscription's id.")] = None,
    subscription_status: Annotated[
        str | None, typer.Option(help="The subscription's status (e.g. active).")
    ] = None,
    subscription_price_id: Annotated[
        str | None, typer.Option(help="The price the subscription is on.")
    ] = None,
    handles_upsell: Annotated[
        bool, typer.Option(help="The customer handles upsell autonomously.")
    ] = False,
    handles_late_check_in: Annotated[
        bool, typer.Option(help="The customer handles late check-in autonomously.")
    ] = False,
    update: Annotated[
        bool, typer.Option("--update", help="Replace the profile of an existing customer.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Register a customer (with --update, replace an existing customer's profile)."""
    profile = CustomerProfile(
        student_id=student_id,
        email=email,
        name=name,
        kind=kind,
        contract_ref=contract_ref,
        contract_price_id=contract_price_id,
        handles_upsell=handles_upsell,
        handles_late_check_in=handles_late_check_in,
    )
    given = (subscription_id, subscription_status, subscription_price_id)
    subscription = Subscription(*given) if any(v is not None for v in given) else None
    view = _with_services(
        lambda s: register_customer(s, profile, subscription=subscription, replace=update)
    )
    if as_json:
        _print_json({"customer": view})
        return
    console.print(_pairs_table(f"Customer {view.student_id}", _customer_rows(view)))


@customers_app.command("list")
def list_customers(as_json: JsonOption = False) -> None:
    """Every registered customer with its workspace and integration states."""

    async def work(services: CustomerServices) -> list[CustomerContext]:
        return [await services.context(c.student_id) for c in await services.customers.all()]

    contexts = _with_services(work)
    if as_json:
        _print_json(
            {
                "customers": [
                    {
                        "student_id": ctx.student_id,
                        "name": ctx.customer.name,
                        "email": ctx.customer.email,
                        "kind": ctx.customer.kind,
                        "workspace_id": ctx.workspace_id,
                        "pms_status": ctx.kross.status if ctx.kross else None,
                        "notes_status": ctx.notes.status if ctx.notes else None,
                        "apartments": len(ctx.apartments),
                    }
                    for ctx in contexts
                ]
            }
        )
        return
    table = Table(title="Customers")
    for column in ("student_id", "name", "kind", "workspace", "pms", "notes", "apartments"):
        table.add_column(column)
    for ctx in contexts:
        table.add_row(
            escape(ctx.student_id),
            escape(ctx.customer.name),
            ctx.customer.kind,
            escape(ctx.workspace_id or ""),
            ctx.kross.status if ctx.kross else "",
            ctx.notes.status if ctx.notes else "",
            str(len(ctx.apartments)),
        )
    console.print(table)


@customers_app.command("show")
def show(student_id: StudentArgument, as_json: JsonOption = False) -> None:
    """A customer's records, integrations and registry counts (never a token)."""
    ctx = _with_services(lambda s: s.context(student_id))
    counts = _registry_counts(ctx)
    if as_json:
        _print_json(
            {
                "customer": ctx.customer,
                "workspace": ctx.workspace,
                "integrations": {
                    "kross": _integration_json(ctx.kross) if ctx.kross else None,
                    "notes": _integration_json(ctx.notes) if ctx.notes else None,
                },
                "registry": {**counts, "rows": ctx.apartments},
            }
        )
        return
    console.print(_pairs_table(f"Customer {ctx.student_id}", _customer_rows(ctx.customer)))
    if ctx.workspace is not None:
        ws = ctx.workspace
        console.print(
            _pairs_table(
                "Workspace configuration",
                {
                    "workspace_id": ws.workspace_id or "(not created yet)",
                    "name": ws.workspace_name,
                    "slug": ws.workspace_slug,
                    "plan limit (USD)": ws.plan_limit_usd,
                    "alert threshold (%)": ws.alert_threshold_pct,
                    "billing mode": ws.billing_mode,
                    "notes": ws.notes,
                },
            )
        )
    else:
        console.print("Workspace configuration: none")
    for label, view in (("Booking system (kross)", ctx.kross), ("Notes", ctx.notes)):
        if view is None:
            console.print(f"{label}: not connected")
        else:
            console.print(_pairs_table(label, _integration_rows(view)))
    console.print(
        f"Registry: {counts['apartments']} apartments, {counts['with_listing']} with a listing, "
        f"{counts['with_notes_page']} with a notes page"
    )


@customers_app.command("configure-workspace")
def configure_workspace_command(
    student_id: StudentArgument,
    plan_limit_usd: Annotated[str, typer.Option(help="The plan's monthly limit in USD.")],
    alert_threshold_pct: Annotated[
        int, typer.Option(help="Share of the plan limit at which to alert.")
    ] = 80,
    name: Annotated[
        str | None, typer.Option(help="Workspace name (default: the customer's name).")
    ] = None,
    slug: Annotated[
        str | None, typer.Option(help="Workspace slug (default: made from the name).")
    ] = None,
    notes: Annotated[str, typer.Option(help="Free notes on the configuration.")] = "",
    as_json: JsonOption = False,
) -> None:
    """Upsert the workspace configuration (partner_markup) and ensure the platform workspace."""
    view = _with_services(
        lambda s: configure_workspace(
            s,
            student_id,
            plan_limit_usd=plan_limit_usd,
            alert_threshold_pct=alert_threshold_pct,
            workspace_name=name,
            workspace_slug=slug,
            notes=notes,
        )
    )
    if as_json:
        _print_json({"workspace": view})
        return
    console.print(f"workspace {escape(view.workspace_slug)}: id {escape(view.workspace_id or '')}")


@customers_app.command("connect-notes", hidden=True, deprecated=True)  # the old name, one release
@customers_app.command("connect-notion")
def connect_notion_command(
    student_id: StudentArgument,
    database_id: Annotated[str, typer.Option(help="The notes apartments database id.")],
    token_stdin: Annotated[
        bool,
        typer.Option(
            "--token-stdin",
            help="Read the integration token from the first line of standard input "
            "(else: hidden prompt).",
        ),
    ] = False,
    notes_workspace_id: Annotated[
        str | None, typer.Option(help="The notes workspace's id, if known.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Check the token on the apartments database, then store it encrypted."""
    token = _read_token(token_stdin)
    if not token.get_secret_value():
        raise fail(
            InvalidInput(
                "No notes integration token was given.",
                code="missing_notes_token",
                hint="Pipe it on standard input with --token-stdin, or type it at the prompt.",
            )
        )
    result = _with_services(
        lambda s: connect_notion(
            s, student_id, token, database_id, notes_workspace_id=notes_workspace_id
        )
    )
    if as_json:
        _print_json(
            {
                "integration": _integration_json(result.integration),
                "apartment_pages": result.apartment_pages,
                "created": result.created,
            }
        )
        return
    console.print(
        f"notes connected: row {escape(result.integration.id)}, "
        f"{result.apartment_pages} apartment pages readable, token stored encrypted"
    )


@customers_app.command("link-pms", hidden=True, deprecated=True)  # the old name, one release
@customers_app.command("link-kross")
def link_kross_command(
    student_id: StudentArgument,
    hotel_id: Annotated[str, typer.Option(help="The booking-system facility's hotel_id.")],
    as_json: JsonOption = False,
) -> None:
    """Create the booking-system integration row and link it to the gateway facility."""
    view = _with_services(lambda s: link_kross(s, student_id, hotel_id))
    if as_json:
        _print_json(
            {"integration": _integration_json(view), "linked": bool(view.facility_hotel_id)}
        )
        return
    if view.facility_hotel_id:
        console.print(
            f"kross row {escape(view.id)} linked to facility {escape(view.facility_hotel_id)} "
            f"({view.status})"
        )
        return
    console.print(
        f"kross row {escape(view.id)} created; no gateway facility {escape(hotel_id)} yet"
    )
    err_console.print(
        f"hint: register it with `pmsgate facilities add --hotel-id {escape(hotel_id)} "
        f"--integration-id {escape(view.id)} …`, then run link-kross again."
    )


@customers_app.command("sync-registry")
def sync_registry_command(student_id: StudentArgument, as_json: JsonOption = False) -> None:
    """The listings sync: one registry row per apartment (listing, notes page, name)."""
    result = _with_services(lambda s: sync_registry(s, student_id))
    if as_json:
        _print_json({"sync": result.as_dict()})
        return
    pages = "not read" if result.notes_pages is None else str(result.notes_pages)
    console.print(
        f"listings {result.listings}, notes pages {pages} → {result.apartments} apartments: "
        f"{result.created} created, {result.updated} updated, {result.unchanged} unchanged; "
        f"{result.without_listing} without a listing, "
        f"{result.without_notes_page} without a notes page"
    )
    if result.ignored_listings or result.ignored_pages:
        err_console.print(
            f"ignored (no or duplicate room type): listings {result.ignored_listings}, "
            f"pages {result.ignored_pages}"
        )


# --- the registry check (docs/requirements.md R18.3) --------------------------------------------


def _print_report(report: RegistryReport) -> None:
    console.print(
        f"registry of {escape(report.student_id)}: {report.status} "
        f"({len(report.apartments)} apartments, {report.listings} listings, "
        f"{len(report.problems)} problems)"
    )
    if report.reason:
        console.print(escape(report.reason))
    if report.fix:
        console.print(f"fix: {escape(report.fix)}")
    if report.apartments:
        table = Table(title="Apartments and their listings", title_justify="left")
        for column in ("room type", "apartment", "listing", "listing's room type", "problem"):
            table.add_column(column)
        for mapping in report.apartments:
            table.add_row(
                escape(mapping.room_type),
                escape(mapping.name),
                escape(
                    f"{mapping.listing_name} ({mapping.listing_id})"
                    if mapping.listing_name
                    else (mapping.listing_id or "(none)")
                ),
                escape(mapping.listing_room_type or ""),
                mapping.problem.kind.value if mapping.problem else "ok",
            )
        console.print(table)
    for problem in report.problems:
        console.print(f"- {problem.kind.value}: {escape(problem.reason)}")
        console.print(f"  fix: {escape(problem.fix)}")
        if problem.automatic:
            console.print(f"  fix-registry would: {escape(problem.automatic)}")


@customers_app.command("check-registry")
def check_registry_command(student_id: StudentArgument, as_json: JsonOption = False) -> None:
    """Check that every apartment maps to a listing of its room type (stores the result)."""
    report = _with_services(lambda s: check_and_record(s, student_id))
    if as_json:
        _print_json({"registry": report.as_dict()})
        return
    _print_report(report)


@customers_app.command("fix-registry")
def fix_registry_command(
    student_id: StudentArgument,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would change; change nothing.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Repair wrong or missing listing mappings that have exactly one right answer.

    An apartment is mapped to the one listing of its room type; an ambiguous one (two
    listings of a room type, a deleted listing with no replacement) is listed for a person.
    Running it again changes nothing; every change is in the audit trail (registry.fixed).
    """

    async def _go() -> RegistryFix:
        async with open_cli_container() as container:
            return await fix_registry(
                container.customers,
                student_id,
                audit=container.audit,
                actor=Actor.cli("pmsgate customers fix-registry"),
                dry_run=dry_run,
            )

    result = run(_go())
    if as_json:
        _print_json({"fix": result.as_dict()})
        return
    verb = "would change" if dry_run else "changed"
    if not result.changes:
        console.print(f"registry of {escape(result.student_id)}: nothing to change")
    else:
        console.print(f"registry of {escape(result.student_id)}: {verb} {len(result.changes)}")
        for change in result.changes:
            console.print(f"- {escape(change.description)}")
    if result.left_for_a_person:
        console.print(f"left for a person ({len(result.left_for_a_person)}):")
        for problem in result.left_for_a_person:
            console.print(f"- {problem.kind.value}: {escape(problem.reason)}")
            console.print(f"  fix: {escape(problem.fix)}")
    elif not dry_run:
        console.print(f"every apartment maps to its own listing ({result.after.status})")
