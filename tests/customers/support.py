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
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field, fields
from typing import Any

import httpx
from fastapi import FastAPI
from pydantic import SecretStr

from pmsgate.clock import ManualClock
from pmsgate.config import Settings
from pmsgate.container import Container, open_container
from pmsgate.customers import service as customer_service
from pmsgate.customers.context import (
    CustomerContext,
    CustomerServices,
    HttpFactory,
)
from pmsgate.gateway.vault import generate_key_spec
from pmsgate.sandbox.app import Sandbox
from pmsgate.sandbox.assistant.seed import SANDBOX_ASSISTANT_TOKEN
from pmsgate.sandbox.kross.seed import SANDBOX_PARTNER_API_KEY
from pmsgate.storage.customers import CustomerProfile
from pmsgate.storage.integrations import IntegrationView
from tests.gateway.facility_support import new_facility_from_seed
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
class SandboxSetup:
    """A fresh sandbox on a ManualClock, settings pointing at it, and one seeded facility."""

    sandbox: Sandbox
    app: FastAPI  # the sandbox's ASGI app
    clock: ManualClock
    sleep: ClockSleep
    settings: Settings
    facility: dict[str, Any]  # the kross facility summary: hotel_id, credentials, apartments
    notes: dict[str, Any]  # its notes workspace: token, database_id, pages

    def parts(self) -> dict[str, Any]:
        """The fields of the set-up (to build a subclass from it)."""
        return {f.name: getattr(self, f.name) for f in fields(SandboxSetup)}

    def open_container(self) -> AbstractAsyncContextManager[Container]:
        """A container on the settings whose upstream clients talk to the sandbox app."""
        return open_container(
            self.settings,
            clock=self.clock,
            http_factory=sandbox_http_factory(self.app),
            sleep=self.sleep,
        )


def sandbox_setup(
    database_url: str,
    *,
    seed: int = 7,
    clock: ManualClock | None = None,
    student_index: int = 0,
    **overrides: Any,
) -> SandboxSetup:
    """A sandbox of ``seed`` with its seeded facility ``student_index`` and that facility's
    notes workspace; ``overrides`` go to :func:`sandbox_settings`."""
    clock = clock or ManualClock()
    sandbox = Sandbox(seed=seed, clock=clock)
    facility = sandbox.kross.facility_summaries()[student_index]
    notes = next(w for w in sandbox.notion.workspaces() if w["hotel_id"] == facility["hotel_id"])
    return SandboxSetup(
        sandbox=sandbox,
        app=sandbox.asgi_app(),
        clock=clock,
        sleep=ClockSleep(clock),
        settings=sandbox_settings(database_url, **overrides),
        facility=facility,
        notes=notes,
    )


@dataclass
class EnrolledSandbox(SandboxSetup):
    """The sandbox, the services on it, and the enrolled customer's seeded ground truth."""

    container: Container  # the test process's container, on the sandbox
    student_id: str
    gateway_facility_registered: bool = False

    @property
    def notion_ground_truth(self) -> dict[str, Any]:
        """The notes workspace of the customer: token, database_id, pages."""
        return self.notes

    @property
    def services(self) -> CustomerServices:
        """The customer services of the container."""
        return self.container.customers

    last_sync: customer_service.RegistrySyncResult | None = None
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

    async def sync(self) -> customer_service.RegistrySyncResult:
        """Run the listings sync of the customer."""
        self.last_sync = await customer_service.sync_registry(self.services, self.student_id)
        return self.last_sync

    async def break_kross(self, reason: str = KROSS_ERROR_REASON) -> IntegrationView:
        """Spec §3: the API password changes upstream → listings 0, the kross row in ``error``."""
        self.sandbox.kross.change_password(self.hotel_id, self._original_password + "-changed")
        if self.gateway_facility_registered:
            await self.services.facilities.mark_error(self.hotel_id, reason)
        return await customer_service.set_kross_status(
            self.services, self.student_id, "error", error=reason
        )

    async def restore_kross(self) -> IntegrationView:
        """Back to the enrolled password: listings return, the kross row ``connected``."""
        self.sandbox.kross.change_password(self.hotel_id, self._original_password)
        if self.gateway_facility_registered:
            await self.services.facilities.mark_connected(self.hotel_id)
        return await customer_service.set_kross_status(self.services, self.student_id, "connected")


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
    setup = sandbox_setup(
        database_url,
        seed=seed,
        clock=clock,
        student_index=student_index,
        **dict(settings_overrides or {}),
    )
    async with setup.open_container() as container:
        enrolled = EnrolledSandbox(
            **setup.parts(),
            container=container,
            student_id=student_id_of(setup.facility),
            _original_password=str(setup.facility["password"]),
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


async def give_pms_connection(
    sandbox: httpx.AsyncClient, workspace_id: str, facility: Mapping[str, Any]
) -> None:
    """Give the emulated platform's workspace its connection to ``facility`` (through the
    ``sandbox`` client, on the sandbox's root): its listings appear."""
    answer = await sandbox.put(
        f"/assistant/_sandbox/workspaces/{workspace_id}/pms-connection",
        json={
            "hotel_id": str(facility["hotel_id"]),
            "username": facility["username"],
            "password": facility["password"],
        },
    )
    answer.raise_for_status()


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
    await customer_service.register_customer(
        services,
        profile,
        subscription=customer_service.Subscription(
            "sub_" + enrolled.hotel_id, "active", CONTRACT_PRICE
        ),
    )
    if allowlisted:
        # Step 2: the knowledge sync is open only to customers on the allowlist.
        await services.allowlist.put(profile.email)
    config = await customer_service.configure_workspace(
        services,
        enrolled.student_id,
        plan_limit_usd=150,
        alert_threshold_pct=80,
        workspace_slug=f"sandbox-{enrolled.hotel_id}",
    )
    assert config.workspace_id is not None
    async with enrolled.http() as http:
        await give_pms_connection(http, config.workspace_id, facility)
    # The natural order: the row first (its id is what the facility is registered with).
    row = await customer_service.link_kross(services, enrolled.student_id, enrolled.hotel_id)
    if register_facility:
        await services.facilities.add(new_facility_from_seed(facility, integration_id=row.id))
        await customer_service.link_kross(services, enrolled.student_id, enrolled.hotel_id)
        enrolled.gateway_facility_registered = True
    if with_notion:
        await customer_service.connect_notion(
            services,
            enrolled.student_id,
            SecretStr(enrolled.notion_ground_truth["token"]),
            enrolled.notion_ground_truth["database_id"],
            notes_workspace_id=enrolled.notion_ground_truth["workspace_id"],
        )
