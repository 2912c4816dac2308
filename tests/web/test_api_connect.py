"""PUT /api/admin/kross/connect and PUT /api/{assistant}/kross/connect, through HTTP (spec §3)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from pmsgate.gateway.facilities import Limits
from pmsgate.storage.models import CustomerIntegration, Facility, FacilityToken
from tests.support.answers import assert_error
from tests.web.support import WebSandbox, csrf, web_sandbox

pytestmark = pytest.mark.anyio

NEW_PASSWORD = "the-new-api-password-9431"
WRONG_PASSWORD = "not-the-password-at-all-5528"
OTHER_STUDENT = "stu-other"
ADMIN_CONNECT = "/api/admin/kross/connect"


@asynccontextmanager
async def connect_web(database_url: str, **options: Any) -> AsyncIterator[WebSandbox]:
    """The web app over the seeded partner customer with four apartments."""
    options.setdefault("seed", 7)
    options.setdefault("student_index", 1)
    async with web_sandbox(database_url, **options) as web:
        yield web


@pytest.fixture
async def web(database_url: str) -> AsyncIterator[WebSandbox]:
    """The web app over the seeded partner customer with four apartments."""
    async with connect_web(database_url) as sandbox:
        yield sandbox


@dataclass(frozen=True)
class Snapshot:
    """Everything a refused reconnect must leave exactly as it was."""

    facility: tuple[Any, ...]
    token: tuple[Any, ...] | None
    row: tuple[Any, ...]
    assistant_connection: tuple[Any, ...] | None
    assistant_healthy: bool


async def snapshot(web: WebSandbox) -> Snapshot:
    """Read back the facility, its stored token, the kross row and the platform's connection."""
    async with web.web.customers.sessions() as session:
        facility = await session.scalar(select(Facility).where(Facility.hotel_id == web.hotel_id))
        assert facility is not None
        token = await session.scalar(
            select(FacilityToken).where(FacilityToken.facility_id == facility.id)
        )
        row = await session.scalar(
            select(CustomerIntegration).where(
                CustomerIntegration.student_id == web.student_id,
                CustomerIntegration.provider == "kross",
            )
        )
        assert row is not None
    connection, healthy = web.enrolled.sandbox.assistant.pms_connection(await workspace_id(web))
    return Snapshot(
        facility=(
            facility.username,
            facility.password_enc,
            facility.api_key_enc,
            facility.status,
            facility.last_error,
            facility.updated_at,
        ),
        token=(token.token_enc, token.expires_at) if token is not None else None,
        row=(
            row.status,
            row.last_error,
            row.status_changed_at,
            row.updated_at,
            row.listings_sync_due_at,
        ),
        assistant_connection=(
            (connection.hotel_id, connection.username, connection.password)
            if connection is not None
            else None
        ),
        assistant_healthy=healthy,
    )


async def workspace_id(web: WebSandbox) -> str:
    ctx = await web.enrolled.context()
    assert ctx.workspace_id is not None
    return ctx.workspace_id


def assistant_listings(web: WebSandbox, workspace: str) -> int:
    return len(web.enrolled.sandbox.assistant.listings(workspace))


async def gateway_call(web: WebSandbox) -> httpx.Response:
    """One tool call through the gateway's HTTP API with a fresh key of the facility."""
    _, key = await web.gateway.facilities.mint_key(web.hotel_id, "test")
    return await web.client.post(
        "/v1/tools/get-in-house-guests", json={}, headers={"Authorization": f"Bearer {key}"}
    )


async def break_password(web: WebSandbox) -> None:
    """Spec §3: the customer changes the API password; the next gateway call fails."""
    web.enrolled.sandbox.kross.change_password(web.hotel_id, NEW_PASSWORD)
    failed = await gateway_call(web)
    assert failed.json()["error"]["code"] == "pms_auth_failed", failed.text


async def broken_then_snapshot(web: WebSandbox) -> Snapshot:
    """Break the facility's password (see :func:`break_password`); the snapshot then."""
    await break_password(web)
    return await snapshot(web)


def connect_body(web: WebSandbox, password: str, **extra: Any) -> dict[str, Any]:
    return {
        "studentId": web.student_id,
        "username": web.enrolled.facility["username"],
        "password": password,
        **extra,
    }


async def admin_connect(
    web: WebSandbox, password: str = NEW_PASSWORD, body: dict[str, Any] | None = None, **extra: Any
) -> httpx.Response:
    """PUT the admin connect endpoint as a newly signed-in admin, with its CSRF token; the
    body is ``body`` or :func:`connect_body` of ``password`` and ``extra``."""
    admin, token = await web.signed_in("admin")
    json = body if body is not None else connect_body(web, password, **extra)
    return await admin.put(ADMIN_CONNECT, json=json, headers=csrf(token))


async def test_an_admin_reconnect_after_a_password_change_brings_back_connected_and_listings(
    web: WebSandbox, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    workspace = await workspace_id(web)
    await break_password(web)
    broken = await web.enrolled.context()
    assert broken.kross is not None and broken.kross.status == "error"
    assert assistant_listings(web, workspace) == 0

    answer = await admin_connect(web)

    assert answer.status_code == 200, answer.text
    apartments = len(web.enrolled.facility["apartments"])
    body = answer.json()
    assert body["studentId"] == web.student_id and body["hotelId"] == web.hotel_id
    assert (body["status"], body["listingsSync"], body["listings"]) == (
        "connected",
        "restarted",
        apartments,
    )
    ctx = await web.enrolled.context()
    assert ctx.kross is not None
    assert (ctx.kross.status, ctx.kross.last_error) == ("connected", None)
    facility = await web.gateway.facilities.get(web.hotel_id)
    assert (facility.status, facility.last_error) == ("connected", None)
    stored = await web.gateway.facilities.credentials(web.hotel_id)
    assert stored.password.get_secret_value() == NEW_PASSWORD
    # The platform's own connection got the new password: its listings are back.
    assert assistant_listings(web, workspace) == apartments
    assert web.enrolled.sandbox.assistant.pms_connection(workspace)[1] is True
    assert sum(1 for a in ctx.apartments if a.assistant_listing_id) == apartments
    issued = web.enrolled.sandbox.kross.stats.tokens_issued[web.hotel_id]
    assert (await gateway_call(web)).status_code == 200
    # The token that proved the new password serves the call: no second session upstream.
    assert web.enrolled.sandbox.kross.stats.tokens_issued[web.hotel_id] == issued
    assert (await snapshot(web)).row[4] is None  # no listings sync left due
    captured = capsys.readouterr()
    for secret in (NEW_PASSWORD,):
        assert secret not in answer.text
        assert secret not in captured.out + captured.err + caplog.text


async def test_a_refused_password_is_a_422_and_changes_nothing(
    web: WebSandbox, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    await web.gateway.tokens.token(web.hotel_id)  # a stored token that must survive
    before = await snapshot(web)
    assert before.token is not None and before.assistant_healthy

    answer = await admin_connect(web, WRONG_PASSWORD)

    assert assert_error(answer, 422, "pms_credentials_rejected")["hint"]
    assert await snapshot(web) == before
    captured = capsys.readouterr()
    assert WRONG_PASSWORD not in answer.text
    assert WRONG_PASSWORD not in captured.out + captured.err + caplog.text


async def test_a_refused_password_leaves_an_integration_in_error_as_it_was(web: WebSandbox) -> None:
    before = await broken_then_snapshot(web)
    assert before.facility[3] == "error" and before.row[0] == "error"
    assert not before.assistant_healthy

    answer = await admin_connect(web, WRONG_PASSWORD)

    assert_error(answer, 422, "pms_credentials_rejected")
    assert await snapshot(web) == before


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"username": "owner@example.com"}, "username_is_email"),
        ({"username": "admin"}, "invalid_username"),
        ({"password": "  "}, "missing_password"),
        ({"apiKey": "not-a-key"}, "invalid_api_key"),
        ({"hotelId": "12ab"}, "invalid_hotel_id"),
    ],
)
async def test_credentials_that_break_the_spec_rules_are_refused_with_their_code(
    web: WebSandbox, fields: dict[str, Any], code: str
) -> None:
    before = await snapshot(web)

    answer = await admin_connect(web, **fields)

    assert_error(answer, 422, code)
    assert await snapshot(web) == before


async def test_a_customer_account_cannot_use_the_admin_endpoint(web: WebSandbox) -> None:
    before = await broken_then_snapshot(web)
    customer, token = await web.signed_in("customer")

    answer = await customer.put(
        ADMIN_CONNECT, json=connect_body(web, NEW_PASSWORD), headers=csrf(token)
    )

    assert_error(answer, 403, "forbidden")
    assert await snapshot(web) == before


async def test_the_admin_endpoint_without_a_cookie_is_401(web: WebSandbox) -> None:
    answer = await web.client.put(ADMIN_CONNECT, json=connect_body(web, NEW_PASSWORD))

    assert_error(answer, 401, "not_authenticated")


async def test_the_admin_endpoint_without_the_csrf_token_is_403_and_changes_nothing(
    web: WebSandbox,
) -> None:
    before = await broken_then_snapshot(web)
    admin, _ = await web.signed_in("admin")

    answer = await admin.put(ADMIN_CONNECT, json=connect_body(web, NEW_PASSWORD))

    assert_error(answer, 403, "csrf_failed")
    assert await snapshot(web) == before


@pytest.mark.parametrize(
    ("naming", "status", "code"),
    [
        ({}, 422, "customer_required"),
        ({"studentId": "stu-a", "assistant": "sandbox-x"}, 422, "customer_required"),
        ({"studentId": "stu-nobody"}, 404, "customer_not_found"),
        ({"assistant": "no-such-workspace"}, 404, "customer_not_found"),
    ],
)
async def test_the_admin_endpoint_needs_exactly_one_known_customer(
    web: WebSandbox, naming: dict[str, str], status: int, code: str
) -> None:
    body = {k: v for k, v in connect_body(web, NEW_PASSWORD).items() if k != "studentId"}

    answer = await admin_connect(web, body={**body, **naming})

    assert_error(answer, status, code)


async def test_the_admin_endpoint_names_the_customer_by_its_assistant_too(web: WebSandbox) -> None:
    await break_password(web)
    body = {k: v for k, v in connect_body(web, NEW_PASSWORD).items() if k != "studentId"}

    answer = await admin_connect(web, body={**body, "assistant": web.assistant})

    assert answer.status_code == 200, answer.text
    assert answer.json()["studentId"] == web.student_id


async def test_a_hotel_id_other_than_the_customers_facility_is_a_409(web: WebSandbox) -> None:
    before = await snapshot(web)

    answer = await admin_connect(web, hotelId="999999")

    assert_error(answer, 409, "hotel_id_mismatch")
    assert await snapshot(web) == before


async def test_a_customer_reconnects_its_own_booking_system_from_its_page(web: WebSandbox) -> None:
    workspace = await workspace_id(web)
    await break_password(web)
    customer, token = await web.signed_in("customer")

    answer = await customer.put(
        f"/api/{web.assistant}/kross/connect",
        json={
            "username": web.enrolled.facility["username"],
            "password": NEW_PASSWORD,
            "hotelId": int(web.hotel_id),
        },
        headers=csrf(token),
    )

    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "connected"
    assert answer.json()["listingsSync"] == "restarted"
    assert assistant_listings(web, workspace) == len(web.enrolled.facility["apartments"])
    status = await customer.get(f"/api/{web.assistant}/status")
    assert status.json()["pms"]["status"] == "connected"


async def test_a_customer_cannot_reconnect_another_customer(web: WebSandbox) -> None:
    before = await broken_then_snapshot(web)
    await web.bare_customer(OTHER_STUDENT)
    stranger, token = await web.signed_in("customer", student_id=OTHER_STUDENT)
    body = {"username": web.enrolled.facility["username"], "password": NEW_PASSWORD}

    by_slug = await stranger.put(
        f"/api/{web.assistant}/kross/connect", json=body, headers=csrf(token)
    )
    by_id = await stranger.put(
        f"/api/{web.student_id}/kross/connect", json=body, headers=csrf(token)
    )
    own_without_row = await stranger.put(
        f"/api/{OTHER_STUDENT}/kross/connect", json=body, headers=csrf(token)
    )

    for answer in (by_slug, by_id):
        assert_error(answer, 403, "forbidden")
    assert_error(own_without_row, 404, "pms_not_linked")
    assert await snapshot(web) == before


async def test_the_customer_reconnect_needs_the_csrf_token(web: WebSandbox) -> None:
    before = await broken_then_snapshot(web)
    customer, _ = await web.signed_in("customer")

    answer = await customer.put(
        f"/api/{web.assistant}/kross/connect",
        json={"username": web.enrolled.facility["username"], "password": NEW_PASSWORD},
    )

    assert_error(answer, 403, "csrf_failed")
    assert await snapshot(web) == before


async def test_a_malformed_connect_body_is_a_422_without_echoing_the_password(
    web: WebSandbox,
) -> None:
    answer = await admin_connect(
        web, body={"studentId": web.student_id, "password": NEW_PASSWORD, "pasword": "x"}
    )

    assert_error(answer, 422, "invalid_input")
    assert NEW_PASSWORD not in answer.text


async def test_a_route_b_customer_reconnects_without_a_listings_sync(web: WebSandbox) -> None:
    workspace = await workspace_id(web)
    web.enrolled.sandbox.assistant.clear_kross_connection(workspace)
    await break_password(web)

    answer = await admin_connect(web)

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["status"], body["listingsSync"], body["listings"]) == (
        "connected",
        "not_applicable",
        None,
    )
    assert web.enrolled.sandbox.assistant.pms_connection(workspace)[0] is None


async def test_a_assistant_outage_leaves_the_listings_sync_due_and_the_reconnect_stands(
    web: WebSandbox,
) -> None:
    await break_password(web)
    # Every attempt of the platform client (it retries reads) answers 503.
    web.enrolled.sandbox.assistant.set_faults(fail_next=100, fail_status=503)

    answer = await admin_connect(web)

    web.enrolled.sandbox.assistant.clear_faults()
    assert answer.status_code == 200, answer.text
    assert (answer.json()["status"], answer.json()["listingsSync"]) == (
        "connected",
        "scheduled",
    )
    after = await snapshot(web)
    assert after.row[0] == "connected"
    due_at = after.row[4]
    assert isinstance(due_at, datetime)
    due = await web.web.customers.integrations.due_listings_syncs(web.enrolled.clock.now())
    assert [row.student_id for row in due] == [web.student_id]


async def test_an_own_facility_keeps_its_stored_api_key_when_none_is_given(
    database_url: str,
) -> None:
    async with connect_web(database_url, student_index=0) as web:
        assert web.enrolled.facility["kind"] == "own"
        api_key = web.enrolled.facility["api_key"]
        await break_password(web)
        admin, token = await web.signed_in("admin")

        kept = await admin.put(
            ADMIN_CONNECT, json=connect_body(web, NEW_PASSWORD), headers=csrf(token)
        )
        given = await admin.put(
            ADMIN_CONNECT,
            json=connect_body(web, NEW_PASSWORD, apiKey=api_key),
            headers=csrf(token),
        )

        for answer in (kept, given):
            assert answer.status_code == 200, answer.text
            assert answer.json()["status"] == "connected"
            assert api_key not in answer.text
        stored = await web.gateway.facilities.credentials(web.hotel_id)
        assert stored.api_key.get_secret_value() == api_key


# --- input PostgreSQL cannot take, and the upstream budget ---------------------------------------


async def allow_the_facility(web: WebSandbox, *, calls: int) -> None:
    """Leave the facility ``calls`` upstream requests a minute, an hour and a day."""
    await web.gateway.facilities.set_limits(
        web.hotel_id, Limits(per_minute=calls, per_hour=calls, per_day=calls)
    )


def token_requests(web: WebSandbox) -> int:
    """auth/get-token requests the booking-system emulator has seen."""
    return web.enrolled.sandbox.kross.stats.requests_by_operation["auth/get-token"]


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"username": "api1\u0000"}, "invalid_username"),
        ({"username": "\u0000"}, "invalid_username"),
        ({"password": "pass\u0000word"}, "invalid_password"),
        ({"password": "pass\u001bword"}, "invalid_password"),
        ({"password": "x" * 5000}, "password_too_long"),
        ({"apiKey": "0123456789abcdef0123456789abcde\u0000"}, "invalid_api_key"),
        ({"hotelId": "1\u0000"}, "invalid_hotel_id"),
    ],
)
async def test_credentials_with_control_characters_or_an_oversized_password_are_a_422(
    web: WebSandbox, fields: dict[str, Any], code: str
) -> None:
    before = await snapshot(web)
    requests = token_requests(web)
    customer, token = await web.signed_in("customer")
    body = {"username": web.enrolled.facility["username"], "password": NEW_PASSWORD, **fields}

    answer = await customer.put(
        f"/api/{web.assistant}/kross/connect", json=body, headers=csrf(token)
    )

    error = assert_error(answer, 422, code)
    assert error["message"] and error["hint"]
    assert token_requests(web) == requests  # nothing was sent upstream
    assert await snapshot(web) == before


async def test_a_nul_in_an_assistant_segment_or_a_body_is_refused_never_a_server_error(
    web: WebSandbox,
) -> None:
    customer, customer_token = await web.signed_in("customer")
    admin, admin_token = await web.signed_in("admin")
    body = {"username": web.enrolled.facility["username"], "password": NEW_PASSWORD}

    answers = {
        "customer status": await customer.get("/api/a%00b/status"),
        "customer connect": await customer.put(
            "/api/a%00b/kross/connect", json=body, headers=csrf(customer_token)
        ),
        "admin status": await admin.get("/api/a%00b/status"),
        "admin connect": await admin.put(
            ADMIN_CONNECT,
            json={**body, "assistant": "a\u0000b"},
            headers=csrf(admin_token),
        ),
        "admin connect by student id": await admin.put(
            ADMIN_CONNECT,
            json={**body, "studentId": "stu\u0000"},
            headers=csrf(admin_token),
        ),
        "console page": await admin.get("/console/customers/stu%00"),
    }

    # In a path: refused at the boundary (pmsgate.boundary); in a body: names no one.
    expected = {
        "customer status": (422, "invalid_characters"),
        "customer connect": (422, "invalid_characters"),
        "admin status": (422, "invalid_characters"),
        "admin connect": (404, "customer_not_found"),
        "admin connect by student id": (404, "customer_not_found"),
    }
    page = answers.pop("console page")
    assert page.status_code == 422 and 'data-code="invalid_characters"' in page.text
    for name, answer in answers.items():
        error = answer.json()["error"]
        assert (answer.status_code, error["code"]) == expected[name], (name, answer.text)
        assert error["message"] and error["hint"]


async def test_trying_credentials_spends_the_facilitys_budget_and_stops_when_it_is_spent(
    web: WebSandbox,
) -> None:
    await allow_the_facility(web, calls=2)
    before = await snapshot(web)
    requests = token_requests(web)
    customer, token = await web.signed_in("customer")
    body = {"username": web.enrolled.facility["username"], "password": WRONG_PASSWORD}
    url = f"/api/{web.assistant}/kross/connect"

    tried = [await customer.put(url, json=body, headers=csrf(token)) for _ in range(2)]
    spent = [await customer.put(url, json=body, headers=csrf(token)) for _ in range(3)]
    right = await customer.put(
        url, json={**body, "password": web.enrolled.facility["password"]}, headers=csrf(token)
    )

    for answer in tried:
        assert_error(answer, 422, "pms_credentials_rejected")
    for answer in [*spent, right]:
        assert_error(answer, 429, "upstream_budget_exhausted")
        assert int(answer.headers["Retry-After"]) > 0
    assert token_requests(web) == requests + 2
    assert await snapshot(web) == before


async def test_the_gateway_admin_reconnect_spends_the_facilitys_budget_too(
    database_url: str,
) -> None:
    admin_token = "an-admin-token-for-this-test-0417"
    async with connect_web(database_url, settings_overrides={"admin_token": admin_token}) as web:
        await allow_the_facility(web, calls=1)
        requests = token_requests(web)
        url = f"/admin/facilities/{web.hotel_id}/reconnect"
        body = {"username": web.enrolled.facility["username"], "password": WRONG_PASSWORD}
        headers = {"Authorization": f"Bearer {admin_token}"}

        tried = await web.client.post(url, json=body, headers=headers)
        spent = await web.client.post(url, json=body, headers=headers)

        assert tried.status_code == 422, tried.text
        assert_error(spent, 429, "upstream_budget_exhausted")
        assert int(spent.headers["Retry-After"]) > 0
        assert token_requests(web) == requests + 1
