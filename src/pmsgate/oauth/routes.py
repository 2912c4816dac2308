"""The OAuth documents and endpoints: discovery (RFC 9728, RFC 8414) and ``/oauth/*``.

- ``GET /.well-known/oauth-protected-resource/mcp``: the MCP endpoint as a protected
  resource (RFC 9728): its identifier ``<base>/mcp``, the authorization server, the scopes;
- ``GET /.well-known/oauth-protected-resource``: the HTTP API (``/v1``), resource ``<base>``;
- ``GET /.well-known/oauth-authorization-server``: the server's metadata (RFC 8414);
- ``GET/POST /oauth/authorize``: the authorization request (PKCE S256 only), on to the
  console's consent page;
- ``POST /oauth/token``: ``authorization_code`` and ``refresh_token`` (rotated);
- ``POST /oauth/register``: Dynamic Client Registration (RFC 7591), when
  PMSGATE_OAUTH_CLIENT_REGISTRATION allows;
- ``POST /oauth/revoke``: token revocation (RFC 7009): the token's grant ends.

``<base>`` is PMSGATE_GATEWAY_PUBLIC_URL, else the address the request reached. The
endpoints' answers are OAuth's own (``{"error", "error_description"}``, RFC 6749 §5.2):
the clients that call them read that shape, not the service's error envelope.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from mcp.server.auth.handlers.authorize import AuthorizationHandler
from mcp.server.auth.handlers.register import RegistrationHandler
from mcp.server.auth.handlers.token import TokenHandler
from mcp.server.auth.middleware.client_auth import AuthenticationError
from mcp.server.auth.settings import ClientRegistrationOptions

from pmsgate.gateway.context import gateway_services
from pmsgate.gateway.oauth_tokens import MCP_PATH, public_base, resource_of
from pmsgate.gateway.scopes import DEFAULT_SCOPES, all_scopes
from pmsgate.oauth.context import authorization_server
from pmsgate.oauth.server import BoundProvider, HashedSecretAuthenticator

AUTHORIZE_PATH = "/oauth/authorize"
TOKEN_PATH = "/oauth/token"
REGISTER_PATH = "/oauth/register"
REVOKE_PATH = "/oauth/revoke"
# Metadata is public and read by browser-based clients too (MCP Inspector).
_CORS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
    "Access-Control-Allow-Headers": "Content-Type, Authorization, MCP-Protocol-Version",
    "Cache-Control": "no-store",
}
_CLIENT_AUTH_METHODS = ["none", "client_secret_post", "client_secret_basic"]


def _base(request: Request) -> str:
    return public_base(request.scope, gateway_services(request).settings.gateway_public_url)


def _provider(request: Request) -> BoundProvider:
    return authorization_server(request).provider(_base(request))


def protected_resource(base: str, path: str, issuer: str | None = None) -> dict[str, Any]:
    """The protected resource metadata (RFC 9728) of the API at ``path``; ``issuer``: an
    external authorization server's, else pmsgate's own (``base``)."""
    return {
        "resource": resource_of(base, path),
        "authorization_servers": [issuer or base],
        "scopes_supported": list(all_scopes()),
        "bearer_methods_supported": ["header"],
        "resource_name": "pmsgate " + ("MCP tools" if path == MCP_PATH else "HTTP API"),
    }


def server_metadata(base: str, *, registration: bool) -> dict[str, Any]:
    """The authorization server metadata (RFC 8414)."""
    metadata: dict[str, Any] = {
        "issuer": base,
        "authorization_endpoint": base + AUTHORIZE_PATH,
        "token_endpoint": base + TOKEN_PATH,
        "revocation_endpoint": base + REVOKE_PATH,
        "scopes_supported": list(all_scopes()),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_methods_supported": _CLIENT_AUTH_METHODS,
        "revocation_endpoint_auth_methods_supported": _CLIENT_AUTH_METHODS,
        "code_challenge_methods_supported": ["S256"],
        "client_id_metadata_document_supported": False,
    }
    if registration:
        metadata["registration_endpoint"] = base + REGISTER_PATH
    return metadata


async def mcp_resource_metadata(request: Request) -> Response:
    """``/.well-known/oauth-protected-resource/mcp``."""
    issuer = gateway_services(request).settings.oauth_external_issuer
    return JSONResponse(protected_resource(_base(request), MCP_PATH, issuer), headers=_CORS)


async def api_resource_metadata(request: Request) -> Response:
    """``/.well-known/oauth-protected-resource``."""
    issuer = gateway_services(request).settings.oauth_external_issuer
    return JSONResponse(protected_resource(_base(request), "", issuer), headers=_CORS)


async def authorization_server_metadata(request: Request) -> Response:
    """``/.well-known/oauth-authorization-server``."""
    registration = authorization_server(request).registration_open
    return JSONResponse(server_metadata(_base(request), registration=registration), headers=_CORS)


async def authorize(request: Request) -> Response:
    """The authorization request (the SDK's handler: PKCE S256, client and redirect checks)."""
    return await AuthorizationHandler(_provider(request)).handle(request)


async def token(request: Request) -> Response:
    """The token endpoint (the SDK's handler with the hashed-secret client check)."""
    provider = _provider(request)
    answer = await TokenHandler(provider, HashedSecretAuthenticator(provider)).handle(request)
    answer.headers.update(_CORS)
    return answer


async def register(request: Request) -> Response:
    """Dynamic Client Registration, when open."""
    server = authorization_server(request)
    if not server.registration_open:
        return JSONResponse(
            {
                "error": "invalid_client_metadata",
                "error_description": "This server does not register clients itself; ask its "
                "operator (PMSGATE_OAUTH_CLIENT_REGISTRATION).",
            },
            status_code=403,
            headers=_CORS,
        )
    options = ClientRegistrationOptions(
        enabled=True, valid_scopes=list(all_scopes()), default_scopes=list(DEFAULT_SCOPES)
    )
    answer = await RegistrationHandler(_provider(request), options).handle(request)
    answer.headers.update(_CORS)
    return answer


async def revoke(request: Request) -> Response:
    """Token revocation (RFC 7009): the token's grant ends; 200 whether or not it was known.

    Not the SDK's handler: it requires a ``client_secret`` field even from a public client.
    """
    provider = _provider(request)
    try:
        client = await HashedSecretAuthenticator(provider).authenticate_request(request)
    except AuthenticationError as error:
        return JSONResponse(
            {"error": "invalid_client", "error_description": error.message},
            status_code=401,
            headers=_CORS,
        )
    raw = (await request.form()).get("token")
    if not isinstance(raw, str) or not raw:
        return JSONResponse(
            {"error": "invalid_request", "error_description": "token is required"},
            status_code=400,
            headers=_CORS,
        )
    token = await provider.load_access_token(raw) or await provider.load_refresh_token(client, raw)
    if token is not None and token.client_id == client.client_id:
        await provider.revoke_token(token)
    return Response(status_code=200, headers=_CORS)


async def preflight(request: Request) -> Response:
    """A browser's CORS preflight of the endpoints a client calls from a page."""
    return Response(status_code=204, headers=_CORS)


def install_oauth(app: FastAPI) -> None:
    """Add the metadata documents and the ``/oauth/*`` endpoints to ``app``."""
    for path, endpoint in (
        ("/.well-known/oauth-protected-resource" + MCP_PATH, mcp_resource_metadata),
        ("/.well-known/oauth-protected-resource", api_resource_metadata),
        ("/.well-known/oauth-authorization-server", authorization_server_metadata),
    ):
        app.add_api_route(path, endpoint, methods=["GET"], include_in_schema=False)
        app.add_api_route(path, preflight, methods=["OPTIONS"], include_in_schema=False)
    app.add_api_route(AUTHORIZE_PATH, authorize, methods=["GET", "POST"], include_in_schema=False)
    for path, endpoint in ((TOKEN_PATH, token), (REGISTER_PATH, register), (REVOKE_PATH, revoke)):
        app.add_api_route(path, endpoint, methods=["POST"], include_in_schema=False)
        app.add_api_route(path, preflight, methods=["OPTIONS"], include_in_schema=False)
