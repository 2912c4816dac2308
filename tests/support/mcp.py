"""An MCP client on the gateway's /mcp, in process (the app behind an ASGI transport)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


@asynccontextmanager
async def mcp_client(app: Any, key: str) -> AsyncIterator[Client]:
    """A connected MCP client calling ``app``'s /mcp with the gateway key ``key``."""
    async with (
        httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=app),
            base_url="http://gateway.test",
            headers={"Authorization": f"Bearer {key}"},
        ) as http,
        Client(streamable_http_client("http://gateway.test/mcp", http_client=http)) as client,
    ):
        yield client
