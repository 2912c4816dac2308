"""The audit trail after a whole scenario (issue 14 item 5): onboarding, admin calls, a payment.

On the sandbox (all three emulators through the real clients, a ManualClock, no waits):
customer A is onboarded (Route A), an admin mints A a payment key over the admin API and
the key pays through the gateway; customer B is onboarded up to its custom tools. Then:

- each applied onboarding step left one ``onboarding.side_effect`` for its customer;
- the trail holds none of the secrets the scenario used (passwords, API keys and tokens,
  the raw gateway keys, the admin token);
- A's events (its onboarding, its facility's payment and admin calls) are A's only: B
  sees its own and none of A's, and the other way round.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import SecretStr

from pmsgate.app import create_app
from pmsgate.clock import ManualClock
from pmsgate.container import Container, open_container
from pmsgate.gateway.keys import display_prefix
from pmsgate.gateway.scopes import write_scope
from pmsgate.onboarding.customer_file import CustomerFile, parse_customer_file
from pmsgate.onboarding.registry import STEPS
from pmsgate.onboarding.runner import OnboardingRunner
from pmsgate.sandbox.app import Sandbox
from pmsgate.storage.audit import AuditEventView, AuditFilter
from tests.customers.support import ClockSleep, sandbox_http_factory, sandbox_settings
from tests.support.payments import PAYMENT, payment_body

from .sandbox_customer import GATEWAY_URL, customer_document, student_id_of

pytestmark = pytest.mark.anyio

ADMIN_TOKEN = "admin-token-for-the-audit-scenario-0123"
A_INDEX, B_INDEX = 1, 0


@dataclass
class Scenario:
    sandbox: Sandbox
    container: Container
    app: FastAPI
    clock: ManualClock
    files: dict[str, CustomerFile]
    facilities: dict[str, dict[str, Any]]
    secrets: list[str]

    def gateway(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app), base_url="http://gateway.test"
        )

    async def events(self, where: AuditFilter | None = None) -> list[AuditEventView]:
        page = await self.container.audit.page(where or AuditFilter(), limit=500)
        assert page.next_cursor is None
        return page.events

    async def events_of(self, student_id: str) -> list[AuditEventView]:
        owner = await self.container.audit.owner(student_id)
        return await self.events(AuditFilter(owner=owner))


@pytest.fixture
async def scenario(database_url: str, tmp_path: Path) -> AsyncIterator[Scenario]:
    clock = ManualClock()
    sandbox = Sandbox(seed=7, clock=clock)
    sandbox_app = sandbox.asgi_app()
    settings = sandbox_settings(
        database_url,
        data_dir=tmp_path,
        gateway_public_url=GATEWAY_URL,
        admin_token=SecretStr(ADMIN_TOKEN),
        limiter_wait_s=0.0,
    )
    files: dict[str, CustomerFile] = {}
    facilities: dict[str, dict[str, Any]] = {}
    secrets = [ADMIN_TOKEN]
    for label, index in (("A", A_INDEX), ("B", B_INDEX)):
        facility = sandbox.kross.facility_summaries()[index]
        notes = next(
            w for w in sandbox.notion.workspaces() if w["hotel_id"] == facility["hotel_id"]
        )
        document, env = customer_document(facility, notes)
        files[label] = parse_customer_file(document, env=env)
        facilities[label] = facility
        secrets += [value for value in env.values() if len(value) >= 6]
    for field in ("assistant_api_token", "partner_api_key", "secret_keys"):
        value = getattr(settings, field)
        if value is not None:
            secrets.append(value.get_secret_value())
    async with open_container(
        settings,
        clock=clock,
        http_factory=sandbox_http_factory(sandbox_app),
        sleep=ClockSleep(clock),
    ) as container:
        app = create_app(settings, container=container)
        async with app.router.lifespan_context(app):
            yield Scenario(sandbox, container, app, clock, files, facilities, secrets)


def _route_a(scenario: Scenario) -> None:
    """A's workspace exists with its booking-system connection: step 9 chooses Route A."""
    facility, document = scenario.facilities["A"], scenario.files["A"]
    assistant = scenario.sandbox.assistant
    workspace = assistant.create_workspace(document.name, document.workspace.slug or "")
    assistant.set_kross_connection(
        workspace.id,
        str(facility["hotel_id"]),
        str(facility["username"]),
        str(facility["password"]),
    )


async def test_a_scenario_leaves_each_customer_its_own_events_and_no_secret_anywhere(
    scenario: Scenario,
) -> None:
    _route_a(scenario)
    services = scenario.container.onboarding
    report_a = await OnboardingRunner(services).run(scenario.files["A"])
    # B up to its custom tools: its workspace, its key stored in the workspace's secrets.
    report_b = await OnboardingRunner(services, STEPS[:6]).run(scenario.files["B"])
    assert report_a.status == "succeeded", (report_a.ended_at_step, report_a.message)
    applied_a = {o.id for o in report_a.outcomes if o.applied}
    applied_b = {o.id for o in report_b.outcomes if o.applied}
    assert {"workspace", "custom-tools"} <= applied_a & applied_b

    hotel_a = str(scenario.facilities["A"]["hotel_id"])
    async with scenario.gateway() as client:
        minted = await client.post(
            f"/admin/facilities/{hotel_a}/keys",
            json={"label": "payments", "scopes": [write_scope(PAYMENT)]},
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        assert minted.status_code == 201, minted.text
        payment_key = minted.json()["gateway_key"]
        today = scenario.clock.now().date()
        paid = await client.post(
            f"/v1/operations/{PAYMENT}",
            json=payment_body(scenario.sandbox.kross, hotel_a, today, 40),
            headers={"Authorization": f"Bearer {payment_key}", "Idempotency-Key": "scenario-1"},
        )
        assert paid.status_code == 200, paid.text

    # Every raw gateway key of the scenario: the payment key and the keys onboarding stored.
    stored_keys = [
        secret.value
        for workspace in scenario.sandbox.assistant.workspaces()
        for secret in scenario.sandbox.assistant.secrets(workspace.id)
        if secret.value.startswith("pgw_")  # not the gateway's URL stored next to it
    ]
    secrets = [*scenario.secrets, payment_key, *stored_keys]
    assert len(stored_keys) >= 2

    every = await scenario.events()
    text = "\n".join(json.dumps(event.as_json()) for event in every)
    leaked = [secret[:4] + "…" for secret in secrets if secret in text]
    assert leaked == []

    # Each applied step left one side effect for its customer, named by the runbook's runner.
    student_a, student_b = (
        student_id_of(scenario.facilities["A"]),
        student_id_of(scenario.facilities["B"]),
    )
    side_effects = [e for e in every if e.action == "onboarding.side_effect"]
    by_customer = {
        student: sorted(
            e.details["step"] for e in side_effects if e.subject == f"customer:{student}"
        )
        for student in (student_a, student_b)
    }
    assert by_customer == {student_a: sorted(applied_a), student_b: sorted(applied_b)}
    assert {(e.actor_kind, e.actor) for e in side_effects} == {("cli", "pmsgate onboard")}
    # Every key the steps minted (each facility's first key, each workspace's tools:read
    # key) names the runbook as its actor; the one other key is the admin's payment key.
    minted = [e for e in every if e.action == "key.minted"]
    assert sorted((e.actor_kind, e.actor) for e in minted) == [
        ("admin", "admin-api"),
        *[("system", "onboarding")] * 4,
    ]
    tools_a = next(
        e
        for e in side_effects
        if e.subject == f"customer:{student_a}" and e.details["step"] == "custom-tools"
    )
    assert tools_a.outcome == "success" and tools_a.customer_id is not None
    assert tools_a.details["evidence"]  # what is there now, e.g. the stored key's prefix

    # A sees its onboarding, its facility's payment and the admin call on its facility.
    mine = await scenario.events_of(student_a)
    theirs = await scenario.events_of(student_b)
    actions_a = {e.action for e in mine}
    assert {"onboarding.side_effect", "key.used_for_write", "admin.action"} <= actions_a
    payment = next(e for e in mine if e.action == "key.used_for_write")
    assert payment.actor == display_prefix(payment_key)
    assert payment.details["idempotency_key"] == "scenario-1"
    assert "onboarding.side_effect" in {e.action for e in theirs}
    # ... and neither sees the other's.
    assert {e.id for e in mine}.isdisjoint({e.id for e in theirs})
    assert all(f"customer:{student_a}" != e.subject for e in theirs)
    assert all(e.action != "key.used_for_write" for e in theirs)
