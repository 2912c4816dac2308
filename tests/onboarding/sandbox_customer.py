"""A seeded sandbox customer to onboard: its customer file, and the services on the emulators.

``onboarding_sandbox(database_url, data_dir)`` builds the in-process
:class:`~pmsgate.sandbox.app.Sandbox` on a ManualClock, the onboarding services whose
httpx clients all talk to its ASGI app (a ``sleep`` that moves the clock: no waits),
and the customer file of one seeded facility, with its secrets as ``${ENV}``
references and the environment that resolves them. Nothing is enrolled: onboarding
does that. ``upstream_writes`` counts the writes the emulators have seen.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from pmsgate.onboarding.context import OnboardingServices
from pmsgate.onboarding.customer_file import CustomerFile, parse_customer_file
from pmsgate.sandbox.customers import customer_document as sandbox_customer_document
from tests.customers.support import (
    SandboxSetup,
    give_pms_connection,
    sandbox_http_factory,
    sandbox_setup,
)

CONTRACT_PRICE = "price_sandbox_partner"
PLATFORM_ADMIN = "onboarding@platform-team.example"
GATEWAY_URL = "https://gateway.sandbox.test"


def student_id_of(facility: Mapping[str, Any]) -> str:
    """The student_id given to the customer of a seeded facility."""
    return f"stu-{facility['hotel_id']}"


def customer_document(
    facility: Mapping[str, Any], notes: Mapping[str, Any], **changes: Any
) -> tuple[dict[str, Any], dict[str, str]]:
    """The customer file of a seeded facility (secrets as ${ENV}) and the env resolving them."""
    hotel_id = str(facility["hotel_id"])
    document = sandbox_customer_document(facility, notes)
    env = {
        f"KROSS_PASSWORD_{hotel_id}": str(facility["password"]),
        f"NOTION_TOKEN_{hotel_id}": str(notes["token"]),
    }
    booking = document["booking_system"]
    booking.pop("name")
    booking["password"] = f"${{KROSS_PASSWORD_{hotel_id}}}"
    if facility["kind"] == "own":
        env[f"KROSS_API_KEY_{hotel_id}"] = str(facility["api_key"])
        booking["api_key"] = f"${{KROSS_API_KEY_{hotel_id}}}"
    document["notes"]["token"] = f"${{NOTION_TOKEN_{hotel_id}}}"
    del document["wifi"]  # this customer's WiFi credentials are gathered from its pages
    document["platform_admins"] = [PLATFORM_ADMIN]
    document["channels"] = {
        "whatsapp_number": True,
        "voice_agent": {
            "language": "it",
            "fixed_number": "+39 02 8734 1100",
            "forwarding_from": "+39 031 555 0199",
        },
    }
    for path, value in changes.items():
        target = document
        *parents, last = path.split("__")
        for part in parents:
            target = target.setdefault(part, {})
        target[last] = value
    return document, env


@dataclass
class OnboardingSandbox(SandboxSetup):
    """The sandbox, the onboarding services on it, and one seeded customer's file."""

    services: OnboardingServices
    document: dict[str, Any]
    env: dict[str, str]

    @property
    def student_id(self) -> str:
        """The customer's student_id."""
        return str(self.document["student_id"])

    @property
    def hotel_id(self) -> str:
        """The customer's facility."""
        return str(self.facility["hotel_id"])

    def file(self, **changes: Any) -> CustomerFile:
        """The parsed customer file (with ``a__b=value`` changes)."""
        document, env = customer_document(self.facility, self.notes)
        for path, value in changes.items():
            target = document
            *parents, last = path.split("__")
            for part in parents:
                target = target.setdefault(part, {})
            target[last] = value
        return parse_customer_file(document, env={**env, **self.env})

    def secrets(self) -> list[str]:
        """Every secret of the customer file (none may ever be printed or recorded)."""
        return [value for value in self.env.values() if len(value) >= 6]

    def write(self, path: Path, **changes: Any) -> Path:
        """Write the customer file as YAML (secrets stay ${ENV} references)."""
        document, _ = customer_document(self.facility, self.notes, **changes)
        path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
        return path

    async def control(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """A call to the emulators' /_sandbox controls."""
        async with sandbox_http_factory(self.app)() as http:
            answer = await http.request(method, path, **kwargs)
            answer.raise_for_status()
            return answer

    async def connect_listings(self) -> None:
        """Give the platform workspace its booking-system connection (listings appear)."""
        config = await self.services.customers.workspaces.get(self.student_id)
        assert config.workspace_id is not None
        async with sandbox_http_factory(self.app)() as http:
            await give_pms_connection(http, config.workspace_id, self.facility)

    def prepare_route_a(self) -> str:
        """The customer's platform workspace exists with its booking-system connection.

        As when the customer connected the booking system in the app before onboarding:
        step 5 adopts the workspace (by slug) and its listings make step 9 choose Route A.
        """
        workspace = self.sandbox.assistant.create_workspace(
            str(self.facility["name"]), str(self.document["workspace"]["slug"])
        )
        self.sandbox.assistant.set_kross_connection(
            workspace.id,
            self.hotel_id,
            str(self.facility["username"]),
            str(self.facility["password"]),
        )
        return workspace.id

    def upstream_writes(self) -> dict[str, int]:
        """Writes the emulators have seen: platform non-GET requests, notes block changes."""
        routes = self.sandbox.assistant.stats.requests_by_route
        notes = self.sandbox.notion.stats
        return {
            "platform": sum(n for route, n in routes.items() if not route.startswith("GET ")),
            "notes": notes.appends
            + notes.blocks_created
            + notes.blocks_updated
            + notes.blocks_archived,
        }


@asynccontextmanager
async def onboarding_sandbox(
    database_url: str,
    data_dir: Path,
    *,
    seed: int = 7,
    student_index: int = 1,
    settings_overrides: Mapping[str, Any] | None = None,
) -> AsyncIterator[OnboardingSandbox]:
    """A fresh sandbox and onboarding services on it (see the module docstring)."""
    overrides: dict[str, Any] = {"gateway_public_url": GATEWAY_URL, **(settings_overrides or {})}
    setup = sandbox_setup(
        database_url, seed=seed, student_index=student_index, data_dir=data_dir, **overrides
    )
    document, env = customer_document(setup.facility, setup.notes)
    async with setup.open_container() as container:
        yield OnboardingSandbox(
            **setup.parts(), services=container.onboarding, document=document, env=env
        )
