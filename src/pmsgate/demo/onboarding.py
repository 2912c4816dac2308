"""Demo chapter 4: two customers onboarded by the runbook (Route A and Route B)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr

from pmsgate.app import create_app
from pmsgate.clock import ManualClock
from pmsgate.config import Settings
from pmsgate.container import Container, open_container
from pmsgate.demo.assistant import served_on_loopback
from pmsgate.demo.story import Story
from pmsgate.gateway.vault import generate_key_spec
from pmsgate.onboarding.context import OnboardingServices
from pmsgate.onboarding.customer_file import CustomerFile, parse_customer_file
from pmsgate.onboarding.report import RunReport, StepOutcome
from pmsgate.onboarding.runner import OnboardingRunner
from pmsgate.sandbox.app import Sandbox
from pmsgate.sandbox.assistant.seed import SANDBOX_ASSISTANT_TOKEN
from pmsgate.sandbox.customers import (
    SANDBOX_URL,
    ClockSleep,
    customer_document,
    sandbox_http_factory,
)
from pmsgate.sandbox.kross.seed import SANDBOX_PARTNER_API_KEY


@asynccontextmanager
async def live_gateway(settings: Settings, app: Any, clock: ManualClock) -> AsyncIterator[Served]:
    """The demo process's container on the sandbox, its app served on loopback.

    The platform's tool runs call the served gateway; the onboarding's own booking-system
    requests share its limiter and tokens (the same container).
    """
    kross_http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=SANDBOX_URL)
    async with (
        kross_http,
        open_container(
            settings,
            kross_http=kross_http,
            http_factory=sandbox_http_factory(app),
            clock=clock,
            sleep=ClockSleep(clock),
        ) as container,
    ):
        served = create_app(settings, container=container)
        async with served.router.lifespan_context(served), served_on_loopback(served) as url:
            yield Served(url, container)


@dataclass(frozen=True)
class Served:
    """The served gateway's URL and the container behind it."""

    url: str
    container: Container

    @property
    def onboarding(self) -> OnboardingServices:
        """The container's onboarding services, told the gateway's public URL."""
        settings = self.container.settings.model_copy(update={"gateway_public_url": self.url})
        return replace(self.container.onboarding, settings=settings)


# The console's address in the demo's messages (the web chapter serves the app under it).
CONSOLE_URL = "http://pmsgate.local"


def sandbox_settings(data_dir: Path, **overrides: Any) -> Settings:
    """Settings of a fresh SQLite database and vault, every upstream the in-process sandbox."""
    values: dict[str, Any] = {
        "data_dir": data_dir,
        "database_url": None,
        "redis_url": None,
        "secret_keys": SecretStr(generate_key_spec("demo")),
        "partner_api_key": SecretStr(SANDBOX_PARTNER_API_KEY),
        "kross_base_url": f"{SANDBOX_URL}/kross",
        "assistant_api_url": f"{SANDBOX_URL}/assistant",
        "assistant_api_token": SecretStr(SANDBOX_ASSISTANT_TOKEN),
        "notion_api_url": f"{SANDBOX_URL}/notion",
    }
    return Settings(**(values | overrides))


def demo_facilities(sandbox: Sandbox) -> tuple[dict[str, Any], dict[str, Any]]:
    """The seeded facilities the demo onboards: a partner one (Route A) and an own-key one (B)."""
    facilities = sandbox.kross.facility_summaries()
    partner = next(f for f in facilities if f["kind"] == "partner")
    own = next(f for f in facilities if f["kind"] == "own")
    return partner, own


def prepare_route_a(sandbox: Sandbox) -> str:
    """The partner customer's workspace, already syncing listings from the booking system."""
    partner, _ = demo_facilities(sandbox)
    workspace = sandbox.assistant.create_workspace(
        str(partner["name"]), f"sandbox-{partner['hotel_id']}"
    )
    sandbox.assistant.set_kross_connection(
        workspace.id, partner["hotel_id"], partner["username"], partner["password"]
    )
    return workspace.id


def customer_file_of(sandbox: Sandbox, facility: dict[str, Any]) -> CustomerFile:
    """The customer file of a seeded facility and its notes workspace."""
    notes = next(w for w in sandbox.notion.workspaces() if w["hotel_id"] == facility["hotel_id"])
    return parse_customer_file(customer_document(facility, notes), env={})


async def onboard_demo_customers(
    runner: OnboardingRunner, sandbox: Sandbox, story: Story
) -> list[tuple[str, RunReport]]:
    """Run the runbook for both demo customers, then print their checklists side by side."""
    reports: list[tuple[str, RunReport]] = []
    for facility in demo_facilities(sandbox):
        report = await runner.run(customer_file_of(sandbox, facility))
        reports.append((str(facility["name"]), report))
    show_checklists(story, reports)
    return reports


# A step's status in a column a few letters wide.
SHORT_STATUS = {"waiting": "a person", "would_do": "would do", "not_done": "not done"}


def show_checklists(story: Story, reports: list[tuple[str, RunReport]]) -> None:
    """The customers' runs side by side, one row per step; then what waits for a person."""
    for name, report in reports:
        story.say(
            f"Route {report.route}: [bold]{name}[/] (customer {report.student_id}), "
            f"run {report.status}."
        )
    by_step: dict[int, tuple[str, list[str]]] = {}
    for column, (_, report) in enumerate(reports):
        for outcome in report.outcomes:
            _, statuses = by_step.setdefault(outcome.number, (outcome.title, []))
            statuses.extend(["-"] * (column - len(statuses)))
            statuses.append(SHORT_STATUS.get(outcome.status, outcome.status))
    routes = [f"Route {report.route}" for _, report in reports]
    story.table(
        "The 17 onboarding steps, as each run left them",
        ["#", "step", *routes],
        [[str(number), title, *statuses] for number, (title, statuses) in sorted(by_step.items())],
        wrap="step",
        right={"#"},
    )
    for _, report in reports:
        for outcome in report.waiting:
            _waiting(story, report.student_id, outcome)


def _waiting(story: Story, student_id: str, outcome: StepOutcome) -> None:
    """A step waiting for a person: its items, when it is due, the command that confirms it."""
    items = re.findall(r"\[([\w-]+)\]", outcome.waiting_for or "")
    due = f", due {outcome.due.isoformat()}" if outcome.due else ""
    story.plain(
        f"{student_id} waits for a person at step {outcome.number} ({outcome.title}{due}): "
        + (", ".join(items) or outcome.message)
        + "."
    )
    if outcome.fix:
        story.own_line("Each item is confirmed with:", outcome.fix)


@dataclass(frozen=True)
class Onboarded:
    """What the onboarding chapter leaves behind for the next one: the sandbox and the database."""

    sandbox: Sandbox
    settings: Settings
    clock: ManualClock


async def onboarding_chapter(story: Story, data_dir: Path, *, seed: int) -> Onboarded:
    """Onboard a partner customer with listings (Route A) and an own-key one without (Route B)."""
    story.chapter(4, "Onboarding two customers: the 17-step runbook")
    clock = ManualClock()
    sandbox = Sandbox(seed=seed, clock=clock)
    app = sandbox.asgi_app()
    partner, _ = demo_facilities(sandbox)
    base = sandbox_settings(data_dir, limiter_wait_s=0.0, public_url=CONSOLE_URL)
    workspace_id = prepare_route_a(sandbox)
    async with live_gateway(base, app, clock) as served:
        runner = OnboardingRunner(served.onboarding)
        reports = await onboard_demo_customers(runner, sandbox, story)
        before = sandbox.assistant.stats.requests_by_route.copy()
        invitations = len(list((data_dir / "outbox").glob("invite.*.eml")))
        again = await runner.run(customer_file_of(sandbox, partner))
        invitations_again = len(list((data_dir / "outbox").glob("invite.*.eml"))) - invitations
        writes = sum(
            n - before.get(route, 0)
            for route, n in sandbox.assistant.stats.requests_by_route.items()
            if not route.startswith("GET ")
        )
    nodes = sum(1 for n in sandbox.assistant.nodes(workspace_id) if not n.is_directory)
    for _, report in reports:
        done = sum(1 for o in report.outcomes if o.status == "done")
        waiting = [o.id for o in report.outcomes if o.status == "waiting"]
        story.measured(
            "Onboarding",
            f"Route {report.route}: {done} steps done, "
            f"{len(waiting)} waiting for a person ({', '.join(waiting) or 'none'})",
        )
    changed = any(o.applied for o in again.outcomes) or writes or invitations_again
    second = "changed something" if changed else "nothing changed"
    story.say(
        f"Route A knowledge base: {nodes} nodes. Console accounts created and invited: "
        f"{invitations} (one per customer, a one-time link to choose a password). A second "
        f"onboarding run of the Route A customer: {again.status}, [bold]{second}[/] "
        f"({writes} assistant-platform writes, {invitations_again} invitations)."
    )
    story.measured(
        "Onboarding",
        f"{nodes} knowledge nodes, {invitations} console invitations; a second run: "
        f"{second} ({writes} assistant-platform writes)",
    )
    return Onboarded(sandbox=sandbox, settings=base, clock=clock)
