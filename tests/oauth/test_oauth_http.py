"""pmsgate's authorization server and the bearer check, over HTTP on the real app.

Discovery documents, the 401 challenge, each refusal (audience, expiry, revocation, scope),
PKCE, code and refresh token reuse, registration on or off, the consent's facility rule and
the console's grants list. The app runs on the in-process emulators (tests/web/support.py);
time moves on the sandbox's clock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from pmsgate.audit.actions import AuditAction
from pmsgate.config import Settings
from pmsgate.gateway.facilities import NewFacility
from pmsgate.gateway.scopes import TOOLS_READ
from pmsgate.storage.audit import AuditFilter
from tests.oauth.support import (
    REDIRECT_URI,
    authorize_url,
    connect,
    consent,
    form_fields,
    pkce,
    query_of,
    register,
)
from tests.web.support import WebSandbox, web_sandbox

pytestmark = pytest.mark.anyio

BASE = "http://pmsgate.test"
TOOL = "/v1/tools/get-in-house-guests"
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


@asynccontextmanager
async def oauth_sandbox(database_url: str, **overrides: Any) -> AsyncIterator[WebSandbox]:
    """The web sandbox with the app's lifespan entered (the MCP session manager runs).

    Client registration is open unless a test says otherwise: the flows register a client,
    and on PostgreSQL (taken for production) registration is closed by default.
    """
    overrides.setdefault("oauth_client_registration", True)
    async with (
        web_sandbox(database_url, settings_overrides=overrides) as web,
        web.app.router.lifespan_context(web.app),
    ):
        yield web


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def on_mcp(web: WebSandbox, token: str) -> httpx.Response:
    return await web.client.post("/mcp", json=LIST_TOOLS, headers={**MCP_HEADERS, **bearer(token)})


async def oauth_actions(web: WebSandbox) -> list[str]:
    page = await web.web.audit.page(AuditFilter(action_prefix="oauth."), limit=100)
    return [event.action for event in page.events]


async def customer_browser(web: WebSandbox) -> httpx.AsyncClient:
    browser, _ = await web.signed_in("customer")
    return browser


async def test_the_discovery_documents_point_from_the_resource_to_the_server(
    database_url: str,
) -> None:
    async with oauth_sandbox(database_url) as web:
        mcp = (await web.client.get("/.well-known/oauth-protected-resource/mcp")).json()
        api = (await web.client.get("/.well-known/oauth-protected-resource")).json()
        server = (await web.client.get("/.well-known/oauth-authorization-server")).json()

    assert mcp["resource"] == f"{BASE}/mcp"
    assert api["resource"] == BASE
    assert mcp["authorization_servers"] == api["authorization_servers"] == [BASE]
    assert TOOLS_READ in mcp["scopes_supported"]
    assert server["issuer"] == BASE
    assert server["authorization_endpoint"] == f"{BASE}/oauth/authorize"
    assert server["token_endpoint"] == f"{BASE}/oauth/token"
    assert server["registration_endpoint"] == f"{BASE}/oauth/register"  # SQLite: open
    assert server["code_challenge_methods_supported"] == ["S256"]


@pytest.mark.parametrize("path", ["/mcp", TOOL])
async def test_a_call_without_a_credential_gets_the_challenge(database_url: str, path: str) -> None:
    async with oauth_sandbox(database_url) as web:
        answer = await web.client.post(path, json=LIST_TOOLS, headers=MCP_HEADERS)

    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "missing_gateway_key"
    suffix = "/mcp" if path == "/mcp" else ""
    assert answer.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{BASE}/.well-known/oauth-protected-resource{suffix}", '
        f'scope="{TOOLS_READ}"'
    )


async def test_gateway_keys_keep_working_beside_oauth(database_url: str) -> None:
    async with oauth_sandbox(database_url) as web:
        _, raw = await web.gateway.facilities.mint_key(web.hotel_id, "server", scopes=(TOOLS_READ,))
        by_key = await web.client.post(TOOL, json={}, headers=bearer(raw))
        wrong_key = await web.client.post(TOOL, json={}, headers=bearer(raw[:-1] + "x"))

    assert by_key.status_code == 200, by_key.text
    assert wrong_key.status_code == 401
    assert wrong_key.json()["error"]["code"] == "invalid_gateway_key"
    assert 'error="invalid_token"' in wrong_key.headers["www-authenticate"]


async def test_an_access_token_works_for_its_resource_only(database_url: str) -> None:
    async with oauth_sandbox(database_url) as web:
        for_mcp = await connect(web.client, await customer_browser(web))
        for_api = await connect(web.client, await customer_browser(web), resource=BASE)

        mcp_by_mcp_token = await on_mcp(web, for_mcp.access_token)
        api_by_mcp_token = await web.client.post(
            TOOL, json={}, headers=bearer(for_mcp.access_token)
        )
        api_by_api_token = await web.client.post(
            TOOL, json={}, headers=bearer(for_api.access_token)
        )
        mcp_by_api_token = await on_mcp(web, for_api.access_token)  # the origin covers /mcp

    assert mcp_by_mcp_token.status_code == 200, mcp_by_mcp_token.text
    assert api_by_api_token.status_code == 200, api_by_api_token.text
    assert api_by_mcp_token.status_code == 401
    assert api_by_mcp_token.json()["error"]["code"] == "invalid_token"
    assert "another resource" in api_by_mcp_token.json()["error"]["message"]
    assert 'error="invalid_token"' in api_by_mcp_token.headers["www-authenticate"]
    assert mcp_by_api_token.status_code == 200


async def test_an_expired_access_token_is_refused_and_the_refresh_rotates(
    database_url: str,
) -> None:
    async with oauth_sandbox(database_url) as web:
        connected = await connect(web.client, await customer_browser(web))
        web.enrolled.clock.advance(3601)
        expired = await on_mcp(web, connected.access_token)
        refresh = {
            "grant_type": "refresh_token",
            "refresh_token": connected.refresh_token,
            "client_id": connected.client_id,
        }
        rotated = await web.client.post("/oauth/token", data=refresh)
        fresh = rotated.json()
        works = await on_mcp(web, fresh["access_token"])
        reused = await web.client.post("/oauth/token", data=refresh)
        after_reuse = await on_mcp(web, fresh["access_token"])
        newest = await web.client.post(
            "/oauth/token", data={**refresh, "refresh_token": fresh["refresh_token"]}
        )
        actions = await oauth_actions(web)

    assert expired.status_code == 401
    assert "expired" in expired.json()["error"]["message"]
    assert rotated.status_code == 200, rotated.text
    assert fresh["refresh_token"] != connected.refresh_token
    assert works.status_code == 200
    # The spent refresh token again: refused, and the whole grant ends (it was copied).
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"
    assert after_reuse.status_code == 401
    assert newest.status_code == 400
    assert AuditAction.OAUTH_REFRESH_REUSED in actions
    assert AuditAction.OAUTH_GRANTED in actions


async def test_a_token_given_back_is_refused_at_once(database_url: str) -> None:
    async with oauth_sandbox(database_url) as web:
        connected = await connect(web.client, await customer_browser(web))
        before = await on_mcp(web, connected.access_token)  # now remembered by the cache
        given_back = await web.client.post(
            "/oauth/revoke",
            data={"token": connected.access_token, "client_id": connected.client_id},
        )
        after = await on_mcp(web, connected.access_token)
        actions = await oauth_actions(web)

    assert before.status_code == 200
    assert given_back.status_code == 200
    assert after.status_code == 401
    assert "revoked" in after.json()["error"]["message"]
    assert AuditAction.OAUTH_REVOKED in actions


async def test_a_scope_not_granted_is_a_403_with_insufficient_scope(database_url: str) -> None:
    async with oauth_sandbox(database_url) as web:
        connected = await connect(web.client, await customer_browser(web), resource=BASE)
        answer = await web.client.post(
            "/v1/operations/get-house-manual", json={}, headers=bearer(connected.access_token)
        )

    assert answer.status_code == 403
    assert answer.json()["error"]["code"] == "scope_missing"
    assert answer.headers["www-authenticate"] == (
        'Bearer error="insufficient_scope", scope="operations:read", '
        f'resource_metadata="{BASE}/.well-known/oauth-protected-resource"'
    )


async def test_pkce_plain_is_refused_and_a_code_works_once(database_url: str) -> None:
    async with oauth_sandbox(database_url) as web:
        browser = await customer_browser(web)
        client_id = await register(web.client)
        verifier, challenge = pkce()
        plain = await browser.get(authorize_url(client_id, verifier, code_challenge_method="plain"))
        wrong_target = await browser.get(
            authorize_url(client_id, challenge, resource="https://evil.test/mcp")
        )
        answer = await consent(browser, authorize_url(client_id, challenge))
        exchange = {
            "grant_type": "authorization_code",
            "code": answer["code"],
            "redirect_uri": REDIRECT_URI,
            "client_id": client_id,
            "code_verifier": verifier,
        }
        bad_verifier = await web.client.post(
            "/oauth/token", data={**exchange, "code_verifier": pkce()[0]}
        )
        first = await web.client.post("/oauth/token", data=exchange)
        second = await web.client.post("/oauth/token", data=exchange)
        after_reuse = await on_mcp(web, first.json()["access_token"])
        actions = await oauth_actions(web)

    assert plain.status_code == 302
    assert query_of(plain.headers["location"])["error"] == "invalid_request"
    assert query_of(wrong_target.headers["location"])["error"] == "invalid_target"
    assert answer["state"] == "st-1"
    assert bad_verifier.json()["error"] == "invalid_grant"
    assert first.status_code == 200, first.text
    assert second.json()["error"] == "invalid_grant"
    assert after_reuse.status_code == 401  # a code used twice ends its grant
    assert AuditAction.OAUTH_CODE_REUSED in actions


async def test_a_customer_grants_only_its_own_facility_and_may_deny(database_url: str) -> None:
    async with oauth_sandbox(database_url) as web:
        await web.gateway.facilities.add(
            NewFacility(
                hotel_id="999001",
                username="api99901",
                password=SecretStr("a-password-for-tests"),
                kind="partner",
                integration_id="integration-999001",
            ),
            unverified=True,
        )
        browser = await customer_browser(web)
        admin, _ = await web.signed_in("admin")
        client_id = await register(web.client)
        _, challenge = pkce()
        sent = await browser.get(authorize_url(client_id, challenge))
        page = await browser.get(sent.headers["location"])
        admin_page = await admin.get(sent.headers["location"])
        every = list(await web.web.gateway.facilities.list())
        foreign = [f.id for f in every if f.hotel_id != web.hotel_id]
        fields = {**form_fields(page.text), "decision": "allow", "facility": str(foreign[0])}
        refused = await browser.post("/console/oauth/consent", data=fields)
        denied = await browser.post("/console/oauth/consent", data={**fields, "decision": "deny"})
        again = await browser.get(sent.headers["location"])

    assert page.text.count("<option value=") == 1 and web.hotel_id in page.text
    assert admin_page.text.count("<option value=") == len(every) > 1
    assert refused.status_code == 422
    assert "invalid_facility" in refused.text
    assert query_of(denied.headers["location"]) == {"error": "access_denied", "state": "st-1"}
    assert again.status_code == 404  # answered: the request is gone


async def test_the_consent_page_asks_to_sign_in_first_and_comes_back(database_url: str) -> None:
    async with oauth_sandbox(database_url) as web:
        client_id = await register(web.client)
        _, challenge = pkce()
        sent = await web.client.get(authorize_url(client_id, challenge))
        page = await web.client.get(sent.headers["location"])
        italian = await (await customer_browser(web)).get(
            sent.headers["location"], headers={"Accept-Language": "it"}
        )

    assert page.status_code == 303
    assert page.headers["location"].startswith("/login?next=/console/oauth/consent")
    assert italian.status_code == 200


async def test_grants_are_listed_per_customer_and_revoked_by_admin(database_url: str) -> None:
    async with oauth_sandbox(database_url) as web:
        other_student = await web.second_customer()
        connected = await connect(web.client, await customer_browser(web))
        stranger, stranger_csrf = await web.signed_in("customer", student_id=other_student)
        admin, admin_csrf = await web.signed_in("admin")
        strangers_list = await stranger.get("/console/oauth/grants")
        admins_list = await admin.get("/console/oauth/grants")
        grant_id = admins_list.text.split('data-grant="')[1].split('"')[0]
        not_theirs = await stranger.post(
            f"/console/oauth/grants/{grant_id}/revoke", data={"csrf_token": stranger_csrf}
        )
        no_csrf = await admin.post(f"/console/oauth/grants/{grant_id}/revoke", data={})
        revoked = await admin.post(
            f"/console/oauth/grants/{grant_id}/revoke", data={"csrf_token": admin_csrf}
        )
        after = await on_mcp(web, connected.access_token)
        listed = await admin.get(revoked.headers["location"])

    assert 'data-testid="oauth-no-grants"' in strangers_list.text
    assert "Test assistant" in admins_list.text
    assert not_theirs.status_code == 404
    assert no_csrf.status_code == 403
    assert revoked.status_code == 303
    assert after.status_code == 401
    assert 'data-testid="oauth-revoked"' in listed.text and "disconnected" in listed.text


async def test_registration_is_closed_where_the_settings_say(database_url: str) -> None:
    async with oauth_sandbox(database_url, oauth_client_registration=False) as web:
        server = (await web.client.get("/.well-known/oauth-authorization-server")).json()
        answer = await web.client.post("/oauth/register", json={"redirect_uris": [REDIRECT_URI]})

    assert "registration_endpoint" not in server
    assert answer.status_code == 403


def test_production_is_a_database_server() -> None:
    embedded = Settings(_env_file=None)  # type: ignore[call-arg]
    server = Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_url="postgresql+asyncpg://pmsgate@db/pmsgate",
    )
    opened = Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_url="postgresql+asyncpg://pmsgate@db/pmsgate",
        oauth_client_registration=True,
    )

    assert embedded.oauth_registration_open is True
    assert server.oauth_registration_open is False
    assert opened.oauth_registration_open is True
