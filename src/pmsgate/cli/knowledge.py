"""`pmsgate knowledge …`: check the customer's notes pages against the template, and patch them.

The pages are the customer's registry rows that name a notes page, then any other
page of its apartments database (marked "not in registry"). ``--json`` prints
exactly one JSON object on standard output. The WiFi password is never printed
(``found`` / ``********``) nor logged. It comes from ``--wifi-password-stdin`` (one
line of standard input), a hidden prompt, or ``--wifi-password`` — the flag is
accepted for scripts but lands in shell history and in the process list, so prefer
the other two. Given WiFi credentials belong to one apartment: they need ``--page``
unless the customer has a single page. Errors print ``error <code>: <message>`` and
a hint on standard error and exit with status 2; a page that fails to read or to
patch is reported and the command exits with status 1 after the other pages.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import typer
from pydantic import SecretStr, ValidationError
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from pmsgate.catalogue import KnowledgeTemplate, load_catalogue
from pmsgate.cli.support import (
    JsonOption,
    Upstreams,
    command_group,
    console,
    err_console,
    fail,
    open_cli_container,
    run_on_container,
)
from pmsgate.customers.context import (
    CustomerContext,
    CustomerServices,
)
from pmsgate.customers.service import upstream_error
from pmsgate.errors import InvalidInput, NotFound, PmsgateError
from pmsgate.integrations.notion.client import NotionClient
from pmsgate.integrations.notion.errors import NotionError
from pmsgate.knowledge.patcher import PatchOutcome, PatchPlan, apply_patch, plan_patch
from pmsgate.knowledge.template import WIFI, PageCheck, WifiCredentials, check_page

T = TypeVar("T")

knowledge_app = command_group(
    "Knowledge bridge: check and patch the customers' notes pages, sync them."
)


StudentOption = Annotated[str, typer.Option("--student", help="The customer's student_id.")]
PageOption = Annotated[
    str | None,
    typer.Option("--page", help="Only this notes page (its id, with or without dashes)."),
]


upstreams = Upstreams()


@dataclass(frozen=True)
class NotionPageRef:
    """One notes page of the customer, and the apartment it stands for."""

    page_id: str
    name: str
    pms_room_type_id: str | None
    in_registry: bool


# --- plumbing ----------------------------------------------------------------------------------


@asynccontextmanager
async def open_cli_customer_services() -> AsyncIterator[CustomerServices]:
    """The command's container (:func:`pmsgate.cli.support.open_cli_container`, with this
    group's :class:`Upstreams`), as the customer services the knowledge commands use."""
    async with open_cli_container(upstreams) as container:
        yield container.customers


def run_on_customer_services(work: Callable[[CustomerServices], Awaitable[T]]) -> T:
    """Run ``work`` on the command's customer services; a service error becomes exit status 2."""
    return run_on_container(lambda container: work(container.customers), upstreams)


def page_progress() -> Progress:
    """A transient progress bar on standard error (only on a terminal: stdout stays clean)."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=not err_console.is_terminal,
    )


def _print_json(payload: dict[str, Any]) -> None:
    typer.echo(json.dumps(payload, ensure_ascii=False))


def _same_id(a: str, b: str) -> bool:
    return a.replace("-", "").lower() == b.replace("-", "").lower()


async def customer_pages(
    ctx: CustomerContext, notes: NotionClient, page: str | None = None
) -> list[NotionPageRef]:
    """The customer's notes pages: the registry's first, then the database's others."""
    refs = [
        NotionPageRef(
            page_id=row.notes_page_id,
            name=row.name,
            pms_room_type_id=row.pms_room_type_id,
            in_registry=True,
        )
        for row in ctx.apartments
        if row.notes_page_id
    ]
    if ctx.apartments_database_id:
        try:
            pages = await notes.query_database(ctx.apartments_database_id)
        except NotionError as error:
            raise upstream_error(error, "reading the apartments database") from None
        for found in pages:
            room_type = None if found.room_type_id is None else str(found.room_type_id)
            if found.archived or any(_same_id(found.id, r.page_id) for r in refs):
                continue
            refs.append(
                NotionPageRef(
                    page_id=found.id,
                    name=found.title or "(untitled)",
                    pms_room_type_id=room_type,
                    in_registry=False,
                )
            )
    if page is None:
        return refs
    chosen = [r for r in refs if _same_id(r.page_id, page)]
    if not chosen:
        raise NotFound(
            f"Page {page} is not one of customer {ctx.student_id}'s notes pages.",
            code="page_not_found",
            hint="`pmsgate knowledge check --student …` lists the customer's pages.",
        )
    return chosen


# --- check -------------------------------------------------------------------------------------


@dataclass
class _Checked:
    ref: NotionPageRef
    check: PageCheck | None = None
    error: NotionError | None = None


def _fixes(check: PageCheck) -> list[str]:
    """What `knowledge patch` would change on the page, in words."""
    fixes = []
    if WIFI in check.missing:
        fixes.append("add WiFi (needs --wifi-network/--wifi-password)")
    if any(s != WIFI for s in check.missing):
        fixes.append("append sections")
    if WIFI not in check.missing and not check.wifi_title_complete:
        fixes.append("WiFi title")
    if check.wifi_callouts:
        fixes.append("WiFi callouts")
    if check.misleading_first_toggle:
        fixes.append("first toggle")
    return fixes


def _check_table(student_id: str, rows: list[_Checked], template: KnowledgeTemplate) -> Table:
    table = Table(title=f"Knowledge template of {student_id}", title_justify="left")
    table.add_column("Apartment")
    table.add_column("Notes page")
    for section in template.sections:
        table.add_column(section.title_en, justify="center")
    table.add_column("WiFi credentials")
    table.add_column("Template")
    table.add_column("Patch would fix")
    for row in rows:
        name = escape(row.ref.name) + ("" if row.ref.in_registry else " [dim](not in registry)[/]")
        if row.check is None:
            code = row.error.code if row.error is not None else "error"
            cells = ["?"] * len(template.sections)
            table.add_row(name, row.ref.page_id, *cells, "?", f"[red]{escape(code)}[/]", "")
            continue
        check = row.check
        marks = [
            "[green]✓[/]" if check.sections.get(s.id) is not None else "[red]✗[/]"
            for s in template.sections
        ]
        wifi = "found" if check.wifi is not None else "[red]not found[/]"
        status = "[green]complete[/]" if check.complete else "[red]incomplete[/]"
        table.add_row(name, row.ref.page_id, *marks, wifi, status, escape(", ".join(_fixes(check))))
    return table


@knowledge_app.command("check")
def check_command(
    student: StudentOption,
    page: PageOption = None,
    as_json: JsonOption = False,
) -> None:
    """Check every notes page of a customer for the five canonical sections and the WiFi."""
    template = load_catalogue().knowledge

    async def work(services: CustomerServices) -> list[_Checked]:
        ctx = await services.context(student)
        rows: list[_Checked] = []
        async with services.notion(ctx) as notes:
            refs = await customer_pages(ctx, notes, page)
            with page_progress() as progress:
                task = progress.add_task("checking", total=len(refs))
                for ref in refs:
                    progress.update(task, description=f"checking {escape(ref.name)}")
                    try:
                        blocks = await notes.read_tree(ref.page_id)
                        rows.append(
                            _Checked(ref, check_page(blocks, template, page_id=ref.page_id))
                        )
                    except NotionError as error:
                        rows.append(_Checked(ref, error=error))
                    progress.advance(task)
        return rows

    rows = run_on_customer_services(work)
    complete = sum(1 for r in rows if r.check is not None and r.check.complete)
    failed = sum(1 for r in rows if r.check is None)
    summary = {
        "pages": len(rows),
        "complete": complete,
        "incomplete": len(rows) - complete - failed,
        "failed": failed,
    }
    if as_json:
        _print_json(
            {
                "student_id": student,
                "pages": [
                    {
                        "apartment": r.ref.name,
                        "page_id": r.ref.page_id,
                        "pms_room_type_id": r.ref.pms_room_type_id,
                        "in_registry": r.ref.in_registry,
                        "error": None if r.error is None else r.error.code,
                        "check": None if r.check is None else r.check.report(),
                    }
                    for r in rows
                ],
                "summary": summary,
            }
        )
    else:
        console.print(_check_table(student, rows, template))
        console.print(
            f"{summary['pages']} pages: [green]{complete} complete[/], "
            f"[red]{summary['incomplete']} incomplete[/]"
            + (f", [red]{failed} could not be read[/]" if failed else "")
        )
        if summary["incomplete"]:
            console.print(
                f"[dim]`pmsgate knowledge patch --student {escape(student)}` shows the changes "
                "that make them canonical; add --apply to make them.[/]"
            )
    if failed:
        raise typer.Exit(code=1)


# --- patch -------------------------------------------------------------------------------------


@dataclass
class _Patched:
    ref: NotionPageRef
    plan: PatchPlan | None = None
    outcome: PatchOutcome | None = None
    after: PageCheck | None = None
    error: NotionError | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None or (self.outcome is not None and not self.outcome.ok)


def _wifi_from_options(
    network: str | None, password: str | None, password_stdin: bool
) -> WifiCredentials | None:
    if password is not None and password_stdin:
        raise InvalidInput(
            "Give the WiFi password once: --wifi-password or --wifi-password-stdin.",
            code="wifi_password_twice",
        )
    if password_stdin:
        password = typer.get_text_stream("stdin").readline().rstrip("\r\n")
    if network is None and password is None:
        return None
    if network is None:
        raise InvalidInput(
            "A WiFi password needs its network: add --wifi-network.", code="wifi_network_missing"
        )
    if password is None:
        # Prompts go to stderr so that stdout stays exactly the (JSON) answer.
        password = typer.prompt(
            f"WiFi password of {network}", hide_input=True, default="", show_default=False, err=True
        )
    try:
        return WifiCredentials(network=network.strip(), password=SecretStr(password or ""))
    except ValidationError:
        # Not the validation text: it would quote the password.
        raise InvalidInput(
            "The WiFi network and password must each be one non-blank line of at most 200 "
            "characters.",
            code="wifi_credentials_invalid",
        ) from None


async def _patch_page(
    notes: NotionClient,
    ref: NotionPageRef,
    wifi: WifiCredentials | None,
    apply: bool,
    template: KnowledgeTemplate,
) -> _Patched:
    """Read, check and plan one page; with ``apply``, make the changes and check it again."""
    row = _Patched(ref)
    try:
        blocks = await notes.read_tree(ref.page_id)
        check = check_page(blocks, template, page_id=ref.page_id)
        row.plan = plan_patch(ref.page_id, blocks, check, wifi=wifi, template=template)
        if apply and not row.plan.empty:
            row.outcome = await apply_patch(notes, row.plan)
            after = await notes.read_tree(ref.page_id)
            row.after = check_page(after, template, page_id=ref.page_id)
    except NotionError as error:
        row.error = error
    return row


def _print_patch(row: _Patched, apply: bool) -> None:
    where = "" if row.ref.in_registry else " [dim](not in registry)[/]"
    console.print(f"[bold]{escape(row.ref.name)}[/]{where}  [dim]{row.ref.page_id}[/]")
    if row.plan is None:
        code = row.error.code if row.error is not None else "error"
        console.print(f"  [red]✗ could not be read ({escape(code)})[/]")
        return
    if row.plan.empty and not row.plan.blockers:
        console.print("  [green]✓ canonical: nothing to change[/]")
    for change in row.plan.changes:
        done = row.outcome is not None and change in row.outcome.applied
        mark = "[green]✓[/]" if done else ("[red]✗[/]" if apply else "•")
        console.print(f"  {mark} {escape(change.description)}")
    for blocker in row.plan.blockers:
        console.print(f"  [yellow]! blocked ({blocker.code}):[/] {escape(blocker.description)}")
    for note in row.plan.notes:
        console.print(f"  [dim]note: {escape(note)}[/]")
    if row.outcome is not None and row.outcome.error is not None:
        console.print(f"  [red]✗ stopped: {escape(row.outcome.error.code)}[/]")
    if row.after is not None:
        state = "complete" if row.after.complete else "still incomplete"
        requests = row.outcome.requests if row.outcome else 0
        console.print(
            f"  [dim]after: {state}"
            + (", canonical" if row.after.canonical else "")
            + f" ({requests} write request{'' if requests == 1 else 's'})[/]"
        )


@knowledge_app.command("patch")
def patch_command(
    student: StudentOption,
    page: PageOption = None,
    wifi_network: Annotated[
        str | None, typer.Option("--wifi-network", help="The apartment's WiFi network name.")
    ] = None,
    wifi_password: Annotated[
        str | None,
        typer.Option(
            "--wifi-password",
            help="The WiFi password (lands in shell history: prefer --wifi-password-stdin).",
        ),
    ] = None,
    wifi_password_stdin: Annotated[
        bool,
        typer.Option("--wifi-password-stdin", help="Read the WiFi password from standard input."),
    ] = False,
    apply: Annotated[bool, typer.Option("--apply", help="Make the changes.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Show (and with --apply make) the changes that make the notes pages canonical."""
    template = load_catalogue().knowledge
    try:
        wifi = _wifi_from_options(wifi_network, wifi_password, wifi_password_stdin)
    except PmsgateError as error:
        raise fail(error) from None

    async def work(services: CustomerServices) -> list[_Patched]:
        ctx = await services.context(student)
        rows: list[_Patched] = []
        async with services.notion(ctx) as notes:
            refs = await customer_pages(ctx, notes, page)
            if wifi is not None and len(refs) != 1:
                raise InvalidInput(
                    "WiFi credentials belong to one apartment: name its page with --page.",
                    code="wifi_needs_page",
                )
            with page_progress() as progress:
                task = progress.add_task("patching", total=len(refs))
                for ref in refs:
                    progress.update(task, description=f"patching {escape(ref.name)}")
                    rows.append(await _patch_page(notes, ref, wifi, apply, template))
                    progress.advance(task)
        return rows

    rows = run_on_customer_services(work)
    summary = {
        "pages": len(rows),
        "to_change": sum(1 for r in rows if r.plan is not None and not r.plan.empty),
        "changes": sum(len(r.plan.changes) for r in rows if r.plan is not None),
        "applied": sum(len(r.outcome.applied) for r in rows if r.outcome is not None),
        "blocked": sum(1 for r in rows if r.plan is not None and r.plan.blockers),
        "failed": sum(1 for r in rows if r.failed),
    }
    if as_json:
        _print_json(
            {
                "student_id": student,
                "applied": apply,
                "pages": [
                    {
                        "apartment": r.ref.name,
                        "page_id": r.ref.page_id,
                        "in_registry": r.ref.in_registry,
                        "error": None if r.error is None else r.error.code,
                        "plan": None if r.plan is None else r.plan.report(),
                        "outcome": None if r.outcome is None else r.outcome.report(),
                        "after": None if r.after is None else r.after.report(),
                    }
                    for r in rows
                ],
                "summary": summary,
            }
        )
    else:
        for row in rows:
            _print_patch(row, apply)
        verb = "applied" if apply else "planned"
        console.print(
            f"{summary['pages']} pages, {summary['to_change']} to change: "
            f"{summary['applied'] if apply else summary['changes']} changes {verb}"
            + (f", [yellow]{summary['blocked']} blocked[/]" if summary["blocked"] else "")
            + (f", [red]{summary['failed']} failed[/]" if summary["failed"] else "")
        )
        if not apply and summary["changes"]:
            console.print("[dim]Run again with --apply to make these changes.[/]")
    if summary["failed"]:
        raise typer.Exit(code=1)
