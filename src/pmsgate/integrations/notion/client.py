"""The notes workspace client (the Notion API), built on the official ``notion-client`` SDK.

Every HTTP call is made by the SDK's ``AsyncClient`` (endpoints, headers, error
parsing); this module adds what pmsgate needs on top: typed pages and blocks,
whole-tree reads, appends split to the API's limits, a throttle and one retry policy.

- **The httpx client is the SDK's.** ``notion_client.AsyncClient`` takes the
  injected ``httpx.AsyncClient`` over: it sets its ``base_url`` to
  ``<base_url>/v1/``, its timeout and its headers (``Notion-Version``). Give each
  ``NotesClient`` its own httpx client (with whatever transport: a real one, or
  ``httpx.ASGITransport`` over the emulator).
- **The token** is a ``SecretStr`` passed to the SDK per request (its ``auth``
  argument), so it is not stored in the SDK's options nor in the httpx client's
  default headers; it is never logged and never in a ``repr`` or error message.
- **Throttle.** The API allows about 3 requests/second per integration token,
  with bursts. :class:`NotesThrottle` keeps this process at or under
  ``requests_per_second`` (a pyrate-limiter sliding window timed by the injected
  clock, waits through the injected ``sleep``), so a sync does not *cause* 429s.
  Clients sharing one token in a process should share one throttle.
- **Retries are the upstream kit's** (:class:`pmsgate.integrations.kit.RetryPolicy` on
  stamina). The SDK's own retries are switched off (``retry=False``): they sleep
  with ``asyncio.sleep`` and read ``time.time()`` (not injectable) and would bypass
  the throttle. Every attempt passes the throttle. What is retried:

  - a **429** for any method (Notion did not process it: ``may_have_been_sent`` is
    False), after ``Retry-After``; the wait is done once, by the throttle (the whole
    client holds back through the injected ``sleep``), and stamina waits 0. A
    ``Retry-After`` beyond ``max_retry_after_s`` is not waited for: the caller gets
    :class:`NotesRateLimited` at once;
  - **5xx, 529, 409, timeouts and transport failures for reads**, with stamina's
    jittered exponential backoff (``backoff_initial_s`` doubling up to
    ``backoff_max_s``; stamina's own sleep, which its testing mode skips — the
    injected ``sleep`` serves the throttle only);
  - for **writes**, only failures that prove nothing was sent (a connection that
    could not be opened). A write that failed after it may have reached Notion is
    never re-sent: an append sent twice duplicates blocks.

  **Worst case:** one call (one HTTP request of the SDK) makes at most
  ``max_attempts`` attempts (default 5): 4 retries of a read that keeps failing
  with 5xx, or of any call that keeps answering 429 with a short ``Retry-After``.
  A write that fails with a 5xx or a timeout makes exactly one attempt. Paginated
  reads and split appends repeat this per request. Error classification is data:
  ``notes_errors.yaml`` (status and Notion code → kind → class).
- **Notion-Version** is ``2025-09-03`` by default (``PMSGATE_NOTES_VERSION``);
  2022-06-28 and 2026-03-11 work too. **Database queries** use
  ``POST /v1/databases/{id}/query`` before 2025-09-03 (through the SDK's generic
  ``request``: SDK 3.x has no ``databases.query``) and the database's data sources
  (``data_sources.query``) from 2025-09-03 on. **Appends after a block** send
  ``after`` before 2026-03-11 and ``position: {type: "after_block", …}`` from then on.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from functools import partial
from typing import Any, Literal
from urllib.parse import quote

import anyio
import httpx
import structlog
from notion_client import AsyncClient
from notion_client.errors import (
    HTTPResponseError,
    InvalidPathParameterError,
    RequestTimeoutError,
)
from notion_client.helpers import async_collect_paginated_api
from pydantic import BaseModel, ConfigDict, Field, SecretStr
from pyrate_limiter import Rate

from pmsgate.clock import Clock, Sleep, SystemClock
from pmsgate.config import Settings
from pmsgate.integrations.kit import (
    NOT_SENT,
    ClassificationTable,
    ErrorKind,
    RetryPolicy,
    Scrubber,
    UpstreamError,
    deadline,
    parse_retry_after,
)
from pmsgate.ratelimit import RateWindows

log = structlog.get_logger(__name__)

DEFAULT_BASE_URL = "https://api.notion.com"
DEFAULT_NOTION_VERSION = "2025-09-03"
DATA_SOURCES_VERSION = "2025-09-03"
# From this version on, appends are placed with ``position`` instead of ``after``.
POSITION_VERSION = "2026-03-11"
DEFAULT_REQUESTS_PER_SECOND = 3.0
MAX_PAGE_SIZE = 100
MAX_CHILDREN_PER_REQUEST = 100
MAX_ELEMENTS_PER_REQUEST = 1000
MAX_TEXT_CHARS = 2000
# The API takes 500 KB per request; stay clear of it (our JSON estimate is not the SDK's bytes).
REQUEST_BYTES_BUDGET = 450_000
ROOM_TYPE_PROPERTY = "PMS room type id"
LISTING_PROPERTY = "Listing id"

BLOCK_TYPES = frozenset(
    {
        "heading_1",
        "heading_2",
        "heading_3",
        "paragraph",
        "toggle",
        "callout",
        "bulleted_list_item",
        "numbered_list_item",
        "divider",
    }
)
# Types whose children are other pages or databases, not this page's content.
_SEPARATE_TREES = frozenset({"child_page", "child_database"})

CallKind = Literal["read", "write"]


# --- errors ------------------------------------------------------------------------------------


class NotesError(UpstreamError):
    """Base of every failure talking to the notes workspace (fields: see ``UpstreamError``)."""

    upstream = "notes"
    code = "notes_error"
    hint = "See reference/upstreams.md §3 for the Notion API's contract and limits."


class NotesUnauthorized(NotesError):
    """The integration token is missing, wrong or revoked (401)."""

    code = "notes_unauthorized"
    hint = "Reconnect the customer's notes workspace: the integration token is not valid."


class NotesForbidden(NotesError):
    """The token is valid but lacks a capability for this object (403)."""

    code = "notes_forbidden"
    hint = "Give the integration the read and insert content capabilities."


class NotesNotFound(NotesError):
    """No such page, block or database, or it is not shared with the integration (404)."""

    code = "notes_not_found"
    hint = "Share the apartments database and its pages with the integration."


class NotesInvalidRequest(NotesError):
    """The API refused the request's content or headers (400: validation, version, JSON)."""

    code = "notes_invalid_request"


class NotesConflict(NotesError):
    """The API could not apply the change because of a concurrent one (409)."""

    code = "notes_conflict"
    retryable = True


class NotesRateLimited(NotesError):
    """The API answered 429; ``retry_after`` (seconds) says when to try again."""

    code = "notes_rate_limited"
    retryable = True


class NotesUnavailable(NotesError):
    """The API failed (5xx, 529 overload), timed out or could not be reached."""

    code = "notes_unavailable"
    retryable = True


class NotesUnexpectedResponse(NotesError):
    """An answer in a shape the client does not understand."""

    code = "notes_unexpected_response"


ERROR_TABLE = ClassificationTable.load("pmsgate.integrations.notion", "errors.yaml")
_ERROR_CLASSES: dict[ErrorKind, type[NotesError]] = {
    ErrorKind.AUTH_FAILED: NotesUnauthorized,
    ErrorKind.TOKEN_REJECTED: NotesUnauthorized,
    ErrorKind.FORBIDDEN: NotesForbidden,
    ErrorKind.EDGE_BLOCKED: NotesForbidden,
    ErrorKind.NOT_FOUND: NotesNotFound,
    ErrorKind.INVALID_REQUEST: NotesInvalidRequest,
    ErrorKind.UNKNOWN_OPERATION: NotesInvalidRequest,
    ErrorKind.CONFLICT: NotesConflict,
    ErrorKind.RATE_LIMITED: NotesRateLimited,
    ErrorKind.TOO_MANY_SESSIONS: NotesRateLimited,
    ErrorKind.UNAVAILABLE: NotesUnavailable,
    ErrorKind.UNEXPECTED: NotesUnexpectedResponse,
}


# --- typed models --------------------------------------------------------------------------------


class Annotations(BaseModel):
    """Text styling of one rich-text item."""

    model_config = ConfigDict(extra="ignore")

    bold: bool = False
    italic: bool = False
    strikethrough: bool = False
    underline: bool = False
    code: bool = False
    color: str = "default"


class RichText(BaseModel):
    """One rich-text item as read (text, mention or equation)."""

    model_config = ConfigDict(extra="ignore")

    type: str = "text"
    plain_text: str = ""
    href: str | None = None
    annotations: Annotations = Field(default_factory=Annotations)

    def to_request(self) -> dict[str, Any]:
        """The item as a text item of a write request (mentions become their plain text)."""
        return {
            "type": "text",
            "text": {"content": self.plain_text, "link": {"url": self.href} if self.href else None},
            "annotations": self.annotations.model_dump(),
        }


def plain_text(items: Sequence[RichText]) -> str:
    """The text of rich-text items, without styling."""
    return "".join(item.plain_text for item in items)


class Block(BaseModel):
    """A block; the types pmsgate works with are typed, the others are kept in ``raw``."""

    model_config = ConfigDict(extra="ignore")

    id: str
    type: str
    has_children: bool = False
    archived: bool = False
    parent_type: str | None = None
    parent_id: str | None = None
    created_time: datetime | None = None
    last_edited_time: datetime | None = None
    rich_text: list[RichText] = Field(default_factory=list)
    color: str | None = None
    icon: dict[str, Any] | None = None
    is_toggleable: bool = False
    children: list[Block] = Field(default_factory=list)
    raw: dict[str, Any] = Field(default_factory=dict, repr=False)

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Block:
        """A block from the API's block object."""
        kind = str(data.get("type", "unknown"))
        found = data.get(kind)
        body: dict[str, Any] = found if isinstance(found, dict) else {}
        parent = data.get("parent") or {}
        parent_type = parent.get("type")
        parent_id = parent.get(parent_type) if parent_type else None
        rich = body.get("rich_text") or []
        if kind == "child_page":
            # A child page's title is a plain string; expose it like any block text.
            rich = [{"type": "text", "plain_text": body.get("title", "")}]
        return cls(
            id=str(data["id"]),
            type=kind,
            has_children=bool(data.get("has_children", False)),
            archived=bool(data.get("archived", False) or data.get("in_trash", False)),
            parent_type=parent_type,
            parent_id=parent_id if isinstance(parent_id, str) else None,
            created_time=data.get("created_time"),
            last_edited_time=data.get("last_edited_time"),
            rich_text=[RichText.model_validate(item) for item in rich],
            color=body.get("color"),
            icon=body.get("icon"),
            is_toggleable=bool(body.get("is_toggleable", False)),
            raw=dict(data),
        )

    @property
    def known(self) -> bool:
        """Whether the type is one pmsgate models (the others are kept as raw)."""
        return self.type in BLOCK_TYPES

    @property
    def plain_text(self) -> str:
        """The block's own text (a toggle's title, a paragraph's text), without children."""
        return plain_text(self.rich_text)

    def walk(self) -> Iterator[Block]:
        """This block and its descendants, depth first, in page order."""
        yield self
        for child in self.children:
            yield from child.walk()

    def descendants(self) -> Iterator[Block]:
        """The descendants only, depth first, in page order."""
        for child in self.children:
            yield from child.walk()

    def body_text(self) -> str:
        """The descendants' texts, one per line (a toggle's body under its title)."""
        return "\n".join(b.plain_text for b in self.descendants() if b.plain_text)


class ApartmentPage(BaseModel):
    """A row of the apartments database: one apartment's notes page."""

    model_config = ConfigDict(extra="ignore")

    id: str
    title: str
    room_type_id: int | None = None
    listing_id: str | None = None
    url: str | None = None
    created_time: datetime | None = None
    last_edited_time: datetime | None = None
    archived: bool = False
    properties: dict[str, Any] = Field(default_factory=dict, repr=False)

    @classmethod
    def from_api(
        cls,
        data: Mapping[str, Any],
        *,
        room_type_property: str = ROOM_TYPE_PROPERTY,
        listing_property: str = LISTING_PROPERTY,
    ) -> ApartmentPage:
        """An apartment page from the API's page object."""
        properties = data.get("properties") or {}
        title = next(
            (
                _property_text(prop)
                for prop in properties.values()
                if isinstance(prop, dict) and prop.get("type") == "title"
            ),
            "",
        )
        room = _property_text(properties.get(room_type_property))
        listing = _property_text(properties.get(listing_property))
        return cls(
            id=str(data["id"]),
            title=title,
            room_type_id=int(room) if room.strip().isdigit() else None,
            listing_id=listing or None,
            url=data.get("url"),
            created_time=data.get("created_time"),
            last_edited_time=data.get("last_edited_time"),
            archived=bool(data.get("archived", False) or data.get("in_trash", False)),
            properties=dict(properties),
        )


def _property_text(prop: Any) -> str:
    """A property's value as text (title, rich text, number, select), '' when empty."""
    if not isinstance(prop, dict):
        return ""
    kind = prop.get("type")
    value = prop.get(kind) if kind else None
    if kind in ("title", "rich_text") and isinstance(value, list):
        return "".join(str(item.get("plain_text", "")) for item in value)
    if kind == "number" and isinstance(value, int | float):
        return str(int(value)) if float(value).is_integer() else str(value)
    if kind == "select" and isinstance(value, dict):
        return str(value.get("name", ""))
    return ""


# --- request builders ----------------------------------------------------------------------------

TextInput = str | Sequence[Mapping[str, Any]]


def rich_text(
    text: str,
    *,
    bold: bool = False,
    italic: bool = False,
    code: bool = False,
    color: str = "default",
    link: str | None = None,
) -> list[dict[str, Any]]:
    """Text as request rich-text items, split into pieces of at most 2,000 characters."""
    annotations = {"bold": bold, "italic": italic, "code": code, "color": color}
    pieces = [text[i : i + MAX_TEXT_CHARS] for i in range(0, len(text), MAX_TEXT_CHARS)] or [""]
    return [
        {
            "type": "text",
            "text": {"content": piece, "link": {"url": link} if link else None},
            "annotations": dict(annotations),
        }
        for piece in pieces
    ]


def text_block(
    block_type: str,
    text: TextInput,
    *,
    children: Sequence[Mapping[str, Any]] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A block of any text type in request shape (children nested in the type object)."""
    items = rich_text(text) if isinstance(text, str) else [dict(item) for item in text]
    content: dict[str, Any] = {"rich_text": items, **fields}
    if children:
        content["children"] = [dict(child) for child in children]
    return {"object": "block", "type": block_type, block_type: content}


def paragraph(
    text: TextInput, *, children: Sequence[Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """A paragraph block."""
    return text_block("paragraph", text, children=children)


def heading(level: Literal[1, 2, 3], text: TextInput) -> dict[str, Any]:
    """A heading_1/2/3 block."""
    return text_block(f"heading_{level}", text)


def toggle(title: TextInput, children: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """A toggle block with its children."""
    return text_block("toggle", title, children=children)


def callout(
    text: TextInput, *, emoji: str = "💡", children: Sequence[Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """A callout block with an emoji icon."""
    return text_block("callout", text, children=children, icon={"type": "emoji", "emoji": emoji})


def bulleted_list_item(
    text: TextInput, *, children: Sequence[Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """A bulleted list item."""
    return text_block("bulleted_list_item", text, children=children)


def numbered_list_item(
    text: TextInput, *, children: Sequence[Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """A numbered list item."""
    return text_block("numbered_list_item", text, children=children)


def divider() -> dict[str, Any]:
    """A divider block."""
    return {"object": "block", "type": "divider", "divider": {}}


# The throttle's one key: the whole client (one integration token) shares one window.
_NOTES_KEY = "notes"

# --- throttle ------------------------------------------------------------------------------------


class NotesThrottle:
    """Keeps one integration token's requests at or under a rate, in this process.

    One :class:`~pmsgate.ratelimit.RateWindows` in memory with one key; its waits (and
    a 429's hold) are spent through the injected ``sleep``.
    """

    def __init__(
        self,
        requests_per_second: float = DEFAULT_REQUESTS_PER_SECOND,
        *,
        clock: Clock | None = None,
        sleep: Sleep = anyio.sleep,
    ) -> None:
        if requests_per_second <= 0:
            raise ValueError("requests_per_second must be positive")
        # 3 → 3 per 1 s; 2.5 → 5 per 2 s: a whole number of requests per whole seconds.
        ratio = Fraction(requests_per_second).limit_denominator(1000)
        self.requests_per_second = requests_per_second
        self.rate = Rate(ratio.numerator, 1000 * ratio.denominator)
        self._windows = RateWindows(clock=clock or SystemClock(), retention_ms=self.rate.interval)
        self._sleep = sleep

    def __repr__(self) -> str:
        return f"NotesThrottle(requests_per_second={self.requests_per_second})"

    def hold(self, seconds: float) -> None:
        """Let no request through for ``seconds`` from now (the API asked us to wait)."""
        self._windows.hold(_NOTES_KEY, seconds)

    async def acquire(self) -> None:
        """Wait until one more request fits the rate, then count it."""
        await self._windows.acquire(_NOTES_KEY, [self.rate], self._sleep)


# --- the client ----------------------------------------------------------------------------------


@dataclass
class _Planned:
    """One top-level block of an append request, and what must follow in later requests."""

    block: dict[str, Any]
    rest: list[dict[str, Any]]
    elements: int
    size: int


class NotesClient:
    """The Notion API for pmsgate: apartments database, block trees, appends, updates."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        token: SecretStr,
        base_url: str = DEFAULT_BASE_URL,
        notion_version: str = DEFAULT_NOTION_VERSION,
        clock: Clock | None = None,
        sleep: Sleep = anyio.sleep,
        requests_per_second: float = DEFAULT_REQUESTS_PER_SECOND,
        throttle: NotesThrottle | None = None,
        max_attempts: int = 5,
        max_retry_after_s: float = 60.0,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 8.0,
        timeout_s: float = 30.0,
        read_concurrency: int = 3,
        page_size: int = MAX_PAGE_SIZE,
    ) -> None:
        if max_attempts < 1 or read_concurrency < 1:
            raise ValueError("max_attempts and read_concurrency must be at least 1")
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise ValueError(f"page_size must be between 1 and {MAX_PAGE_SIZE}")
        # Smaller pages only cost more requests; tests use them to exercise pagination.
        self._page_size = page_size
        self._token = token
        self._clock = clock or SystemClock()
        self.base_url = base_url.rstrip("/")
        self.notion_version = notion_version
        self.throttle = throttle or NotesThrottle(
            requests_per_second, clock=self._clock, sleep=sleep
        )
        # No overall deadline: the throttle's waits (long when many requests queue) would
        # use it up; the attempts and the per-request timeout bound a call instead.
        self.retry_policy = RetryPolicy(
            attempts=max_attempts,
            deadline_s=None,
            wait_initial_s=backoff_initial_s,
            wait_max_s=backoff_max_s,
            max_retry_after_s=max_retry_after_s,
        )
        self._timeout_s = timeout_s
        self._scrub = Scrubber([token.get_secret_value()])
        self._read_concurrency = read_concurrency
        self.requests_sent = 0
        self._sdk = AsyncClient(
            client=http,
            base_url=self.base_url,
            notion_version=notion_version,
            timeout_ms=int(timeout_s * 1000),
            retry=False,
            # Our own logger: the SDK's default adds a console handler per client it builds.
            logger=logging.getLogger("pmsgate.integrations.notion.client.sdk"),
            log_level=logging.WARNING,
        )

    @classmethod
    def from_settings(
        cls,
        http: httpx.AsyncClient,
        *,
        token: SecretStr,
        settings: Settings,
        clock: Clock | None = None,
        sleep: Sleep = anyio.sleep,
        throttle: NotesThrottle | None = None,
    ) -> NotesClient:
        """A client configured by ``PMSGATE_NOTES_*`` settings, for one integration token."""
        return cls(
            http,
            token=token,
            base_url=settings.notes_api_url,
            notion_version=settings.notes_version,
            clock=clock,
            sleep=sleep,
            requests_per_second=settings.notes_requests_per_second,
            throttle=throttle,
            timeout_s=settings.notes_timeout_s,
        )

    def __repr__(self) -> str:
        return (
            f"NotesClient(base_url={self.base_url!r}, notion_version={self.notion_version!r}, "
            f"throttle={self.throttle!r})"
        )

    # --- reads -------------------------------------------------------------------------------

    async def query_database(
        self,
        database_id: str,
        *,
        room_type_property: str = ROOM_TYPE_PROPERTY,
        listing_property: str = LISTING_PROPERTY,
    ) -> list[ApartmentPage]:
        """Every page of the apartments database (all result pages)."""
        if self.notion_version >= DATA_SOURCES_VERSION:
            database = await self._call(
                "read", self._sdk.databases.retrieve, database_id=database_id
            )
            sources = database.get("data_sources")
            if not isinstance(sources, list) or not sources:
                raise NotesUnexpectedResponse("the database lists no data source")
            rows: list[Any] = []
            for source in sources:
                rows += await self._collect(
                    self._sdk.data_sources.query,
                    data_source_id=str(source["id"]),
                    page_size=self._page_size,
                )
        else:
            rows = await self._collect(
                partial(self._query_database_page, quote(database_id, safe="-")),
                page_size=self._page_size,
            )
        return [
            ApartmentPage.from_api(
                row, room_type_property=room_type_property, listing_property=listing_property
            )
            for row in rows
            if isinstance(row, dict) and row.get("object") == "page"
        ]

    async def get_page(
        self,
        page_id: str,
        *,
        room_type_property: str = ROOM_TYPE_PROPERTY,
        listing_property: str = LISTING_PROPERTY,
    ) -> ApartmentPage:
        """One page's properties (not its content)."""
        data = await self._call("read", self._sdk.pages.retrieve, page_id=page_id)
        return ApartmentPage.from_api(
            data, room_type_property=room_type_property, listing_property=listing_property
        )

    async def get_block(self, block_id: str) -> Block:
        """One block, without its children."""
        return Block.from_api(
            await self._call("read", self._sdk.blocks.retrieve, block_id=block_id)
        )

    async def list_children(self, block_id: str) -> list[Block]:
        """A block's or page's first-level children (every result page), without their children."""
        rows = await self._collect(
            self._sdk.blocks.children.list, block_id=block_id, page_size=self._page_size
        )
        return [Block.from_api(row) for row in rows]

    async def read_tree(self, block_id: str) -> list[Block]:
        """A page's (or block's) whole block tree: every level, every result page.

        Children are fetched level by level, up to ``read_concurrency`` listings at a
        time (all through the throttle). Child pages and databases are separate trees
        and are not entered.
        """
        top = await self.list_children(block_id)
        level = top
        while True:
            parents = [b for b in level if b.has_children and b.type not in _SEPARATE_TREES]
            if not parents:
                return top
            await self._fill_children(parents)
            level = [child for parent in parents for child in parent.children]

    # --- writes ------------------------------------------------------------------------------

    async def append_blocks(
        self,
        parent_id: str,
        blocks: Sequence[Mapping[str, Any]],
        *,
        after: str | None = None,
    ) -> list[Block]:
        """Append blocks (any depth, any count) under a page or block; returns the top-level ones.

        Requests carry at most 100 children, 1,000 block elements, ~450 KB and two
        levels of nesting: a block's children that have children of their own (and
        children beyond the 100th) are appended to the created block afterwards.
        Texts longer than 2,000 characters are split into several rich-text items.
        """
        planned = [_plan(block) for block in blocks]
        created_all: list[Block] = []
        anchor = after
        for chunk in _chunks(planned):
            arguments: dict[str, Any] = {"children": [p.block for p in chunk]}
            if anchor is not None:
                arguments.update(self._placement(anchor))
            answer = await self._call(
                "write", self._sdk.blocks.children.append, block_id=parent_id, **arguments
            )
            results = answer.get("results")
            if not isinstance(results, list) or len(results) != len(chunk):
                raise NotesUnexpectedResponse("the append answer does not list the new blocks")
            created = [Block.from_api(row) for row in results]
            for plan, block in zip(chunk, created, strict=True):
                if plan.rest:
                    await self.append_blocks(block.id, plan.rest)
                    block.has_children = True
            created_all += created
            if anchor is not None:
                anchor = created[-1].id
        return created_all

    async def update_block(
        self, block_id: str, block_type: str, fields: Mapping[str, Any]
    ) -> Block:
        """Change one block's type object (e.g. ``{"rich_text": [...]}``); returns the block."""
        content = _split_long_texts(dict(fields))
        answer = await self._call(
            "write", self._sdk.blocks.update, block_id=block_id, **{block_type: content}
        )
        return Block.from_api(answer)

    async def set_text(self, block: Block, text: TextInput) -> Block:
        """Replace a block's text (a toggle's title, a callout's text), keeping its type."""
        items = rich_text(text) if isinstance(text, str) else [dict(item) for item in text]
        return await self.update_block(block.id, block.type, {"rich_text": items})

    async def delete_block(self, block_id: str) -> Block:
        """Move a block to the trash."""
        return Block.from_api(await self._call("write", self._sdk.blocks.delete, block_id=block_id))

    # --- plumbing ----------------------------------------------------------------------------

    async def _query_database_page(self, database_id: str, **kwargs: Any) -> Any:
        # SDK 3.x has no databases.query; its generic request still does the HTTP work.
        body = {k: kwargs[k] for k in ("start_cursor", "page_size") if kwargs.get(k) is not None}
        return await self._sdk.request(
            path=f"databases/{database_id}/query",
            method="POST",
            body=body,
            auth=kwargs.get("auth"),
        )

    async def _collect(self, function: Callable[..., Any], **kwargs: Any) -> list[Any]:
        """Every result of a paginated endpoint, each page fetched through ``_call``."""
        return await async_collect_paginated_api(partial(self._call, "read", function), **kwargs)

    async def _fill_children(self, parents: list[Block]) -> None:
        slots = anyio.CapacityLimiter(self._read_concurrency)

        async def fill(parent: Block) -> None:
            async with slots:
                parent.children = await self.list_children(parent.id)

        try:
            async with anyio.create_task_group() as group:
                for parent in parents:
                    group.start_soon(fill, parent)
        except BaseExceptionGroup as failures:
            # Callers catch NotesError, not the task group's wrapper.
            raise _first_error(failures) from None

    def _placement(self, anchor: str) -> dict[str, Any]:
        """The append argument that puts new blocks after ``anchor``, as this version spells it."""
        if self.notion_version >= POSITION_VERSION:
            return {"position": {"type": "after_block", "after_block": {"id": anchor}}}
        return {"after": anchor}

    async def _call(self, kind: CallKind, function: Callable[..., Any], /, **kwargs: Any) -> Any:
        """One SDK call through the throttle, retried by the upstream kit's policy."""
        name = getattr(getattr(function, "func", function), "__qualname__", "call")
        replay_safe = kind == "read"
        async for attempt in self.retry_policy.retrying(
            replay_safe=replay_safe, on_wait=self._hold_for
        ):
            with attempt:
                try:
                    answer = await self._attempt(function, kwargs)
                except NotesError as error:
                    error.operation = name
                    if (
                        self.retry_policy.verdict(error, replay_safe=replay_safe) is not False
                        and attempt.num < self.retry_policy.attempts
                    ):
                        log.info(
                            "notes_retry",
                            call=name,
                            code=error.code,
                            status=error.status,
                            attempt=attempt.num,
                            retry_after_s=error.retry_after,
                        )
                    raise
                if not isinstance(answer, dict):
                    raise NotesUnexpectedResponse("the answer is not a JSON object", operation=name)
                return answer
        raise AssertionError("stamina ends with an answer or the last error")  # pragma: no cover

    def _hold_for(self, error: UpstreamError, wait: float) -> float:
        """A 429's ``Retry-After``: the throttle holds the whole client back; stamina waits 0."""
        self.throttle.hold(wait)
        return 0.0

    async def _attempt(self, function: Callable[..., Any], kwargs: Mapping[str, Any]) -> Any:
        """One attempt: the throttle, then the SDK's request within the deadline."""
        await self.throttle.acquire()
        self.requests_sent += 1
        try:
            with deadline(self._timeout_s):
                return await function(**kwargs, auth=self._token.get_secret_value())
        except ValueError:
            # The SDK decodes a 2xx body as JSON; a proxy's HTML page ends up here.
            raise NotesUnexpectedResponse("the answer is not JSON") from None
        except (
            HTTPResponseError,
            RequestTimeoutError,
            InvalidPathParameterError,
            httpx.TransportError,
            TimeoutError,
        ) as exc:
            raise self._translate(exc) from None

    def _translate(self, exc: Exception) -> NotesError:
        """The SDK's or httpx's exception as this module's error family."""
        if isinstance(exc, RequestTimeoutError | TimeoutError):
            return NotesUnavailable("the notes API did not answer in time")
        if isinstance(exc, InvalidPathParameterError):
            return NotesInvalidRequest(
                "an id would change the request path; it was not sent", may_have_been_sent=False
            )
        if isinstance(exc, httpx.TransportError):
            return NotesUnavailable(
                f"the notes API could not be reached ({type(exc).__name__})",
                may_have_been_sent=not isinstance(exc, NOT_SENT),
            )
        assert isinstance(exc, HTTPResponseError)
        status = exc.status
        body = _error_body(exc.body)
        upstream_code = body.code or _code_value(exc.code)
        kind = ERROR_TABLE.classify(status, upstream_code)
        error_class = _ERROR_CLASSES[kind]
        return error_class(
            f"the notes API answered {status} {upstream_code}",
            status=status,
            upstream_code=upstream_code,
            upstream_message=self._scrub(body.message or str(exc)),
            request_id=body.request_id or exc.request_id,
            retry_after=parse_retry_after(exc.headers.get("retry-after"), self._clock.now())
            if error_class is NotesRateLimited
            else None,
            # Notion refuses a 429 before doing anything: even a write may be sent again.
            may_have_been_sent=error_class is not NotesRateLimited,
        )


# --- append planning -----------------------------------------------------------------------------


def _block_kind(block: Mapping[str, Any]) -> str:
    kind = block.get("type")
    if isinstance(kind, str) and kind:
        return kind
    candidates = [k for k in block if k not in ("object", "type", "children", "id")]
    if len(candidates) != 1:
        raise ValueError(f"cannot tell the type of block {sorted(block)}")
    return candidates[0]


def _children_of(block: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    kind = _block_kind(block)
    content = block.get(kind)
    nested = content.get("children") if isinstance(content, Mapping) else None
    # Accept children at the block level too: the API wants them inside the type object.
    nested = nested or block.get("children")
    return list(nested or [])


def _without_children(block: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    kind = _block_kind(block)
    content = dict(block.get(kind) or {})
    content.pop("children", None)
    return kind, _split_long_texts(content)


def _split_long_texts(content: dict[str, Any]) -> dict[str, Any]:
    items = content.get("rich_text")
    if not isinstance(items, list):
        return content
    split: list[Any] = []
    for item in items:
        text = item.get("text") if isinstance(item, Mapping) else None
        body = text.get("content") if isinstance(text, Mapping) else None
        if (
            not isinstance(text, Mapping)
            or not isinstance(body, str)
            or len(body) <= MAX_TEXT_CHARS
        ):
            split.append(item)
            continue
        for start in range(0, len(body), MAX_TEXT_CHARS):
            piece = dict(item)
            piece["text"] = {**text, "content": body[start : start + MAX_TEXT_CHARS]}
            split.append(piece)
    return {**content, "rich_text": split}


def _request_block(
    kind: str, content: dict[str, Any], children: list[dict[str, Any]]
) -> dict[str, Any]:
    body = dict(content)
    if children:
        body["children"] = children
    return {"object": "block", "type": kind, kind: body}


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode())


def _plan(block: Mapping[str, Any]) -> _Planned:
    """A top-level block with the leaf children that fit one request; the rest comes later."""
    kind, content = _without_children(block)
    children = _children_of(block)
    inline: list[dict[str, Any]] = []
    for child in children:
        # A child with children of its own would be a third level: it starts the rest.
        if len(inline) >= MAX_CHILDREN_PER_REQUEST or _children_of(child):
            break
        child_kind, child_content = _without_children(child)
        inline.append(_request_block(child_kind, child_content, []))
    rest = [dict(child) for child in children[len(inline) :]]
    sent = _request_block(kind, content, inline)
    size = _size(sent)
    while size > REQUEST_BYTES_BUDGET and inline:
        # Rare: huge texts; move children to the follow-up requests until it fits.
        rest.insert(0, inline.pop())
        sent = _request_block(kind, content, inline)
        size = _size(sent)
    return _Planned(block=sent, rest=rest, elements=1 + len(inline), size=size)


def _chunks(planned: list[_Planned]) -> list[list[_Planned]]:
    """Consecutive requests within the per-request limits of children, elements and bytes."""
    chunks: list[list[_Planned]] = []
    current: list[_Planned] = []
    elements = size = 0
    for plan in planned:
        full = (
            len(current) >= MAX_CHILDREN_PER_REQUEST
            or elements + plan.elements > MAX_ELEMENTS_PER_REQUEST
            or size + plan.size > REQUEST_BYTES_BUDGET
        )
        if current and full:
            chunks.append(current)
            current, elements, size = [], 0, 0
        current.append(plan)
        elements += plan.elements
        size += plan.size + 1
    if current:
        chunks.append(current)
    return chunks


# --- error helpers -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ErrorBody:
    """What a Notion error object says: ``{object: "error", status, code, message, request_id}``."""

    code: str | None = None
    message: str | None = None
    request_id: str | None = None


def _error_body(body: str) -> _ErrorBody:
    try:
        parsed = json.loads(body)
    except (TypeError, ValueError):
        return _ErrorBody()
    if not isinstance(parsed, dict):
        return _ErrorBody()

    def text(key: str) -> str | None:
        value = parsed.get(key)
        return value if isinstance(value, str) and value else None

    return _ErrorBody(text("code"), text("message"), text("request_id"))


def _code_value(code: Any) -> str:
    return str(getattr(code, "value", code))


def _first_error(group: BaseExceptionGroup[Any]) -> BaseException:
    """The first NotesError inside a (nested) exception group, else its first exception."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        current = pending.pop(0)
        if isinstance(current, BaseExceptionGroup):
            pending = list(current.exceptions) + pending
        else:
            leaves.append(current)
    return next((e for e in leaves if isinstance(e, NotesError)), leaves[0] if leaves else group)
