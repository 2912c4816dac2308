"""An httpx client calling an ASGI app in process."""

from __future__ import annotations

from typing import Any

import httpx


def asgi_client(app: Any, base_url: str, **options: Any) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` sending to ``app`` in process at ``base_url`` (``options``:
    more client arguments, such as ``headers``); use it as an async context manager."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url, **options)
