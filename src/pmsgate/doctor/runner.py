"""Runs the doctor's checks in order and gathers one report.

Offline checks always run. The live probe needs a target: a registered facility
(``hotel_id``), a workspace (``workspace_id``) and a notes connection, or a customer
(``student_id``) from whose records all three are read. A probe is skipped, with a
finding that says why, when what it needs is missing.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import dataclass

from pmsgate.clock import Clock, SystemClock
from pmsgate.config import Settings
from pmsgate.container import open_container, prepare_database
from pmsgate.customers.context import HttpFactory, default_http_factory
from pmsgate.doctor import assistant, kross, local, notion
from pmsgate.doctor.findings import Report, Status
from pmsgate.errors import PmsgateError


@dataclass(frozen=True)
class Target:
    """What the live probe looks at; a customer's records fill what is not given."""

    hotel_id: str | None = None
    workspace_id: str | None = None
    student_id: str | None = None


async def run_doctor(
    settings: Settings,
    *,
    live: bool = False,
    target: Target | None = None,
    http_factory: HttpFactory | None = None,
    clock: Clock | None = None,
) -> Report:
    """Every check; with ``live``, the first-contact probe of ``target`` too."""
    factory = http_factory or default_http_factory
    clock = clock or SystemClock()
    target = target or Target()
    report = Report()
    local.check_configuration(settings, report)
    local.check_console_address(settings, report)
    await local.check_database(
        settings, report, lambda engine: prepare_database(engine, migrate=False)
    )
    needed = (report.of(local.AREA, "database"), report.of(local.AREA, "secret keys"))
    if all(f is not None and f.status is not Status.FAIL for f in needed):
        await local.check_vault_keys(settings, report)
    await local.check_redis(settings, report)
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(factory())
        await kross.check_reachable(settings, http, report)
        await assistant.check_account(settings, http, report)
        if not live:
            return report
        database = report.of(local.AREA, "database")
        secrets = report.of(local.AREA, "secret keys")
        if any(f is not None and f.status is Status.FAIL for f in (database, secrets)):
            report.add(
                "live probe",
                "prerequisites",
                Status.SKIP,
                "The live probe needs a migrated database and the secret keys.",
                "Fix the failures above first.",
            )
            return report
        await _probe(settings, target, factory, clock, report)
    return report


async def _probe(
    settings: Settings, target: Target, factory: HttpFactory, clock: Clock, report: Report
) -> None:
    async with open_container(
        settings, clock=clock, http_factory=factory, migrate=False
    ) as container:
        customers = container.customers
        hotel_id, workspace_id = target.hotel_id, target.workspace_id
        notion_token, database_id = None, None
        if target.student_id is not None:
            try:
                ctx = await customers.context(target.student_id)
            except PmsgateError as error:
                report.add("live probe", "customer", Status.FAIL, error.message, error.hint)
                return
            hotel_id = hotel_id or ctx.hotel_id
            workspace_id = workspace_id or ctx.workspace_id
            if ctx.notes is not None and ctx.notes.has_token:
                notion_token = await customers.notion_token(ctx.notes.id)
                database_id = ctx.apartments_database_id
        if hotel_id is None:
            report.add(kross.AREA, "facility", Status.SKIP, "No facility given (--hotel-id).")
        else:
            await kross.probe_facility(container.gateway, hotel_id, report)
        if workspace_id is None or settings.assistant_api_token is None:
            report.add(
                assistant.AREA,
                "workspace",
                Status.SKIP,
                "No workspace given (--workspace-id), or no platform token.",
            )
        else:
            await assistant.probe_workspace(customers.assistant, workspace_id, report)
        if notion_token is None:
            report.add(
                notion.AREA,
                "integration",
                Status.SKIP,
                "No notes connection (give --customer with a connected notes workspace).",
            )
        else:
            async with factory() as notion_http:
                await notion.probe_notion(settings, notion_http, notion_token, database_id, report)
