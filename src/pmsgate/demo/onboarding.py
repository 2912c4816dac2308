"""Demo chapter 4: two customers onboarded by the runbook (Route A and Route B)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr
from rich.console import Console

from pmsgate.app import create_app, open_services
from pmsgate.clock import ManualClock
from pmsgate.config import Settings
from pmsgate.demo.platform import served_on_loopback
from pmsgate.gateway.vault import generate_key_spec
from pmsgate.onboarding.context import open_onboarding
from pmsgate.onboarding.customer_file import parse_customer_file
from pmsgate.onboarding.report import RunReport, render_report
from pmsgate.onboarding.runner import OnboardingRunner
from pmsgate.sandbox.app import Sandbox
from pmsgate.sandbox.customers import (
    SANDBOX_URL,
    ClockSleep,
    customer_document,
    sandbox_http_factory,
)
from pmsgate.sandbox.kross.seed import SANDBOX_PARTNER_API_KEY
from pmsgate.sandbox.platform.seed import SANDBOX_PLATFORM_TOKEN


@asynccontextmanager
async def live_gateway(settings: Settings, app: Any, clock: ManualClock) -> AsyncIterator[str]:
    """The gateway on the onboarding database, served on loopback for the platform's tool runs."""
    kross_http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=SANDBOX_URL)
    async with kross_http, open_services(settings, kross_http=kross_http, clock=clock) as services:
        gateway = create_app(settings, services=services)
        async with gateway.router.lifespan_context(gateway), served_on_loopback(gateway) as url:
            yield url


async def onboarding_chapter(console: Console, data_dir: Path, *, seed: int) -> None:
    """Onboard a partner customer with listings (Route A) and an own-key one without (Route B)."""
    console.rule("[bold]4. Onboarding two customers (spec §4.3, 17 steps)")
    clock = ManualClock()
    sandbox = Sandbox(seed=seed, clock=clock)
    app = sandbox.asgi_app()
    facilities = sandbox.kross.facility_summaries()
    partner = next(f for f in facilities if f["kind"] == "partner")
    own = next(f for f in facilities if f["kind"] == "own")
    base = Settings(
        data_dir=data_dir,
        database_url=None,
        redis_url=None,
        secret_keys=SecretStr(generate_key_spec("onb")),
        partner_api_key=SecretStr(SANDBOX_PARTNER_API_KEY),
        kross_base_url=f"{SANDBOX_URL}/kross",
        platform_api_url=f"{SANDBOX_URL}/platform",
        platform_api_token=SecretStr(SANDBOX_PLATFORM_TOKEN),
        notes_api_url=f"{SANDBOX_URL}/notes",
        limiter_wait_s=0.0,
    )
    # Route A: the customer's workspace already syncs listings from the booking system.
    slug = f"sandbox-{partner['hotel_id']}"
    workspace = sandbox.platform.create_workspace(str(partner["name"]), slug)
    sandbox.platform.set_pms_connection(
        workspace.id, partner["hotel_id"], partner["username"], partner["password"]
    )
    async with live_gateway(base, app, clock) as gateway_url:
        settings = base.model_copy(update={"gateway_public_url": gateway_url})
        async with open_onboarding(
            settings,
            clock=clock,
            http_factory=sandbox_http_factory(app),
            sleep=ClockSleep(clock),
        ) as services:
            runner = OnboardingRunner(services)
            reports: list[tuple[str, RunReport]] = []
            for facility in (partner, own):
                notes = next(
                    w for w in sandbox.notes.workspaces() if w["hotel_id"] == facility["hotel_id"]
                )
                customer = parse_customer_file(customer_document(facility, notes), env={})
                report = await runner.run(customer)
                console.print(render_report(report))
                reports.append((str(facility["name"]), report))
            before = sandbox.platform.stats.requests_by_route.copy()
            again = await runner.run(
                parse_customer_file(
                    customer_document(
                        partner,
                        next(
                            w
                            for w in sandbox.notes.workspaces()
                            if w["hotel_id"] == partner["hotel_id"]
                        ),
                    ),
                    env={},
                )
            )
            writes = sum(
                n - before.get(route, 0)
                for route, n in sandbox.platform.stats.requests_by_route.items()
                if not route.startswith("GET ")
            )
    nodes = sum(1 for n in sandbox.platform.nodes(workspace.id) if not n.is_directory)
    for name, report in reports:
        done = sum(1 for o in report.outcomes if o.status == "done")
        waiting = [o.id for o in report.outcomes if o.status == "waiting"]
        console.print(
            f"{name}: route {report.route}, run {report.status}; {done} steps done, "
            f"waiting for a person: {', '.join(waiting) or 'nothing'}."
        )
    console.print(
        f"Route A knowledge base: {nodes} nodes. A second onboarding run of the Route A "
        f"customer: {again.status}, {writes} platform writes."
    )
