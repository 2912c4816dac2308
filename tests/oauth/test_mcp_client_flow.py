"""The official MCP Python SDK client connects with the server URL alone, over real HTTP.

The app is served by uvicorn on loopback (tests/support/servers.py); the SDK's
``OAuthClientProvider`` (in-memory token storage) gets a 401 from /mcp, discovers the
protected resource and authorization server metadata, registers itself, sends the person
to the authorization endpoint — here the redirect handler drives the console's consent
page over HTTP as a signed-in customer, no browser — exchanges the code and calls
``check-availability`` for the facility the customer chose. Then the customer disconnects
the app in the console, and the very next call is refused.
"""

from __future__ import annotations

import datetime as dt
import json

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from tests.oauth.support import REDIRECT_URI, consent
from tests.support.servers import free_port, serving_app
from tests.web.support import ENGLISH, login, web_sandbox

pytestmark = pytest.mark.anyio


class MemoryStorage:
    """The SDK's TokenStorage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def test_the_sdk_client_connects_consents_calls_and_is_refused_once_revoked(
    database_url: str,
) -> None:
    # Registration open on either database (closed by default on PostgreSQL: production).
    async with web_sandbox(
        database_url, settings_overrides={"oauth_client_registration": True}
    ) as web:
        email, password = await web.add_user("customer")
        async with (
            serving_app(web.app, free_port()) as base,
            httpx.AsyncClient(base_url=base, headers=ENGLISH) as browser,
        ):
            await login(browser, email, password)
            answers: list[dict[str, str]] = []

            async def redirect_handler(url: str) -> None:
                answers.append(await consent(browser, url))

            async def callback_handler() -> AuthorizationCodeResult:
                answer = answers.pop()
                return AuthorizationCodeResult(code=answer["code"], state=answer["state"])

            storage = MemoryStorage()
            provider = OAuthClientProvider(
                server_url=f"{base}/mcp",
                client_metadata=OAuthClientMetadata(
                    client_name="Assistant app",
                    redirect_uris=[REDIRECT_URI],  # type: ignore[list-item]
                    grant_types=["authorization_code", "refresh_token"],
                    response_types=["code"],
                    token_endpoint_auth_method="none",
                ),
                storage=storage,
                redirect_handler=redirect_handler,
                callback_handler=callback_handler,
            )
            today = web.enrolled.clock.now().date()
            arguments = {
                "arrival": (today + dt.timedelta(days=3)).isoformat(),
                "departure": (today + dt.timedelta(days=5)).isoformat(),
            }
            async with (
                httpx2.AsyncClient(auth=provider, timeout=30) as http,
                Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client,
            ):
                result = await client.call_tool("check-availability", arguments)
            assert result.is_error is False, result.content
            assert storage.tokens is not None and storage.tokens.access_token.startswith("pmo_")
            assert storage.tokens.scope == "tools:read"

            # The grant is listed for the customer, for the facility chosen, and disconnected.
            page = await browser.get("/console/oauth/grants")
            assert "Assistant app" in page.text and web.hotel_id in page.text
            grant_id = page.text.split('data-grant="')[1].split('"')[0]
            csrf_token = page.text.split('name="csrf_token" value="')[1].split('"')[0]
            revoked = await browser.post(
                f"/console/oauth/grants/{grant_id}/revoke", data={"csrf_token": csrf_token}
            )
            assert revoked.status_code == 303

            # Refused at once: the access token is no longer valid, whatever was remembered.
            async with httpx.AsyncClient(base_url=base) as caller:
                refused = await caller.post(
                    "/mcp",
                    headers={
                        "Authorization": f"Bearer {storage.tokens.access_token}",
                        "Accept": "application/json, text/event-stream",
                    },
                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                )
            assert refused.status_code == 401
            assert json.loads(refused.text)["error"]["code"] == "invalid_token"
            challenge = refused.headers["www-authenticate"]
            assert 'error="invalid_token"' in challenge
            assert f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"' in (
                challenge
            )
