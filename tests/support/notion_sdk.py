"""The official ``notion-client`` SDK on the notes emulator: a store it suits, and the SDK."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from notion_client import AsyncClient

from pmsgate.clock import ManualClock
from pmsgate.sandbox.notion.app import create_notion_app
from pmsgate.sandbox.notion.store import NotionStore

BASE_URL = "http://notes.test"


def sdk_store(clock: ManualClock) -> NotionStore:
    """A seeded notes store the SDK can call freely."""
    store = NotionStore(seed=3, clock=clock)
    # The SDK's own retries would really sleep on a 429 (this clock never moves): stay clear.
    store.set_rate_limit(requests_per_second=1000, burst=1000)
    return store


def richest_workspace(store: NotionStore) -> dict[str, Any]:
    """The store's workspace with the most pages."""
    return max(store.workspaces(), key=lambda w: len(w["pages"]))


@asynccontextmanager
async def official_sdk(store: NotionStore, token: str, version: str) -> AsyncIterator[AsyncClient]:
    """The SDK with its defaults, except where it sends and the Notion-Version it names."""
    transport = httpx.ASGITransport(app=create_notion_app(store))
    async with httpx.AsyncClient(transport=transport) as http:
        yield AsyncClient(auth=token, base_url=BASE_URL, client=http, notion_version=version)


def text(content: str) -> list[dict[str, Any]]:
    """A rich-text array of one plain run."""
    return [{"type": "text", "text": {"content": content}}]
