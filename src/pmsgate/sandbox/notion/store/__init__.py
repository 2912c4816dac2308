"""The notes emulator's state and semantics, one tenant per workspace (integration token).

The store knows nothing about HTTP: it takes parsed arguments, changes state and
raises :class:`~pmsgate.sandbox.notion.errors.NotionApiError` for every refusal. It
enforces the documented limits of the Notion API (docs/knowledge-sync.md):
pages of at most 100 results, at most 100 children and two levels of nesting per
append, at most 1,000 block elements and 500 KB per request, rich text of at most
2,000 characters, and about 3 requests/second per integration token (a token
bucket: 3 per second on average, bursts of 10). All time comes from the injected
clock, so the bucket refills only when a test advances a ManualClock.

One module per resource, each a mixin on :class:`~.core.StoreCore` (the state, the
seed, the request checks): ``databases`` (databases, data sources, queries), ``pages``,
``blocks``, ``search``, ``users``, ``controls`` (the test controls); ``records`` (what
is kept) and ``parsing`` (what a request may hold, the limits) are what they share.
"""

from __future__ import annotations

from pmsgate.sandbox.notion.store.blocks import BlocksMixin
from pmsgate.sandbox.notion.store.controls import ControlsMixin
from pmsgate.sandbox.notion.store.core import (
    DATA_SOURCES_VERSION,
    POSITION_VERSION,
    SUPPORTED_VERSIONS,
)
from pmsgate.sandbox.notion.store.pages import PagesMixin
from pmsgate.sandbox.notion.store.records import (
    Block,
    Database,
    Faults,
    Page,
    SearchHit,
    Stats,
    User,
    Workspace,
)
from pmsgate.sandbox.notion.store.search import SearchMixin
from pmsgate.sandbox.notion.store.users import UsersMixin

__all__ = [
    "DATA_SOURCES_VERSION",
    "POSITION_VERSION",
    "SUPPORTED_VERSIONS",
    "Block",
    "Database",
    "Faults",
    "NotionStore",
    "Page",
    "SearchHit",
    "Stats",
    "User",
    "Workspace",
]


class NotionStore(PagesMixin, BlocksMixin, SearchMixin, UsersMixin, ControlsMixin):
    """State and semantics of the notes-workspace emulator."""
