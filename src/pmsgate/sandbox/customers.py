"""Customer files for the sandbox's seeded facilities, and helpers to run against the sandbox.

Used by the demo (and usable by tests): a seeded facility and its notes workspace
become a customer file ready for `pmsgate onboard`; clients reach the in-process
sandbox through an ASGI transport; throttles wait on a manual clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Protocol

import anyio
import httpx

SANDBOX_URL = "http://sandbox.local"
CONTRACT_PRICE = "price_sandbox_partner"
PLATFORM_ADMIN = "onboarding@platform-team.example"


class AdvancingClock(Protocol):
    """A clock that can be moved forward (ManualClock, FastForwardClock)."""

    def advance(self, seconds: float) -> datetime: ...


class ClockSleep:
    """An injected ``sleep`` that moves the clock instead of waiting."""

    def __init__(self, clock: AdvancingClock) -> None:
        self.clock = clock

    async def __call__(self, seconds: float) -> None:
        self.clock.advance(seconds)
        await anyio.lowlevel.checkpoint()


def sandbox_http_factory(app: Any, base_url: str = SANDBOX_URL) -> Callable[[], httpx.AsyncClient]:
    """Builds httpx clients whose transport is the sandbox app (one per upstream client)."""

    def factory() -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url)

    return factory


def customer_document(facility: Mapping[str, Any], notes: Mapping[str, Any]) -> dict[str, Any]:
    """The customer file (parsed YAML, inline sandbox secrets) of a seeded facility."""
    hotel_id = str(facility["hotel_id"])
    booking: dict[str, Any] = {
        "hotel_id": hotel_id,
        "username": facility["username"],
        "password": facility["password"],
        "name": facility["name"],
    }
    if facility["kind"] == "own":
        booking["api_key"] = facility["api_key"]
    return {
        "student_id": f"stu-{hotel_id}",
        "name": facility["name"],
        "email": f"owner-{hotel_id}@example.com",
        "kind": facility["kind"],
        "contract": {"ref": f"C-{hotel_id}", "price_id": CONTRACT_PRICE},
        "subscription": {"id": f"sub_{hotel_id}", "status": "active", "price_id": CONTRACT_PRICE},
        "workspace": {
            "slug": f"sandbox-{hotel_id}",
            "plan_limit_usd": 150,
            "alert_threshold_pct": 80,
        },
        "booking_system": booking,
        "notes": {
            "token": notes["token"],
            "apartments_database_id": notes["database_id"],
            "workspace_id": notes["workspace_id"],
        },
        "wifi": [
            {
                "room_type_id": str(page["pms_room_type_id"]),
                "network": page["wifi"]["network"],
                "wifi_password": page["wifi"]["password"],
            }
            for page in notes["pages"]
        ],
        "platform_admins": [PLATFORM_ADMIN],
        "onboarding_message": {
            "login_url": "https://app.assistant.example/login",
            "demo_call_url": "https://cal.example/platform-team/15min",
        },
    }
