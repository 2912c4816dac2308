"""Admin API actions in the audit trail (issue 14 items 3 and 5): admin.action, for every route.

Recorded once, by the dependency the app attaches where it includes the admin router: each
call that may change something, with its method, route template, status, outcome, actor,
client address and request id — refusals before the token included, reads not at all.
Through the real app on the booking-system emulator.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI
from pydantic import SecretStr

from pmsgate.app import create_app
from pmsgate.clock import ManualClock
from pmsgate.container import Container
from pmsgate.sandbox.kross.store import KrossStore
from pmsgate.storage.audit import AuditEventView, AuditFilter
from tests.support.facilities import container_with_facility, emulator_settings

pytestmark = pytest.mark.anyio

ADMIN_TOKEN = "admin-token-for-audit-tests-0123"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@dataclass
class World:
    app: FastAPI
    container: Container
    hotel_id: str

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app), base_url="http://gateway.test"
        )

    async def admin_events(self) -> list[AuditEventView]:
        page = await self.container.audit.page(AuditFilter(action_prefix="admin."), limit=500)
        return list(reversed(page.events))


@pytest.fixture
async def world(
    database_url: str, kross_http: httpx.AsyncClient, kross_store: KrossStore, clock: ManualClock
) -> AsyncIterator[World]:
    settings = emulator_settings(database_url, kross_http, admin_token=SecretStr(ADMIN_TOKEN))
    opened = container_with_facility(settings, kross_http, kross_store, clock)
    async with opened as (container, record):
        app = create_app(settings, container=container)
        async with app.router.lifespan_context(app):
            yield World(app, container, record["hotel_id"])


async def test_each_changing_admin_call_is_recorded_with_its_route_template_and_request(
    world: World,
) -> None:
    async with world.client() as client:
        minted = await client.post(
            f"/admin/facilities/{world.hotel_id}/keys",
            json={"label": "ops", "scopes": ["tools:read"]},
            headers={**ADMIN, "X-Request-ID": "req-mint"},
        )
        key_id = minted.json()["key"]["id"]
        revoked = await client.delete(
            f"/admin/facilities/{world.hotel_id}/keys/{key_id}", headers=ADMIN
        )
        listed = await client.get(f"/admin/facilities/{world.hotel_id}/keys", headers=ADMIN)
        shown = await client.get("/admin/facilities", headers=ADMIN)
    assert (minted.status_code, revoked.status_code) == (201, 200), minted.text
    assert (listed.status_code, shown.status_code) == (200, 200)

    mint, revoke = await world.admin_events()  # the reads are not recorded
    facility = await world.container.gateway.facilities.get(world.hotel_id)
    assert (mint.actor_kind, mint.actor, mint.outcome) == ("admin", "admin-api", "success")
    assert mint.subject == f"facility:{world.hotel_id}" and mint.facility_id == facility.id
    assert mint.details == {
        "method": "POST",
        "route": "/admin/facilities/{hotel_id}/keys",
        "status": 201,
    }
    assert mint.request_id == "req-mint"
    assert mint.client_address is not None
    assert revoke.details["route"] == "/admin/facilities/{hotel_id}/keys/{key_id}"
    assert (revoke.details["method"], revoke.details["key_id"]) == ("DELETE", str(key_id))
    # The raw key the mint answered with is nowhere in the trail.
    raw = minted.json()["gateway_key"]
    every = (await world.container.audit.page(AuditFilter(), limit=500)).events
    assert all(raw not in str(event.as_json()) for event in every)


async def test_refused_and_failed_admin_calls_are_recorded_with_their_codes(
    world: World,
) -> None:
    async with world.client() as client:
        wrong_token = await client.post(
            f"/admin/facilities/{world.hotel_id}/keys",
            json={},
            headers={"Authorization": "Bearer not-the-admin-token-at-all"},
        )
        unknown = await client.put(
            "/admin/facilities/no-such-hotel/limits",
            json={"per_minute": 5, "per_hour": 100, "per_day": 1000},
            headers=ADMIN,
        )
        invalid = await client.post(
            f"/admin/facilities/{world.hotel_id}/keys",
            json={"scopes": ["operations:write:everything"]},
            headers=ADMIN,
        )
        wrong_read = await client.get("/admin/facilities", headers={"Authorization": "Bearer x"})
    assert (wrong_token.status_code, unknown.status_code) == (401, 404)
    assert invalid.status_code == 422 and wrong_read.status_code == 401

    refused, missing, bad = await world.admin_events()
    assert (refused.actor_kind, refused.outcome) == ("system", "refused")
    assert refused.details["error_code"] == "invalid_admin_token"
    assert (missing.actor_kind, missing.outcome, missing.details["status"]) == (
        "admin",
        "failure",
        404,
    )
    assert missing.details["route"] == "/admin/facilities/{hotel_id}/limits"
    assert missing.facility_id is None  # no such facility
    assert (bad.outcome, bad.details["status"], bad.details["error_code"]) == (
        "failure",
        422,
        "invalid_scope",
    )
    every = (await world.container.audit.page(AuditFilter(), limit=500)).events
    assert all(ADMIN_TOKEN not in str(event.as_json()) for event in every)
    assert all("not-the-admin-token" not in str(event.as_json()) for event in every)
