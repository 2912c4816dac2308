"""Scoped gateway keys (issue 14 items 1 and 5): every route by every scope, expiry, rotation,
the admin API's scope management and the batched record of each key's last use.

Routes and scopes come from the catalogues (tools, operations), never listed by hand: a
tool or write added there is covered here without a change.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta

import httpx
import pytest
from fastapi import FastAPI
from pydantic import SecretStr
from sqlalchemy import func, select

from pmsgate.catalogue.loader import load_tools
from pmsgate.clock import ManualClock
from pmsgate.container import open_container
from pmsgate.errors import PmsgateError
from pmsgate.gateway.context import GatewayServices
from pmsgate.gateway.facility_service import FacilityService
from pmsgate.gateway.keys import parse_duration
from pmsgate.gateway.scopes import (
    OPERATIONS_READ,
    TOOLS_READ,
    all_scopes,
    check_scopes,
    operation_scope,
    write_scope,
)
from pmsgate.integrations.kross.client import TOKEN_OPERATION
from pmsgate.integrations.kross.operations import load_operations
from pmsgate.sandbox.kross.store import KrossStore
from pmsgate.storage.db import session_factory
from pmsgate.storage.models import GatewayKey, IdempotencyRecord
from tests.gateway.facility_support import new_facility_from_seed
from tests.support.answers import assert_refusal
from tests.support.facilities import emulator_settings, served_gateway

pytestmark = pytest.mark.anyio

BASE_URL = "http://gateway.test"
ADMIN_TOKEN = "admin-token-for-scope-tests-0123"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}

# Every route a gateway key opens, with the one scope it needs.
ROUTES: list[tuple[str, str]] = [
    *((f"/v1/tools/{name}", TOOLS_READ) for name in load_tools()),
    *(
        (f"/v1/operations/{op.name}", operation_scope(op))
        for op in load_operations()
        if op.name != TOKEN_OPERATION
    ),
]


@dataclass
class Gateway:
    app: FastAPI
    services: GatewayServices
    store: KrossStore
    hotel_id: str

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app), base_url=BASE_URL)

    async def key(self, *scopes: str, **options: object) -> str:
        _, raw = await self.services.facilities.mint_key(
            self.hotel_id,
            "test",
            scopes=list(scopes),
            **options,  # type: ignore[arg-type]
        )
        return raw

    def upstream_requests(self) -> int:
        return self.store.stats.requests_by_hotel[self.hotel_id]

    async def idempotency_records(self) -> int:
        async with session_factory(self.services.engine)() as session:
            count = await session.execute(select(func.count()).select_from(IdempotencyRecord))
            return int(count.scalar_one())


@pytest.fixture
async def gateway(
    database_url: str, kross_http: httpx.AsyncClient, kross_store: KrossStore, clock: ManualClock
) -> AsyncIterator[Gateway]:
    settings = emulator_settings(
        database_url,
        kross_http,
        admin_token=SecretStr(ADMIN_TOKEN),
        # Cached key checks: scopes and expiry must still hold on a cached call.
        gateway_key_cache_s=3600,
    )
    async with served_gateway(settings, kross_http, kross_store, clock) as served:
        hotel_id = served.record["hotel_id"]
        yield Gateway(served.app, served.container.gateway, kross_store, hotel_id)


# --- the vocabulary -------------------------------------------------------------------------


def test_the_vocabulary_is_tools_reads_and_each_write_of_the_catalogue() -> None:
    writes = [op.name for op in load_operations() if op.is_write and op.name != TOKEN_OPERATION]
    assert all_scopes() == (TOOLS_READ, OPERATIONS_READ, *(write_scope(w) for w in writes))
    assert write_scope("reservations/add-payment") in all_scopes()
    assert write_scope(TOKEN_OPERATION) not in all_scopes()


def test_unknown_or_no_scopes_are_refused_and_known_ones_ordered() -> None:
    with pytest.raises(PmsgateError) as unknown:
        check_scopes(["tools:read", "operations:write:everything"])
    assert (unknown.value.status, unknown.value.code) == (422, "invalid_scope")
    assert "operations:write:everything" in unknown.value.message
    with pytest.raises(PmsgateError) as empty:
        check_scopes([])
    assert empty.value.code == "invalid_scope"
    assert check_scopes([OPERATIONS_READ, TOOLS_READ, TOOLS_READ]) == [TOOLS_READ, OPERATIONS_READ]


def test_durations() -> None:
    assert parse_duration("30d") == timedelta(days=30)
    assert parse_duration("12h") == timedelta(hours=12)
    assert parse_duration("90m") == timedelta(minutes=90)
    for bad in ("", "0d", "7", "7w", "-1d"):
        with pytest.raises(PmsgateError) as caught:
            parse_duration(bad)
        assert caught.value.code == "invalid_duration"


# --- every route by every scope --------------------------------------------------------------


@pytest.mark.parametrize(("path", "needed"), ROUTES, ids=[path for path, _ in ROUTES])
async def test_each_route_answers_only_a_key_holding_its_scope(
    gateway: Gateway, path: str, needed: str
) -> None:
    keys = {scope: await gateway.key(scope) for scope in all_scopes()}
    async with gateway.client() as client:
        for scope, key in keys.items():
            sent_before = gateway.upstream_requests()
            usage_before = gateway.services.usage.pending()
            answer = await client.post(
                path,
                json={},
                headers={"Authorization": f"Bearer {key}", "Idempotency-Key": f"k-{scope}"},
            )
            if scope == needed:
                # Past the scope check: the route's own answer (data, or its argument errors).
                assert answer.status_code != 403, answer.text
                continue
            error = assert_refusal(answer, 403, "scope_missing")
            assert needed in error["message"] and needed in error["hint"]
            # Never sent, no permit taken (every permit counts an upstream call), no record.
            assert gateway.upstream_requests() == sent_before
            assert gateway.services.usage.pending() == usage_before
    if needed.startswith("operations:write:"):
        # The one allowed write was refused for its empty body: nothing was recorded either.
        assert await gateway.idempotency_records() == 0


async def test_a_workspace_key_reads_tools_but_cannot_pay_and_a_payment_key_can(
    gateway: Gateway,
) -> None:
    workspace_key = await gateway.key(TOOLS_READ)
    payment_key = await gateway.key(write_scope("reservations/add-payment"))
    path = "/v1/operations/reservations/add-payment"
    payment = {"reservation_id": 1, "amount": 10, "method": "cash"}
    async with gateway.client() as client:
        refused = await client.post(
            path,
            json=payment,
            headers={"Authorization": f"Bearer {workspace_key}", "Idempotency-Key": "pay-1"},
        )
        allowed = await client.post(
            path,
            json=payment,
            headers={"Authorization": f"Bearer {payment_key}", "Idempotency-Key": "pay-1"},
        )
    error = assert_refusal(refused, 403, "scope_missing")
    assert "operations:write:reservations/add-payment" in error["message"]
    assert allowed.status_code != 403, allowed.text


# --- expiry and rotation --------------------------------------------------------------------


async def test_an_expired_key_is_refused_even_from_the_key_cache(
    gateway: Gateway, clock: ManualClock
) -> None:
    key = await gateway.key(TOOLS_READ, expires_at=clock.now() + timedelta(hours=1))
    facilities = gateway.services.facilities
    assert (await facilities.authenticate(key)).hotel_id == gateway.hotel_id  # now cached
    clock.advance(3599)
    assert (await facilities.authenticate(key)).hotel_id == gateway.hotel_id
    clock.advance(1)
    async with gateway.client() as client:
        answer = await client.post(
            "/v1/tools/get-in-house-guests", json={}, headers={"Authorization": f"Bearer {key}"}
        )
    assert_refusal(answer, 401, "gateway_key_expired")


async def test_an_expiry_in_the_past_or_without_a_zone_is_refused(
    gateway: Gateway, clock: ManualClock
) -> None:
    with pytest.raises(PmsgateError) as past:
        await gateway.key(TOOLS_READ, expires_at=clock.now())
    assert past.value.code == "invalid_expiry"
    with pytest.raises(PmsgateError) as naive:
        await gateway.key(TOOLS_READ, expires_at=clock.now().replace(tzinfo=None) + timedelta(1))
    assert naive.value.code == "invalid_expiry"


async def test_rotation_keeps_two_working_keys_for_the_grace_then_only_the_new_one(
    gateway: Gateway, clock: ManualClock
) -> None:
    facilities = gateway.services.facilities
    scopes = [TOOLS_READ, write_scope("check-in-guest")]
    view, old_key = await facilities.mint_key(gateway.hotel_id, "assistant", scopes=scopes)
    old, new, new_key = await facilities.rotate_key(gateway.hotel_id, view.id, timedelta(days=7))
    assert old.expires_at == clock.now() + timedelta(days=7)
    assert (new.scopes, new.label, new.expires_at) == (scopes, "assistant", None)
    for key in (old_key, new_key):
        assert (await facilities.authenticate(key, scopes[1])).hotel_id == gateway.hotel_id
    clock.advance(7 * 24 * 3600)
    with pytest.raises(PmsgateError) as expired:
        await facilities.authenticate(old_key)
    assert expired.value.code == "gateway_key_expired"
    assert (await facilities.authenticate(new_key)).hotel_id == gateway.hotel_id
    states = {k.id: k.state(clock.now()) for k in await facilities.list_keys(gateway.hotel_id)}
    assert (states[old.id], states[new.id]) == ("expired", "active")
    with pytest.raises(PmsgateError) as again:
        await facilities.rotate_key(gateway.hotel_id, old.id, timedelta(days=1))
    assert again.value.code == "gateway_key_inactive"


async def test_widening_a_migrated_key_restores_full_power_explicitly(gateway: Gateway) -> None:
    facilities = gateway.services.facilities
    view, key = await facilities.mint_key(gateway.hotel_id, "old")  # like a migrated key
    assert view.scopes == [TOOLS_READ]
    with pytest.raises(PmsgateError) as before:
        await facilities.authenticate(key, OPERATIONS_READ)
    assert before.value.code == "scope_missing"
    widened = await facilities.set_key_scopes(gateway.hotel_id, view.id, all_scopes())
    assert widened.scopes == list(all_scopes())
    # The change is seen at once by this process, although the key check was cached.
    assert (await facilities.authenticate(key, OPERATIONS_READ)).hotel_id == gateway.hotel_id
    narrowed = await facilities.set_key_scopes(gateway.hotel_id, view.id, [OPERATIONS_READ])
    assert narrowed.scopes == [OPERATIONS_READ]
    added = await facilities.set_key_scopes(gateway.hotel_id, view.id, [TOOLS_READ], add=True)
    assert added.scopes == [TOOLS_READ, OPERATIONS_READ]


# --- the admin API ---------------------------------------------------------------------------


async def test_the_admin_api_mints_lists_changes_and_rotates_scoped_keys(
    gateway: Gateway, clock: ManualClock
) -> None:
    base = f"/admin/facilities/{gateway.hotel_id}/keys"
    async with gateway.client() as client:
        minted = await client.post(
            base,
            json={"label": "pay", "scopes": [write_scope("reservations/add-payment")],
                  "expires_in_days": 30},
            headers=ADMIN,
        )  # fmt: skip
        assert minted.status_code == 201, minted.text
        key = minted.json()["key"]
        assert key["scopes"] == [write_scope("reservations/add-payment")]
        assert key["expires_at"] is not None
        unknown = await client.post(base, json={"scopes": ["payments"]}, headers=ADMIN)
        assert_refusal(unknown, 422, "invalid_scope")
        both = await client.post(
            base, json={"expires_in_days": 1, "expires_at": "2030-01-01T00:00:00Z"}, headers=ADMIN
        )
        assert_refusal(both, 422, "invalid_expiry")
        every = await client.put(
            f"{base}/{key['id']}/scopes", json={"all_scopes": True}, headers=ADMIN
        )
        assert every.json()["scopes"] == list(all_scopes())
        bad = await client.put(f"{base}/{key['id']}/scopes", json={"scopes": ["x"]}, headers=ADMIN)
        assert_refusal(bad, 422, "invalid_scope")
        rotated = await client.post(
            f"{base}/{key['id']}/rotate", json={"grace_hours": 2}, headers=ADMIN
        )
        assert rotated.status_code == 201, rotated.text
        assert rotated.headers["Cache-Control"] == "no-store"
        assert rotated.json()["key"]["scopes"] == list(all_scopes())
        listed = (await client.get(base, headers=ADMIN)).json()["keys"]
    assert {k["id"]: k["scopes"] for k in listed}[key["id"]] == list(all_scopes())
    assert all({"scopes", "expires_at", "last_used_at"} <= set(k) for k in listed)


# --- last use, batched ------------------------------------------------------------------------


async def test_last_use_is_kept_in_memory_and_written_in_one_flush(
    gateway: Gateway, clock: ManualClock
) -> None:
    facilities: FacilityService = gateway.services.facilities
    view, key = await facilities.mint_key(gateway.hotel_id, "used")
    first = clock.now()
    await facilities.authenticate(key)
    clock.advance(30)
    await facilities.authenticate(key)
    with pytest.raises(PmsgateError):
        await facilities.authenticate(key, OPERATIONS_READ)  # refused: not a use
    assert facilities.pending_key_uses() == {view.id: first + timedelta(seconds=30)}

    async def stored() -> object:
        async with session_factory(gateway.services.engine)() as session:
            return (await session.get(GatewayKey, view.id)).last_used_at  # type: ignore[union-attr]

    assert await stored() is None  # no database write per call
    listed = {k.id: k for k in await facilities.list_keys(gateway.hotel_id)}
    assert listed[view.id].last_used_at == first + timedelta(seconds=30)  # shown before a flush

    assert await facilities.flush_key_uses() == 1
    assert await stored() == first + timedelta(seconds=30)
    assert facilities.pending_key_uses() == {}
    assert await facilities.flush_key_uses() == 0


async def test_shutdown_writes_the_uses_still_in_memory(
    database_url: str, kross_http: httpx.AsyncClient, kross_store: KrossStore, clock: ManualClock
) -> None:
    settings = emulator_settings(database_url, kross_http)
    record = kross_store.facility_summaries()[0]
    async with open_container(settings, kross_http=kross_http, clock=clock) as container:
        facilities = container.gateway.facilities
        view, key = await facilities.add(new_facility_from_seed(record))
        await facilities.authenticate(key)
    async with open_container(settings, kross_http=kross_http, clock=clock) as container:
        [stored] = await container.gateway.facilities.list_keys(view.hotel_id)
    assert stored.last_used_at == clock.now()
