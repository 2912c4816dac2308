"""A customer enrolled on the in-process emulators, through the real services and clients.

``enrolled_sandbox(database_url)`` builds a :class:`~pmsgate.sandbox.app.Sandbox`
on a ManualClock, :class:`~pmsgate.customers.context.CustomerServices` whose httpx
clients all talk to the sandbox's ASGI app, and enrols one seeded facility as a
customer with the service functions (never raw SQL): customer row, workspace on the
platform emulator + configuration, the workspace's booking-system connection, the
kross integration row linked to a registered gateway facility, the notes
integration (token encrypted), and the registry filled by the listings sync.

Waits never block: the injected ``sleep`` moves the shared ManualClock, which is
also the emulators' clock, so throttles and rate-limit buckets move together.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from fastapi import FastAPI
from pydantic import SecretStr

from pmsgate.clock import ManualClock
from pmsgate.config import Settings
from pmsgate.container import Container, open_container
from pmsgate.customers.context import (
    CustomerContext,
    CustomerServices,
    HttpFactory,
)
from pmsgate.customers.service import (
    RegistrySyncResult,
    Subscription,
    configure_workspace,
    connect_notion,
    link_kross,
    register_customer,
    set_kross_status,
    sync_registry,
)
from pmsgate.gateway.facilities import NewFacility
from pmsgate.gateway.vault import generate_key_spec
from pmsgate.sandbox.app import Sandbox
from pmsgate.sandbox.assistant.seed import SANDBOX_ASSISTANT_TOKEN
from pmsgate.sandbox.kross.seed import SANDBOX_PARTNER_API_KEY
from pmsgate.storage.customers import CustomerProfile
from pmsgate.storage.integrations import IntegrationView
from tests.support.clocks import RecordingSleep

SANDBOX_URL = "http://sandbox.test"
ASSISTANT_URL = f"{SANDBOX_URL}/assistant"
NOTION_URL = f"{SANDBOX_URL}/notion"
KROSS_URL = f"{SANDBOX_URL}/kross"
CONTRACT_PRICE = "price_sandbox_partner"
KROSS_ERROR_REASON = "booking-system authentication failed (the API password was changed)"


ClockSleep = RecordingSleep  # the name these tests know it by


def sandbox_http_factory(app: FastAPI) -> HttpFactory:
    """Builds httpx clients whose transport is the sandbox app (one per upstream client)."""

    def factory() -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=SANDBOX_URL)

    return factory


def sandbox_settings(database_url: str, **overrides: Any) -> Settings:
    """Settings pointing every upstream at the in-process sandbox, with a fresh vault key."""
    values: dict[str, Any] = {
        "database_url": database_url,
        "secret_keys": SecretStr(generate_key_spec("t1")),
        "partner_api_key": SecretStr(SANDBOX_PARTNER_API_KEY),
        "kross_base_url": KROSS_URL,
        "assistant_api_url": ASSISTANT_URL,
        "assistant_api_token": SecretStr(SANDBOX_ASSISTANT_TOKEN),
        "notion_api_url": NOTION_URL,
    }
    values.update(overrides)
    return Settings(**values)


def student_id_of(facility: Mapping[str, Any]) -> str:
    """The student_id the support gives the customer of a seeded facility."""
    return f"stu-{facility['hotel_id']}"


def profile_of(facility: Mapping[str, Any]) -> CustomerProfile:
    """The customer profile of a seeded facility."""
    return CustomerProfile(
        student_id=student_id_of(facility),
        email=f"owner-{facility['hotel_id']}@example.com",
        name=str(facility["name"]),
        kind=str(facility["kind"]),
        contract_ref=f"C-{facility['hotel_id']}",
        contract_price_id=CONTRACT_PRICE,
    )


@dataclass
class EnrolledSandbox:
    """The sandbox, the services on it, and the enrolled customer's seeded ground truth."""

    sandbox: Sandbox
    container: Container  # the test process's container, on the sandbox
    student_id: str
    facility: dict[str, Any]  # the kross facility summary: hotel_id, credentials, apartments
    notion_ground_truth: dict[str, Any]  # the notes workspace: token, database_id, pages
    settings: Settings
    clock: ManualClock
    sleep: ClockSleep
    app: FastAPI
    gateway_facility_registered: bool = False

    @property
    def services(self) -> CustomerServices:
        """The customer services of the container."""
        return self.container.customers

    last_sync: RegistrySyncResult | None = None
    _original_password: str = field(default="", repr=False)

    @property
    def hotel_id(self) -> str:
        """The enrolled facility's hotel_id."""
        return str(self.facility["hotel_id"])

    @property
    def room_type_ids(self) -> list[str]:
        """The booking system's room types of the facility, as registry keys."""
        return sorted(str(a["id_room_type"]) for a in self.facility["apartments"])

    @property
    def notes_pages(self) -> list[dict[str, Any]]:
        """The ground truth of every seeded notes page of the customer."""
        pages: list[dict[str, Any]] = self.notion_ground_truth["pages"]
        return pages

    async def context(self) -> CustomerContext:
        """The customer's context now."""
        return await self.services.context(self.student_id)

    @asynccontextmanager
    async def http(self) -> AsyncIterator[httpx.AsyncClient]:
        """An httpx client on the sandbox app (for the emulators' /_sandbox controls)."""
        async with sandbox_http_factory(self.app)() as client:
            yield client

    async def sync(self) -> RegistrySyncResult:
        """Run the listings sync of the customer."""
        self.last_sync = await sync_registry(self.services, self.student_id)
        return self.last_sync

    async def break_kross(self, reason: str = KROSS_ERROR_REASON) -> IntegrationView:
        """Spec §3: the API password changes upstream → listings 0, the kross row in ``error``."""
        self.sandbox.kross.change_password(self.hotel_id, self._original_password + "-changed")
        if self.gateway_facility_registered:
            await self.services.facilities.mark_error(self.hotel_id, reason)
        return await set_kross_status(self.services, self.student_id, "error", error=reason)

    async def restore_kross(self) -> IntegrationView:
        """Back to the enrolled password: listings return, the kross row ``connected``."""
        self.sandbox.kross.change_password(self.hotel_id, self._original_password)
        if self.gateway_facility_registered:
            await self.services.facilities.mark_connected(self.hotel_id)
        return await set_kross_status(self.services, self.student_id, "connected")


@asynccontextmanager
async def enrolled_sandbox(
    database_url: str,
    *,
    seed: int = 7,
    clock: ManualClock | None = None,
    student_index: int = 0,
    settings_overrides: Mapping[str, Any] | None = None,
    register_facility: bool = True,
    with_notion: bool = True,
    sync: bool = True,
    allowlisted: bool = True,
) -> AsyncIterator[EnrolledSandbox]:
    """A sandbox with one seeded facility enrolled as a customer (see the module docstring).

    ``with_notion=False`` leaves the notes integration out, ``sync=False`` the registry
    empty, ``register_facility=False`` the kross row unlinked to a gateway facility,
    ``allowlisted=False`` the customer's e-mail off the knowledge allowlist (step 2).
    """
    clock = clock or ManualClock()
    sleep = ClockSleep(clock)
    sandbox = Sandbox(seed=seed, clock=clock)
    app = sandbox.asgi_app()
    settings = sandbox_settings(database_url, **dict(settings_overrides or {}))
    facility = sandbox.kross.facility_summaries()[student_index]
    truth = next(w for w in sandbox.notion.workspaces() if w["hotel_id"] == facility["hotel_id"])
    async with open_container(
        settings, clock=clock, http_factory=sandbox_http_factory(app), sleep=sleep
    ) as container:
        enrolled = EnrolledSandbox(
            sandbox=sandbox,
            container=container,
            student_id=student_id_of(facility),
            facility=facility,
            notion_ground_truth=truth,
            settings=settings,
            clock=clock,
            sleep=sleep,
            app=app,
            _original_password=str(facility["password"]),
        )
        await enrol(
            enrolled,
            register_facility=register_facility,
            with_notion=with_notion,
            allowlisted=allowlisted,
        )
        if sync:
            await enrolled.sync()
        yield enrolled


async def enrol(
    enrolled: EnrolledSandbox,
    *,
    register_facility: bool = True,
    with_notion: bool = True,
    allowlisted: bool = True,
) -> None:
    """Enrol the facility's customer step by step through the service functions."""
    services, facility = enrolled.services, enrolled.facility
    profile = profile_of(facility)
    await register_customer(
        services,
        profile,
        subscription=Subscription("sub_" + enrolled.hotel_id, "active", CONTRACT_PRICE),
    )
    if allowlisted:
        # Step 2: the knowledge sync is open only to customers on the allowlist.
        await services.allowlist.put(profile.email)
    config = await configure_workspace(
        services,
        enrolled.student_id,
        plan_limit_usd=150,
        alert_threshold_pct=80,
        workspace_slug=f"sandbox-{enrolled.hotel_id}",
    )
    assert config.workspace_id is not None
    async with enrolled.http() as http:
        answer = await http.put(
            f"/assistant/_sandbox/workspaces/{config.workspace_id}/pms-connection",
            json={
                "hotel_id": enrolled.hotel_id,
                "username": facility["username"],
                "password": facility["password"],
            },
        )
        answer.raise_for_status()
    # The natural order: the row first (its id is what the facility is registered with).
    row = await link_kross(services, enrolled.student_id, enrolled.hotel_id)
    if register_facility:
        await services.facilities.add(
            NewFacility(
                hotel_id=enrolled.hotel_id,
                username=facility["username"],
                password=SecretStr(facility["password"]),
                kind=facility["kind"],
                api_key=SecretStr(facility["api_key"]) if facility["kind"] == "own" else None,
                integration_id=row.id,
                name=facility["name"],
            )
        )
        await link_kross(services, enrolled.student_id, enrolled.hotel_id)
        enrolled.gateway_facility_registered = True
    if with_notion:
        await connect_notion(
            services,
            enrolled.student_id,
            SecretStr(enrolled.notion_ground_truth["token"]),
            enrolled.notion_ground_truth["database_id"],
            notes_workspace_id=enrolled.notion_ground_truth["workspace_id"],
        )
