"""Gateway writes in the audit trail (issue 14 items 3 and 5): key.used_for_write.

Every write through ``/v1/operations`` leaves one event naming the calling key by its display
prefix, the facility, the operation, the Idempotency-Key and how it ended; a key refused for
want of the write's scope leaves a ``refused`` one; reads leave none. Through the real app,
the booking-system emulator and a ManualClock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest

from pmsgate.audit import AuditTrail
from pmsgate.clock import ManualClock
from pmsgate.gateway.facilities import Limits
from pmsgate.gateway.keys import display_prefix
from pmsgate.gateway.scopes import OPERATIONS_READ, TOOLS_READ, write_scope
from pmsgate.sandbox.kross.store import KrossStore
from pmsgate.storage.audit import AuditEventView, AuditFilter
from tests.support.facilities import ServedGateway, emulator_settings, served_gateway
from tests.support.payments import PAYMENT, payment_body

pytestmark = pytest.mark.anyio

BASE_URL = "http://gateway.test"


@dataclass
class World(ServedGateway):
    @property
    def audit(self) -> AuditTrail:
        return self.container.audit

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app), base_url=BASE_URL)

    async def key(self, *scopes: str) -> str:
        _, raw = await self.container.gateway.facilities.mint_key(
            self.hotel_id, "test", scopes=list(scopes)
        )
        return raw

    async def writes(self) -> list[AuditEventView]:
        page = await self.audit.page(AuditFilter(action_prefix="key.used_for_write"), limit=500)
        return list(reversed(page.events))  # oldest first

    def payment_body(self, clock: ManualClock, amount: int = 80) -> dict[str, object]:
        return payment_body(self.store, self.hotel_id, clock.now().date(), amount)


@pytest.fixture
async def world(
    database_url: str, kross_http: httpx.AsyncClient, kross_store: KrossStore, clock: ManualClock
) -> AsyncIterator[World]:
    settings = emulator_settings(database_url, kross_http, gateway_key_cache_s=3600)
    async with served_gateway(settings, kross_http, kross_store, clock, view=World) as world:
        yield world


def _headers(key: str, idempotency_key: str, request_id: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {key}",
        "Idempotency-Key": idempotency_key,
        "X-Request-ID": request_id,
    }


async def test_a_payment_is_recorded_with_its_key_prefix_idempotency_key_and_outcome(
    world: World, clock: ManualClock
) -> None:
    key = await world.key(write_scope(PAYMENT))
    body = world.payment_body(clock)
    async with world.client() as client:
        paid = await client.post(
            f"/v1/operations/{PAYMENT}", json=body, headers=_headers(key, "pay-1", "req-pay-1")
        )
        replay = await client.post(
            f"/v1/operations/{PAYMENT}", json=body, headers=_headers(key, "pay-1", "req-pay-2")
        )
    assert paid.status_code == 200, paid.text
    assert replay.headers["Idempotent-Replayed"] == "true"

    first, again = await world.writes()
    facility = await world.container.gateway.facilities.get(world.hotel_id)
    assert (first.actor_kind, first.actor) == ("gateway_key", display_prefix(key))
    assert (first.subject, first.facility_id) == (f"facility:{world.hotel_id}", facility.id)
    assert first.outcome == "success"
    assert first.details == {"operation": PAYMENT, "idempotency_key": "pay-1", "status": 200}
    assert first.request_id == "req-pay-1"
    assert first.client_address is not None
    # The replay is recorded as one: nothing was sent, but the trail shows who asked again.
    assert again.outcome == "success" and again.details["replayed"] is True
    assert again.request_id == "req-pay-2"
    assert world.store.stats.requests_by_operation[PAYMENT] == 1


async def test_a_key_without_the_write_scope_is_recorded_as_refused_and_reads_are_not_recorded(
    world: World, clock: ManualClock
) -> None:
    reader = await world.key(TOOLS_READ, OPERATIONS_READ)
    async with world.client() as client:
        refused = await client.post(
            f"/v1/operations/{PAYMENT}",
            json=world.payment_body(clock),
            headers=_headers(reader, "pay-x", "req-refused"),
        )
        tool = await client.post(
            "/v1/tools/get-in-house-guests", json={}, headers={"Authorization": f"Bearer {reader}"}
        )
        read = await client.post(
            "/v1/operations/reservations/get-list",
            json={},
            headers={"Authorization": f"Bearer {reader}"},
        )
        # A refused read (no scope) is not recorded either: only writes are.
        refused_read = await client.post(
            "/v1/operations/reservations/get-list",
            json={},
            headers={"Authorization": f"Bearer {await world.key(TOOLS_READ)}"},
        )
    assert refused.status_code == 403
    assert (tool.status_code, read.status_code, refused_read.status_code) == (200, 200, 403)

    (event,) = await world.writes()
    facility = await world.container.gateway.facilities.get(world.hotel_id)
    assert event.outcome == "refused"
    assert (event.actor, event.subject) == (display_prefix(reader), f"facility:{world.hotel_id}")
    assert event.facility_id == facility.id
    assert event.details["error_code"] == "scope_missing"
    assert event.details["idempotency_key"] == "pay-x"
    assert event.request_id == "req-refused"


async def test_a_write_whose_outcome_is_unknown_is_recorded_unknown_then_its_settlement(
    world: World, clock: ManualClock
) -> None:
    key = await world.key(write_scope(PAYMENT))
    # Two calls a minute: the payment, then no budget for the read-back that would settle it.
    await world.container.gateway.facilities.set_limits(
        world.hotel_id, Limits(per_minute=2, per_hour=300, per_day=5000)
    )
    world.store.set_faults(commit_then_timeout=1, timeout_mode="disconnect")
    body = world.payment_body(clock)
    async with world.client() as client:
        unknown = await client.post(
            f"/v1/operations/{PAYMENT}", json=body, headers=_headers(key, "pay-u", "req-u1")
        )
        clock.advance(61)
        settled = await client.post(
            f"/v1/operations/{PAYMENT}", json=body, headers=_headers(key, "pay-u", "req-u2")
        )
    assert unknown.json()["error"]["code"] == "write_outcome_unknown"
    assert settled.status_code == 200, settled.text

    first, second = await world.writes()
    assert first.outcome == "unknown"
    assert first.details["error_code"] == "write_outcome_unknown"
    assert second.outcome == "success" and second.details["recovered"] is True
    assert {first.details["idempotency_key"], second.details["idempotency_key"]} == {"pay-u"}


async def test_a_refused_write_is_a_failure_with_its_error_code(
    world: World, clock: ManualClock
) -> None:
    key = await world.key(write_scope(PAYMENT))
    async with world.client() as client:
        missing_key = await client.post(
            f"/v1/operations/{PAYMENT}",
            json=world.payment_body(clock),
            headers={"Authorization": f"Bearer {key}"},
        )
        bad_body = await client.post(
            f"/v1/operations/{PAYMENT}", json={"amount": "lots"}, headers=_headers(key, "b", "r")
        )
    assert missing_key.status_code == 400 and bad_body.status_code == 422
    first, second = await world.writes()
    assert (first.outcome, first.details["error_code"]) == ("failure", "idempotency_key_required")
    assert first.details["idempotency_key"] is None
    assert (second.outcome, second.details["error_code"]) == ("failure", "invalid_payload")
    assert world.store.stats.requests_by_operation[PAYMENT] == 0
