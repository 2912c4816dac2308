"""An external authorization server instead of pmsgate's own: its JWTs on /mcp and /v1.

The issuer's JWKS is served over real HTTP by a small app on loopback (an identity
provider as pmsgate would reach it); the tokens are signed with its RSA key. Each claim
that matters is tried wrong once.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.support.servers import free_port, serving_app
from tests.web.support import WebSandbox, web_sandbox

pytestmark = pytest.mark.anyio

BASE = "http://pmsgate.test"
ISSUER = "https://login.example.test"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


def identity_provider() -> Starlette:
    """Publishes the issuer's one signing key."""
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(KEY.public_key()))

    async def jwks(request: Any) -> JSONResponse:
        return JSONResponse({"keys": [{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]})

    return Starlette(routes=[Route("/jwks", jwks)])


@asynccontextmanager
async def external_sandbox(database_url: str) -> AsyncIterator[WebSandbox]:
    async with serving_app(identity_provider(), free_port()) as idp:
        overrides = {"oauth_external_issuer": ISSUER, "oauth_external_jwks_url": f"{idp}/jwks"}
        async with (
            web_sandbox(database_url, settings_overrides=overrides) as web,
            web.app.router.lifespan_context(web.app),
        ):
            yield web


def token(web: WebSandbox, key: Any = KEY, **claims: Any) -> str:
    now = web.enrolled.clock.now()
    body = {
        "iss": ISSUER,
        "sub": "user-1",
        "aud": f"{BASE}/mcp",
        "exp": int((now + timedelta(minutes=10)).timestamp()),
        "scope": "tools:read",
        "pmsgate_facility": web.hotel_id,
        **claims,
    }
    return jwt.encode(body, key, algorithm="RS256", headers={"kid": "k1"})


async def on_mcp(web: WebSandbox, raw: str) -> Any:
    return await web.client.post(
        "/mcp", json=LIST_TOOLS, headers={**MCP_HEADERS, "Authorization": f"Bearer {raw}"}
    )


async def test_the_external_servers_tokens_are_checked_claim_by_claim(database_url: str) -> None:
    async with external_sandbox(database_url) as web:
        metadata = (await web.client.get("/.well-known/oauth-protected-resource/mcp")).json()
        own_server = await web.client.get("/oauth/authorize")
        valid = await on_mcp(web, token(web))
        on_api = await web.client.post(
            "/v1/tools/get-in-house-guests",
            json={},
            headers={"Authorization": f"Bearer {token(web, aud=[BASE, 'other'])}"},
        )
        refused = {
            "audience": await on_mcp(web, token(web, aud="https://elsewhere.test/mcp")),
            "issuer": await on_mcp(web, token(web, iss="https://impostor.test")),
            "signature": await on_mcp(web, token(web, key=OTHER_KEY)),
            "expired": await on_mcp(
                web, token(web, exp=int(web.enrolled.clock.now().timestamp()) - 1)
            ),
            "facility": await on_mcp(web, token(web, pmsgate_facility="999999")),
            "not a jwt": await on_mcp(web, "pmo_" + "x" * 43),
        }
        no_scope = await on_mcp(web, token(web, scope="operations:read"))

    assert metadata["authorization_servers"] == [ISSUER]
    assert own_server.status_code == 404
    assert valid.status_code == 200, valid.text
    assert on_api.status_code == 200, on_api.text
    for why, answer in refused.items():
        assert answer.status_code == 401, (why, answer.text)
        assert answer.json()["error"]["code"] == "invalid_token", why
        assert 'error="invalid_token"' in answer.headers["www-authenticate"], why
    assert no_scope.status_code == 403
    assert 'error="insufficient_scope", scope="tools:read"' in no_scope.headers["www-authenticate"]
