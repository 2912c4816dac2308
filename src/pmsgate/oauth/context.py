"""The authorization server of the app's container (``container.oauth``), as routes get it."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from pmsgate.errors import NotFound
from pmsgate.oauth.server import AuthorizationServer


def authorization_server(request: Request) -> AuthorizationServer:
    """The process's authorization server; 404 when PMSGATE_OAUTH_ENABLED is off."""
    server: AuthorizationServer | None = request.app.state.container.oauth
    if server is None:
        raise NotFound(
            "This server has no OAuth authorization server.",
            code="oauth_disabled",
            hint="Use a gateway key, or ask the operator to set PMSGATE_OAUTH_ENABLED=true.",
        )
    return server


async def _authorization_server_dependency(request: Request) -> AuthorizationServer:
    return authorization_server(request)


AuthorizationServerDep = Annotated[AuthorizationServer, Depends(_authorization_server_dependency)]
