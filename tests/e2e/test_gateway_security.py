"""Keys map to exactly one facility, and no secret reaches a log, an answer or a table."""

from __future__ import annotations

import pytest

from pmsgate.logs import configure_logging
from tests.e2e.conftest import ADMIN_TOKEN, add_seeded_facility
from tests.gateway.facility_support import all_stored_text

pytestmark = pytest.mark.anyio


async def test_a_missing_or_wrong_key_is_401(gateway, facility):
    missing = await gateway.http.post("/v1/tools/get-in-house-guests", json={})
    assert missing.status_code == 401
    assert missing.json()["error"]["code"] == "missing_gateway_key"
    wrong = await gateway.tool("get-in-house-guests", "pgw_not-a-real-key")
    assert wrong.status_code == 401
    assert wrong.json()["error"]["code"] == "invalid_gateway_key"


async def test_a_revoked_key_stops_working_at_once(gateway, facility):
    record, key = facility
    keys = await gateway.services.facilities.list_keys(record["hotel_id"])
    await gateway.services.facilities.revoke_key(record["hotel_id"], keys[0].id)
    assert (await gateway.tool("get-in-house-guests", key)).status_code == 401


async def test_a_key_of_facility_a_never_reaches_facility_b(gateway, kross_store):
    _, key_a = await add_seeded_facility(gateway.services, kross_store, 0)
    record_b, key_b = await add_seeded_facility(gateway.services, kross_store, 1)
    b_reservation = next(iter(kross_store.facility(record_b["hotel_id"]).reservations))

    as_a = await gateway.tool("get-reservation-status", key_a, reservation_id=b_reservation)
    as_b = await gateway.tool("get-reservation-status", key_b, reservation_id=b_reservation)

    assert as_a.status_code == 404
    assert as_b.status_code == 200
    b_apartments = {a["name"] for a in record_b["apartments"]}
    a_guests = (await gateway.tool("get-in-house-guests", key_a)).json()["data"]["reservations"]
    assert not {g["apartment"] for g in a_guests} & b_apartments


async def test_no_password_api_key_or_token_in_logs_answers_or_rows(
    gateway, kross_store, database_url, capsys
):
    configure_logging("DEBUG")
    record, key = await add_seeded_facility(gateway.services, kross_store, 0)
    answers = [
        await gateway.tool("get-in-house-guests", key),
        await gateway.tool("get-reservation-status", key, reservation_id=1),
        await gateway.http.get(
            "/admin/facilities", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        ),
        await gateway.http.get(
            f"/admin/facilities/{record['hotel_id']}",
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        ),
        await gateway.http.post(
            f"/admin/facilities/{record['hotel_id']}/reconnect",
            json={"username": record["username"], "password": "wrong-password-123"},
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        ),
    ]
    tokens = list(kross_store._tenant(record["hotel_id"]).tokens)
    assert tokens, "the flow should have obtained a booking-system token"
    secrets = [record["password"], record["api_key"], "wrong-password-123", *tokens]

    captured = capsys.readouterr()
    texts = {
        "logs": captured.out + captured.err,
        "answers": "\n".join(a.text for a in answers) + str([dict(a.headers) for a in answers]),
        "database": await all_stored_text(database_url),
    }
    for where, text in texts.items():
        for secret in secrets:
            assert secret not in text, f"a secret leaked into the {where}"
