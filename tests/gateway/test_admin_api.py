"""The admin HTTP API: bearer-token guard, every route, error bodies, reconnect via the emulator."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import SecretStr

from pmsgate.audit.actions import Actor
from pmsgate.clock import ManualClock
from pmsgate.errors import PmsgateError, install_error_handlers
from pmsgate.gateway.admin import build_admin_router, facility_registrar
from pmsgate.gateway.facilities import FacilityView, NewFacility
from pmsgate.gateway.facility_service import FacilityService
from pmsgate.gateway.verification import Verifier

from .facility_support import (
    OWN_API_KEY,
    all_stored_text,
    emulator_verifier,
    facility_service,
    row_counts,
    seeded_facilities,
)

pytestmark = pytest.mark.anyio

ADMIN_TOKEN = "admin-token-for-tests-0123456789"
AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
PASSWORD = "admin-api-pw-42"

FACILITY_BODY: dict[str, Any] = {
    "hotel_id": "123456",
    "username": "api12345",
    "password": PASSWORD,
    "kind": "partner",
    "integration_id": "int-77",
    "name": "Casa Esempio",
    # Not the emulator's credentials: stored without trying them (the verified add is
    # tested below and in test_verified_add.py).
    "verify": False,
}


def _admin_client(
    service: FacilityService, admin_token: str | None, verify: Verifier
) -> httpx.AsyncClient:
    app = FastAPI()
    install_error_handlers(app)
    token = SecretStr(admin_token) if admin_token is not None else None
    app.include_router(
        build_admin_router(
            lambda: service,
            token,
            # The credentials are verified by the emulator before they are stored.
            lambda hotel_id, **given: service.reconnect(hotel_id, verify=verify, **given),
        )
    )

    async def register(new: NewFacility, *, verify: bool, actor: Actor) -> tuple[FacilityView, str]:
        # The facility service's add with the emulator's verifier; the gateway's own
        # registration (through its limiter) is tested in test_verified_add.py.
        if not verify:
            return await service.add(new, unverified=True, actor=actor)
        return await service.add(new, verify=verifier, actor=actor)

    verifier = verify
    app.dependency_overrides[facility_registrar] = lambda: register
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw.test")


@pytest.fixture
async def service(database_url: str, clock: ManualClock) -> AsyncIterator[FacilityService]:
    async with facility_service(database_url, clock) as built:
        yield built


@pytest.fixture
async def admin(
    service: FacilityService, kross_http: httpx.AsyncClient, clock: ManualClock
) -> AsyncIterator[httpx.AsyncClient]:
    async with _admin_client(service, ADMIN_TOKEN, emulator_verifier(kross_http, clock)) as client:
        yield client


def _code(response: httpx.Response) -> str:
    body = response.json()
    assert set(body["error"]) == {"code", "message", "hint"}
    code: str = body["error"]["code"]
    return code


# --- the guard ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": f"Basic {ADMIN_TOKEN}"},
        {"Authorization": f"Bearer {ADMIN_TOKEN}x"},
        {"Authorization": "Bearer"},
    ],
    ids=["missing", "wrong", "other scheme", "longer", "empty"],
)
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/admin/facilities"),
        ("POST", "/admin/facilities"),
        ("GET", "/admin/facilities/123456/keys"),
        ("DELETE", "/admin/facilities/123456/keys/1"),
    ],
)
async def test_admin_calls_without_the_admin_token_are_401(
    admin: httpx.AsyncClient, headers: dict[str, str], method: str, path: str
) -> None:
    body = FACILITY_BODY if method == "POST" else None
    response = await admin.request(method, path, headers=headers, json=body)
    assert response.status_code == 401
    assert _code(response) == "invalid_admin_token"
    assert response.headers["WWW-Authenticate"] == "Bearer"


@pytest.mark.parametrize("configured", [None, ""], ids=["unset", "empty"])
async def test_without_a_configured_admin_token_every_admin_call_is_503(
    service: FacilityService, configured: str | None, database_url: str
) -> None:
    async with _admin_client(service, configured, _never_called) as client:
        listed = await client.get("/admin/facilities", headers=AUTH)
        created = await client.post("/admin/facilities", json=FACILITY_BODY, headers={})
    assert (listed.status_code, _code(listed)) == (503, "admin_api_disabled")
    assert (created.status_code, _code(created)) == (503, "admin_api_disabled")
    assert await row_counts(database_url) == (0, 0)


async def _never_called(credentials: Any) -> None:
    raise AssertionError("verify must not be called")


# --- facilities -----------------------------------------------------------------------------


async def test_creating_a_facility_answers_201_with_its_key_once_and_no_secret(
    admin: httpx.AsyncClient, service: FacilityService, database_url: str
) -> None:
    created = await admin.post("/admin/facilities", json=FACILITY_BODY, headers=AUTH)
    assert created.status_code == 201
    assert created.headers["Cache-Control"] == "no-store"
    body = created.json()
    assert body["facility"]["hotel_id"] == "123456"
    assert body["facility"]["status"] == "unverified"
    assert body["facility"]["limits"] == {"per_minute": 10, "per_hour": 300, "per_day": 5000}
    raw_key = body["gateway_key"]
    assert (await service.authenticate(raw_key)).hotel_id == "123456"
    assert PASSWORD not in created.text

    shown = await admin.get("/admin/facilities/123456", headers=AUTH)
    listed = await admin.get("/admin/facilities", headers=AUTH)
    assert shown.status_code == 200
    assert shown.json() == body["facility"]
    assert listed.json() == {"facilities": [body["facility"]]}
    for response in (shown, listed):
        assert raw_key not in response.text
        assert PASSWORD not in response.text
    stored = await all_stored_text(database_url)
    assert PASSWORD not in stored
    assert raw_key not in stored


async def test_an_own_facility_with_limits_can_be_created_with_a_numeric_hotel_id(
    admin: httpx.AsyncClient,
) -> None:
    body = {
        **FACILITY_BODY,
        "hotel_id": 654321,
        "kind": "own",
        "api_key": OWN_API_KEY,
        "limits": {"per_minute": 5, "per_hour": 100, "per_day": 1000},
    }
    created = await admin.post("/admin/facilities", json=body, headers=AUTH)
    assert created.status_code == 201
    assert created.json()["facility"]["kind"] == "own"
    assert created.json()["facility"]["limits"]["per_minute"] == 5
    assert OWN_API_KEY not in created.text


async def test_a_duplicate_facility_is_409_facility_exists(
    admin: httpx.AsyncClient, database_url: str
) -> None:
    assert (await admin.post("/admin/facilities", json=FACILITY_BODY, headers=AUTH)).is_success
    again = await admin.post("/admin/facilities", json=FACILITY_BODY, headers=AUTH)
    assert (again.status_code, _code(again)) == (409, "facility_exists")
    assert await row_counts(database_url) == (1, 1)


BAD_BODIES: list[tuple[dict[str, Any], str]] = [
    ({k: v for k, v in FACILITY_BODY.items() if k != "password"}, "invalid_input"),
    ({**FACILITY_BODY, "password": ["not", "text"]}, "invalid_input"),
    ({**FACILITY_BODY, "unexpected": "field"}, "invalid_input"),
    ({**FACILITY_BODY, "limits": {"per_minute": "many"}}, "invalid_input"),
    ({**FACILITY_BODY, "hotel_id": "12ab"}, "invalid_hotel_id"),
    ({**FACILITY_BODY, "username": "owner@example.com"}, "username_is_email"),
    ({**FACILITY_BODY, "username": "owner"}, "invalid_username"),
    ({**FACILITY_BODY, "password": ""}, "missing_password"),
    ({**FACILITY_BODY, "kind": "reseller"}, "invalid_kind"),
    ({**FACILITY_BODY, "kind": "own"}, "api_key_required"),
    ({**FACILITY_BODY, "kind": "own", "api_key": "xyz"}, "invalid_api_key"),
    ({**FACILITY_BODY, "api_key": OWN_API_KEY}, "api_key_not_allowed_for_partner"),
    ({**FACILITY_BODY, "limits": {"per_minute": 0}}, "invalid_limits"),
    ({**FACILITY_BODY, "limits": {"per_minute": 50, "per_hour": 20}}, "invalid_limits"),
]


@pytest.mark.parametrize(("body", "code"), BAD_BODIES, ids=[c for _, c in BAD_BODIES])
async def test_a_bad_facility_body_is_422_with_its_code_and_writes_nothing(
    admin: httpx.AsyncClient, database_url: str, body: dict[str, Any], code: str
) -> None:
    response = await admin.post("/admin/facilities", json=body, headers=AUTH)
    assert (response.status_code, _code(response)) == (422, code)
    assert PASSWORD not in response.text
    assert OWN_API_KEY not in response.text
    assert await row_counts(database_url) == (0, 0)


async def test_a_body_that_is_not_json_is_422_invalid_input(admin: httpx.AsyncClient) -> None:
    response = await admin.post(
        "/admin/facilities",
        content=b"{not json",
        headers={**AUTH, "Content-Type": "application/json"},
    )
    assert (response.status_code, _code(response)) == (422, "invalid_input")


def facility_routes(hotel_id: str) -> list[tuple[str, str, dict[str, Any] | None]]:
    """Every admin route of one facility (method, path, body), naming ``hotel_id``."""
    base = f"/admin/facilities/{hotel_id}"
    return [
        ("GET", base, None),
        ("PUT", f"{base}/limits", {"per_minute": 1}),
        ("POST", f"{base}/keys", None),
        ("GET", f"{base}/keys", None),
        ("DELETE", f"{base}/keys/1", None),
        ("POST", f"{base}/reconnect", {"username": "api1", "password": "x"}),
    ]


async def test_an_unknown_facility_is_404_facility_not_found(admin: httpx.AsyncClient) -> None:
    for method, path, body in facility_routes("999"):
        response = await admin.request(method, path, json=body, headers=AUTH)
        assert (response.status_code, _code(response)) == (404, "facility_not_found"), path


# --- limits ---------------------------------------------------------------------------------


async def test_limits_are_replaced_with_put(admin: httpx.AsyncClient) -> None:
    await admin.post("/admin/facilities", json=FACILITY_BODY, headers=AUTH)
    changed = await admin.put(
        "/admin/facilities/123456/limits",
        json={"per_minute": 20, "per_hour": 600, "per_day": 9000},
        headers=AUTH,
    )
    assert changed.status_code == 200
    assert changed.json()["limits"] == {"per_minute": 20, "per_hour": 600, "per_day": 9000}
    bad = await admin.put(
        "/admin/facilities/123456/limits", json={"per_minute": 20, "per_hour": 10}, headers=AUTH
    )
    assert (bad.status_code, _code(bad)) == (422, "invalid_limits")
    shown = await admin.get("/admin/facilities/123456", headers=AUTH)
    assert shown.json()["limits"]["per_hour"] == 600


# --- keys -----------------------------------------------------------------------------------


async def test_keys_are_minted_listed_by_prefix_and_revoked(
    admin: httpx.AsyncClient, service: FacilityService
) -> None:
    first = (await admin.post("/admin/facilities", json=FACILITY_BODY, headers=AUTH)).json()
    minted = await admin.post(
        "/admin/facilities/123456/keys", json={"label": "assistant"}, headers=AUTH
    )
    assert minted.status_code == 201
    assert minted.headers["Cache-Control"] == "no-store"
    new_key = minted.json()["gateway_key"]
    assert minted.json()["key"]["label"] == "assistant"
    assert (await service.authenticate(new_key)).hotel_id == "123456"

    unlabeled = await admin.post("/admin/facilities/123456/keys", headers=AUTH)
    assert unlabeled.status_code == 201
    assert unlabeled.json()["key"]["label"] == ""

    listed = await admin.get("/admin/facilities/123456/keys", headers=AUTH)
    keys = listed.json()["keys"]
    assert [k["label"] for k in keys] == ["initial", "assistant", ""]
    view_fields = {
        "id",
        "facility_hotel_id",
        "prefix",
        "label",
        "created_at",
        "revoked_at",
        "scopes",
        "expires_at",
        "last_used_at",
    }
    assert all(set(k) == view_fields for k in keys)
    for raw in (first["gateway_key"], new_key):
        assert raw not in listed.text
        assert any(raw.startswith(k["prefix"]) for k in keys)

    revoked = await admin.delete(f"/admin/facilities/123456/keys/{keys[0]['id']}", headers=AUTH)
    assert revoked.status_code == 200
    assert revoked.json()["revoked_at"] is not None
    with pytest.raises(PmsgateError) as caught:
        await service.authenticate(first["gateway_key"])
    assert caught.value.code == "invalid_gateway_key"
    assert (await service.authenticate(new_key)).hotel_id == "123456"


async def test_key_routes_refuse_bad_input_with_codes(admin: httpx.AsyncClient) -> None:
    await admin.post("/admin/facilities", json=FACILITY_BODY, headers=AUTH)
    not_a_number = await admin.delete("/admin/facilities/123456/keys/abc", headers=AUTH)
    unknown = await admin.delete("/admin/facilities/123456/keys/999", headers=AUTH)
    long_label = await admin.post(
        "/admin/facilities/123456/keys", json={"label": "l" * 101}, headers=AUTH
    )
    assert (not_a_number.status_code, _code(not_a_number)) == (422, "invalid_input")
    assert (unknown.status_code, _code(unknown)) == (404, "gateway_key_not_found")
    assert (long_label.status_code, _code(long_label)) == (422, "invalid_label")


async def test_a_key_of_another_facility_cannot_be_revoked_through_this_one(
    admin: httpx.AsyncClient, service: FacilityService
) -> None:
    a = (await admin.post("/admin/facilities", json=FACILITY_BODY, headers=AUTH)).json()
    await admin.post("/admin/facilities", json={**FACILITY_BODY, "hotel_id": "222"}, headers=AUTH)
    key_a = (await admin.get("/admin/facilities/123456/keys", headers=AUTH)).json()["keys"][0]
    response = await admin.delete(f"/admin/facilities/222/keys/{key_a['id']}", headers=AUTH)
    assert (response.status_code, _code(response)) == (404, "gateway_key_not_found")
    assert (await service.authenticate(a["gateway_key"])).hotel_id == "123456"


# --- reconnect, verified by the booking-system emulator -------------------------------------


async def _register_seed(
    admin: httpx.AsyncClient, kross_http: httpx.AsyncClient, kind: str
) -> dict[str, Any]:
    seed = next(f for f in await seeded_facilities(kross_http) if f["kind"] == kind)
    body = {
        "hotel_id": seed["hotel_id"],
        "username": seed["username"],
        "password": seed["password"],
        "kind": kind,
        "integration_id": "int-1",
        **({"api_key": seed["api_key"]} if kind == "own" else {}),
    }
    assert (await admin.post("/admin/facilities", json=body, headers=AUTH)).status_code == 201
    return seed


async def test_reconnect_with_a_wrong_password_is_422_with_the_upstream_reason_and_changes_nothing(
    admin: httpx.AsyncClient, kross_http: httpx.AsyncClient, service: FacilityService
) -> None:
    seed = await _register_seed(admin, kross_http, "partner")
    await service.mark_error(seed["hotel_id"], "pms_auth_failed")
    before = await service.credentials(seed["hotel_id"])

    response = await admin.post(
        f"/admin/facilities/{seed['hotel_id']}/reconnect",
        json={"username": seed["username"], "password": "wrong-password-1"},
        headers=AUTH,
    )
    assert (response.status_code, _code(response)) == (422, "pms_auth_failed")
    assert "AUTH_FAILED" in response.json()["error"]["message"]
    assert "wrong-password-1" not in response.text
    assert await service.credentials(seed["hotel_id"]) == before
    assert (await service.get(seed["hotel_id"])).status == "error"


async def test_reconnect_with_valid_credentials_returns_the_facility_to_connected(
    admin: httpx.AsyncClient, kross_http: httpx.AsyncClient, service: FacilityService
) -> None:
    seed = await _register_seed(admin, kross_http, "own")
    hotel_id = seed["hotel_id"]
    await kross_http.post(f"/_sandbox/facilities/{hotel_id}/password", json={"password": "fresh-1"})
    await service.mark_error(hotel_id, "pms_auth_failed")

    response = await admin.post(
        f"/admin/facilities/{hotel_id}/reconnect",
        json={"username": seed["username"], "password": "fresh-1"},
        headers=AUTH,
    )
    assert response.status_code == 200
    assert (response.json()["status"], response.json()["last_error"]) == ("connected", None)
    assert "fresh-1" not in response.text
    assert (await service.credentials(hotel_id)).password.get_secret_value() == "fresh-1"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"username": "owner@example.com", "password": "x"}, "username_is_email"),
        ({"username": "api1"}, "invalid_input"),
        ({"username": "api1", "password": "x", "extra": 1}, "invalid_input"),
        (
            {"username": "api1", "password": "x", "api_key": OWN_API_KEY},
            "api_key_not_allowed_for_partner",
        ),
    ],
)
async def test_a_bad_reconnect_body_is_422_and_never_reaches_the_booking_system(
    service: FacilityService, body: dict[str, Any], code: str
) -> None:
    async with _admin_client(service, ADMIN_TOKEN, _never_called) as admin:
        await admin.post("/admin/facilities", json=FACILITY_BODY, headers=AUTH)
        response = await admin.post("/admin/facilities/123456/reconnect", json=body, headers=AUTH)
    assert (response.status_code, _code(response)) == (422, code)


# --- what the database cannot store is refused at the boundary --------------------------------
# PostgreSQL rejects a NUL character in text and an integer beyond its INTEGER columns; both
# were 500s there (SQLite stored them). Each is a 422 on either database, and nothing is written.

NUL = "\x00"
TOO_BIG = [2**31, 2**63, 2**64, 10**30]


@pytest.mark.parametrize("field", ["hotel_id", "username", "kind", "integration_id", "name"])
async def test_a_nul_in_a_facility_field_is_422_and_writes_nothing(
    admin: httpx.AsyncClient, database_url: str, field: str
) -> None:
    body = {**FACILITY_BODY, field: f"{FACILITY_BODY[field]}{NUL}x"}
    response = await admin.post("/admin/facilities", json=body, headers=AUTH)
    assert response.status_code == 422, response.text
    assert _code(response) == "invalid_characters"
    assert await row_counts(database_url) == (0, 0)


@pytest.mark.parametrize(("method", "path", "body"), facility_routes("12%003"))
async def test_a_nul_in_the_hotel_id_of_a_path_is_422(
    admin: httpx.AsyncClient, method: str, path: str, body: dict[str, Any] | None
) -> None:
    response = await admin.request(method, path, json=body, headers=AUTH)
    assert (response.status_code, _code(response)) == (422, "invalid_characters"), response.text


async def test_a_nul_in_a_key_label_or_a_reconnect_username_is_422(
    admin: httpx.AsyncClient, database_url: str
) -> None:
    assert (await admin.post("/admin/facilities", json=FACILITY_BODY, headers=AUTH)).is_success
    label = await admin.post(
        "/admin/facilities/123456/keys", json={"label": f"bot{NUL}"}, headers=AUTH
    )
    reconnect = await admin.post(
        "/admin/facilities/123456/reconnect",
        json={"username": f"api1{NUL}", "password": "x"},
        headers=AUTH,
    )
    assert (label.status_code, _code(label)) == (422, "invalid_characters")
    assert (reconnect.status_code, _code(reconnect)) == (422, "invalid_characters")
    assert await row_counts(database_url) == (1, 1)


@pytest.mark.parametrize("value", TOO_BIG)
async def test_limits_beyond_the_database_integer_are_422(
    admin: httpx.AsyncClient, database_url: str, value: int
) -> None:
    limits = {"per_minute": 10, "per_hour": 300, "per_day": value}
    created = await admin.post(
        "/admin/facilities", json={**FACILITY_BODY, "limits": limits}, headers=AUTH
    )
    assert (created.status_code, _code(created)) == (422, "integer_out_of_range")
    assert await row_counts(database_url) == (0, 0)

    assert (await admin.post("/admin/facilities", json=FACILITY_BODY, headers=AUTH)).is_success
    changed = await admin.put("/admin/facilities/123456/limits", json=limits, headers=AUTH)
    assert (changed.status_code, _code(changed)) == (422, "integer_out_of_range")
    shown = await admin.get("/admin/facilities/123456", headers=AUTH)
    assert shown.json()["limits"]["per_day"] == 5000


async def test_the_largest_storable_limit_is_accepted(admin: httpx.AsyncClient) -> None:
    assert (await admin.post("/admin/facilities", json=FACILITY_BODY, headers=AUTH)).is_success
    limits = {"per_minute": 10, "per_hour": 300, "per_day": 2**31 - 1}
    changed = await admin.put("/admin/facilities/123456/limits", json=limits, headers=AUTH)
    assert changed.status_code == 200, changed.text
    assert changed.json()["limits"]["per_day"] == 2**31 - 1


@pytest.mark.parametrize("key_id", [*TOO_BIG, 0, -1])
async def test_a_key_id_beyond_the_database_integer_is_422(
    admin: httpx.AsyncClient, key_id: int
) -> None:
    assert (await admin.post("/admin/facilities", json=FACILITY_BODY, headers=AUTH)).is_success
    response = await admin.delete(f"/admin/facilities/123456/keys/{key_id}", headers=AUTH)
    code = "integer_out_of_range" if key_id > 0 else "invalid_input"
    assert (response.status_code, _code(response)) == (422, code), response.text
