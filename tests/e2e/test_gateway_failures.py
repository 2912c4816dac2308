"""Failures: a changed password, transient upstream faults, a misconfigured User-Agent."""

from __future__ import annotations

import datetime as dt

import pytest

from pmsgate.gateway.facility_service import FacilityService
from pmsgate.gateway.vault import vault_from_settings
from pmsgate.storage.db import session_factory
from tests.e2e.conftest import (
    ADMIN_TOKEN,
    add_seeded_facility,
    gateway_settings,
    running_gateway,
)

pytestmark = pytest.mark.anyio


async def test_a_changed_password_moves_the_facility_to_error_without_a_retry_storm(
    gateway, facility, kross_store, clock
):
    record, key = facility
    hotel_id = record["hotel_id"]
    assert (await gateway.tool("get-in-house-guests", key)).status_code == 200
    kross_store.change_password(hotel_id, "the-new-password")
    clock.advance(gateway.services.tools.max_age_s("get-in-house-guests") + 1)

    failed = await gateway.tool("get-in-house-guests", key)
    assert failed.status_code == 502
    assert failed.json()["error"]["code"] == "pms_auth_failed"
    assert "reconnect" in failed.json()["error"]["hint"].lower()
    assert (await gateway.services.facilities.get(hotel_id)).status == "error"

    sent = kross_store.stats.requests_by_hotel[hotel_id]
    for _ in range(50):
        again = await gateway.tool("check-portal-status", key, reservation_id=1)
        assert again.json()["error"]["code"] == "pms_auth_failed"
    assert kross_store.stats.requests_by_hotel[hotel_id] == sent

    clock.advance(gateway.services.settings.reauth_interval_s)
    await gateway.tool("get-in-house-guests", key)
    await gateway.tool("get-in-house-guests", key)
    assert kross_store.stats.tokens_issued[hotel_id] == 1
    # the first token, the refused refresh, then exactly one attempt in the new interval
    assert kross_store.stats.requests_by_operation["auth/get-token"] == 3


async def test_after_a_password_change_cached_answers_are_no_longer_served_as_fresh(
    gateway, facility, kross_store, clock
):
    record, key = facility
    hotel_id = record["hotel_id"]
    apartment = record["apartments"][0]["id_room_type"]
    arrival = clock.now().date() + dt.timedelta(days=10)
    availability = {
        "apartment_id": apartment,
        "arrival": arrival.isoformat(),
        "departure": (arrival + dt.timedelta(days=2)).isoformat(),
    }
    assert (await gateway.tool("get-in-house-guests", key)).status_code == 200
    clock.advance(gateway.services.tools.max_age_s("get-in-house-guests") / 2)
    fresh = await gateway.tool("check-availability", key, **availability)
    assert fresh.json()["meta"]["stale"] is False

    kross_store.change_password(hotel_id, "the-new-password")
    clock.advance(gateway.services.tools.max_age_s("get-in-house-guests") / 2 + 1)
    failed = await gateway.tool("get-in-house-guests", key)
    assert failed.json()["error"]["code"] == "pms_auth_failed"

    # Still young enough to be fresh by age, but the facility can no longer be read.
    served = await gateway.tool("check-availability", key, **availability)
    assert served.status_code == 200
    assert served.json()["meta"]["source"] == "cache"
    assert served.json()["meta"]["stale"] is True


async def test_reconnecting_with_the_new_password_restores_calls(
    gateway, facility, kross_store, clock
):
    record, key = facility
    hotel_id = record["hotel_id"]
    kross_store.change_password(hotel_id, "the-new-password")
    assert (await gateway.tool("get-in-house-guests", key)).json()["error"]["code"] == (
        "pms_auth_failed"
    )

    wrong = await gateway.http.post(
        f"/admin/facilities/{hotel_id}/reconnect",
        json={"username": record["username"], "password": "still-wrong"},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert wrong.status_code == 422
    assert (await gateway.services.facilities.get(hotel_id)).status == "error"

    fixed = await gateway.http.post(
        f"/admin/facilities/{hotel_id}/reconnect",
        json={"username": record["username"], "password": "the-new-password"},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert fixed.status_code == 200, fixed.text
    assert (await gateway.services.facilities.get(hotel_id)).status == "connected"
    issued = kross_store.stats.tokens_issued[hotel_id]
    assert (await gateway.tool("get-in-house-guests", key)).status_code == 200
    # The token that proved the new password serves the call: no second session upstream.
    assert kross_store.stats.tokens_issued[hotel_id] == issued


async def test_transient_upstream_errors_on_reads_are_retried_within_the_budget(
    gateway, facility, kross_store
):
    _, key = facility
    kross_store.set_faults(error_rate=0.5)
    answers = [
        await gateway.tool("get-checkin-instructions", key, apartment_id=a)
        for a in [a["id_room_type"] for a in kross_store.facility_summaries()[0]["apartments"]]
    ]
    kross_store.clear_faults()
    assert kross_store.stats.injected_errors > 0
    assert all(a.status_code in (200, 503) for a in answers)
    assert sum(a.status_code == 200 for a in answers) >= 1
    assert kross_store.stats.rate_limited.total() == 0


async def test_an_edge_block_is_reported_as_a_configuration_fault_and_not_retried(
    database_url, kross_http, kross_store, clock
):
    settings = gateway_settings(database_url, user_agent="python-httpx/0.28")
    async with running_gateway(settings, kross_http, clock) as gateway:
        _, key = await add_seeded_facility(gateway.services, kross_store)
        answer = await gateway.tool("get-in-house-guests", key)
    assert answer.status_code == 502
    assert answer.json()["error"]["code"] == "pms_edge_blocked"
    assert kross_store.stats.user_agent_blocked == 1


async def test_a_facility_put_in_error_by_another_replica_is_not_called_despite_a_cached_key(
    backend, kross_http, kross_store, clock
):
    # A key check remembered for an hour: longer than the answer's freshness bound.
    settings = gateway_settings(**backend, gateway_key_cache_s=3600)
    async with running_gateway(settings, kross_http, clock) as gateway:
        record, key = await add_seeded_facility(gateway.services, kross_store)
        hotel_id = record["hotel_id"]
        assert (await gateway.tool("get-in-house-guests", key)).status_code == 200
        other_replica = FacilityService(
            session_factory(gateway.services.engine),
            vault_from_settings(settings),
            clock,
            settings.partner_api_key,
        )
        await other_replica.record_auth_attempt(hotel_id)
        await other_replica.mark_error(hotel_id, "The booking system refused the credentials.")
        sent = kross_store.stats.requests_by_hotel[hotel_id]

        clock.advance(gateway.services.tools.max_age_s("get-in-house-guests") + 1)
        refused = await gateway.tool("get-in-house-guests", key)
    assert refused.json()["error"]["code"] == "pms_auth_failed"
    # The remembered key check did not hide the new state: nothing reached the booking system.
    assert kross_store.stats.requests_by_hotel[hotel_id] == sent
