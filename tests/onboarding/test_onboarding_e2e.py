"""Whole onboardings through the runner on the emulators: Route A and Route B, then a re-run.

Everything is real but the upstreams: the runner, every step, the services and their
clients, the emulators over ASGI; for Route B the gateway is served by uvicorn on
loopback, because the custom tools run in a child interpreter on the platform emulator.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pmsgate.clock import ManualClock
from pmsgate.config import Settings
from pmsgate.container import open_container
from pmsgate.onboarding.context import OnboardingServices
from pmsgate.onboarding.customer_file import CustomerFile, parse_customer_file
from pmsgate.onboarding.report import RunReport
from pmsgate.onboarding.runner import OnboardingRunner
from pmsgate.sandbox.app import Sandbox
from tests.customers.support import ClockSleep, sandbox_http_factory, sandbox_settings
from tests.e2e.processes import free_port

from .step_support import WRITE_METHODS, customer_document, live_gateway

pytestmark = pytest.mark.anyio

SEED = 7
PARTNER_FOUR = 1  # Route A: a partner customer whose workspace lists four apartments
OWN_TWO = 0  # Route B: an own-key customer whose workspace has no listings
ROUTE_A_STEPS = {"listings-count", "apartment-registry", "knowledge-dry-run", "templates"}


@dataclass
class World:
    """The emulators, the onboarding services on them, and the customer file."""

    sandbox: Sandbox
    app: Any
    clock: ManualClock
    settings: Settings
    services: OnboardingServices
    file: CustomerFile
    facility: dict[str, Any]

    async def onboard(self) -> RunReport:
        """One run of the runbook."""
        return await OnboardingRunner(self.services).run(self.file)

    def assistant_writes(self) -> Counter[str]:
        """Platform write requests so far, by route."""
        routes = self.sandbox.assistant.stats.requests_by_route
        return Counter({k: v for k, v in routes.items() if k.startswith(WRITE_METHODS)})

    def notion_writes(self) -> Counter[str]:
        """Notes write requests so far (a database query is a POST, but a read)."""
        counts = self.sandbox.notion.stats.requests_by_endpoint
        return Counter(
            {k: v for k, v in counts.items() if k.startswith(WRITE_METHODS) and "/query" not in k}
        )


@asynccontextmanager
async def world(database_url: str, data_dir: Path, student_index: int) -> AsyncIterator[World]:
    """A fresh sandbox and onboarding services; nothing of the customer exists yet."""
    clock = ManualClock()
    sandbox = Sandbox(seed=SEED, clock=clock)
    app = sandbox.asgi_app()
    facility = sandbox.kross.facility_summaries()[student_index]
    notes = next(w for w in sandbox.notion.workspaces() if w["hotel_id"] == facility["hotel_id"])
    settings = sandbox_settings(
        database_url,
        gateway_public_url=f"http://127.0.0.1:{free_port()}",
        data_dir=data_dir,
    )
    document = customer_document(facility, notes, student_id=f"stu-{facility['hotel_id']}")
    async with open_container(
        settings, clock=clock, http_factory=sandbox_http_factory(app), sleep=ClockSleep(clock)
    ) as container:
        services = container.onboarding
        yield World(
            sandbox=sandbox,
            app=app,
            clock=clock,
            settings=settings,
            services=services,
            file=parse_customer_file(document, env={}),
            facility=facility,
        )


def statuses(report: RunReport) -> dict[str, str]:
    """Each step's status in a run."""
    return {o.id: o.status for o in report.outcomes}


def outcome(report: RunReport, step_id: str) -> Any:
    """One step's outcome in a run."""
    return next(o for o in report.outcomes if o.id == step_id)


async def test_route_a_onboarding_runs_every_step_and_a_second_run_changes_nothing(
    database_url, tmp_path
):
    async with world(database_url, tmp_path, PARTNER_FOUR) as w:
        # The partner link is made on the platform's side: the customer's workspace exists
        # and syncs its listings from the booking system (onboarding finds it by slug).
        store = w.sandbox.assistant
        workspace = store.create_workspace(w.file.name, w.file.workspace.slug or "")
        facility = w.facility
        store.set_kross_connection(
            workspace.id, facility["hotel_id"], facility["username"], facility["password"]
        )

        first = await w.onboard()
        assistant_before, notion_before = w.assistant_writes(), w.notion_writes()
        second = await w.onboard()
        assistant_after, notion_after = w.assistant_writes(), w.notion_writes()
        nodes = store.nodes(workspace.id)

    done = statuses(first)
    assert first.status == "succeeded", (first.ended_at_step, first.message)
    assert first.route == "A"
    assert done["route-choice"] == "done"
    assert all(done[s] == "done" for s in ROUTE_A_STEPS)
    assert done["knowledge-commit"] == "done"
    assert done["route-b-quick-setup"] == "skipped"
    assert done["channels"] == "waiting"  # a person's work, listed, not blocking
    automatable = [o for o in first.outcomes if o.kind != "manual" and o.status != "skipped"]
    assert all(o.status == "done" for o in automatable), [
        (o.id, o.status, o.message) for o in automatable if o.status != "done"
    ]
    commit = outcome(first, "knowledge-commit").evidence["commit"]["counters"]
    assert commit["failed"] == 0 and commit["blockedByTemplate"] == 0
    assert commit["directoriesCreated"] == len(facility["apartments"])
    assert outcome(first, "templates").applied is True  # incomplete pages were patched
    assert len([n for n in nodes if not n.is_directory]) == commit["created"]
    # The second run: everything done, nothing applied, no upstream write.
    assert second.status == "succeeded"
    assert statuses(second) == done
    assert not [o.id for o in second.outcomes if o.applied]
    assert "already synced" in outcome(second, "knowledge-commit").message
    assert assistant_after == assistant_before
    assert notion_after == notion_before


async def test_route_b_onboarding_ends_with_the_agent_calling_check_availability(
    database_url, tmp_path
):
    async with world(database_url, tmp_path, OWN_TWO) as w:
        async with live_gateway(w.settings, w.app, w.clock):
            first = await w.onboard()
            assistant_before = w.assistant_writes()
            second = await w.onboard()
            assistant_after = w.assistant_writes()
        workspace_id = outcome(first, "workspace").evidence["workspace_id"]
        conversations = w.sandbox.assistant.test_conversations(workspace_id)
        tools = w.sandbox.assistant.tools(workspace_id)

    done = statuses(first)
    assert first.status == "succeeded", (first.ended_at_step, first.message)
    assert first.route == "B"
    assert outcome(first, "route-choice").evidence["listings"] == 0
    assert all(done[s] == "skipped" for s in [*ROUTE_A_STEPS, "knowledge-commit"])
    assert done["route-b-quick-setup"] == "done"
    test = outcome(first, "route-b-quick-setup").evidence["availability_test"]
    assert [(c["name"], c["answered"]) for c in test["tool_calls"]] == [
        ("check-availability", True)
    ]
    assert len(tools) == 6 and all(t.enable_globally for t in tools)
    assert len(conversations) == 1
    # The second run asks nothing again and writes nothing.
    assert second.status == "succeeded"
    assert statuses(second) == done
    assert not [o.id for o in second.outcomes if o.applied]
    assert assistant_after == assistant_before
