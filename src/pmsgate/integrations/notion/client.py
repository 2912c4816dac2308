"""The notes workspace client (the Notion API), built on the official ``notion-client`` SDK.

Every HTTP call is made by the SDK's ``AsyncClient`` (endpoints, headers, error
parsing); this module adds what pmsgate needs on top: typed pages and blocks
(``models.py``), whole-tree reads, appends split to the API's limits (``appends.py``),
a throttle (``throttle.py``) and one retry policy. Request blocks are built with
``builders.py``; failures are the error family of ``errors.py``.

- **The httpx client is the SDK's.** ``notion_client.AsyncClient`` takes the
  injected ``httpx.AsyncClient`` over: it sets its ``base_url`` to
  ``<base_url>/v1/``, its timeout and its headers (``Notion-Version``). Give each
  ``NotionClient`` its own httpx client (with whatever transport: a real one, or
  ``httpx.ASGITransport`` over the emulator).
- **The token** is a ``SecretStr`` passed to the SDK per request (its ``auth``
  argument), so it is not stored in the SDK's options nor in the httpx client's
  default headers; it is never logged and never in a ``repr`` or error message.
- **Throttle.** Every attempt waits for the client's :class:`NotionThrottle`
  (``throttle.py``: about 3 requests/second per integration token); clients sharing
  one token in a process should share one throttle.
- **Retries are the upstream kit's** (:class:`pmsgate.integrations.kit.RetryPolicy` on
  stamina). The SDK's own retries are switched off (``retry=False``): they sleep
  with ``asyncio.sleep`` and read ``time.time()`` (not injectable) and would bypass
  the throttle. Every attempt passes the throttle. What is retried:

  - a **429** for any method (Notion did not process it: ``may_have_been_sent`` is
    False), after ``Retry-After``; the wait is done once, by the throttle (the whole
    client holds back through the injected ``sleep``), and stamina waits 0. A
    ``Retry-After`` beyond ``max_retry_after_s`` is not waited for: the caller gets
    :class:`NotionRateLimited` at once;
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
  ``errors.yaml`` (status and Notion code → kind), ``errors.py`` (kind → class).
- **Notion-Version** is ``2025-09-03`` by default (``PMSGATE_NOTION_VERSION``);
  2022-06-28 and 2026-03-11 work too. **Database queries** use
  ``POST /v1/databases/{id}/query`` before 2025-09-03 (through the SDK's generic
  ``request``: SDK 3.x has no ``databases.query``) and the database's data sources
  (``data_sources.query``) from 2025-09-03 on. **Appends after a block** send
  ``after`` before 2026-03-11 and ``position: {type: "after_block", …}`` from then on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, Literal
from urllib.parse import quote

import anyio
import httpx
import structlog
from notion_client import AsyncClient
from notion_client.helpers import async_collect_paginated_api
from pydantic import SecretStr

from pmsgate.clock import Clock, Sleep, SystemClock
from pmsgate.config import Settings
from pmsgate.integrations.kit import RetryPolicy, Scrubber, UpstreamError, deadline
from pmsgate.integrations.notion.appends import plan_block, request_chunks, split_long_texts
from pmsgate.integrations.notion.builders import TextInput, rich_text
from pmsgate.integrations.notion.errors import (
    TRANSLATED,
    NotionError,
    NotionUnexpectedResponse,
    first_error,
    translate,
)
from pmsgate.integrations.notion.models import (
    LISTING_PROPERTY,
    ROOM_TYPE_PROPERTY,
    ApartmentPage,
    Block,
)
from pmsgate.integrations.notion.throttle import DEFAULT_REQUESTS_PER_SECOND, NotionThrottle

log = structlog.get_logger(__name__)

DEFAULT_BASE_URL = "https://api.notion.com"
DEFAULT_NOTION_VERSION = "2025-09-03"
DATA_SOURCES_VERSION = "2025-09-03"
# From this version on, appends are placed with ``position`` instead of ``after``.
POSITION_VERSION = "2026-03-11"
MAX_PAGE_SIZE = 100
# Types whose children are other pages or databases, not this page's content.
_SEPARATE_TREES = frozenset({"child_page", "child_database"})

CallKind = Literal["read", "write"]


class NotionClient:
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
        throttle: NotionThrottle | None = None,
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
        self.throttle = throttle or NotionThrottle(
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
        throttle: NotionThrottle | None = None,
    ) -> NotionClient:
        """A client configured by ``PMSGATE_NOTION_*`` settings, for one integration token."""
        return cls(
            http,
            token=token,
            base_url=settings.notion_api_url,
            notion_version=settings.notion_version,
            clock=clock,
            sleep=sleep,
            requests_per_second=settings.notion_requests_per_second,
            throttle=throttle,
            timeout_s=settings.notion_timeout_s,
        )

    def __repr__(self) -> str:
        return (
            f"NotionClient(base_url={self.base_url!r}, notion_version={self.notion_version!r}, "
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
                raise NotionUnexpectedResponse("the database lists no data source")
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
        planned = [plan_block(block) for block in blocks]
        created_all: list[Block] = []
        anchor = after
        for chunk in request_chunks(planned):
            arguments: dict[str, Any] = {"children": [p.block for p in chunk]}
            if anchor is not None:
                arguments.update(self._placement(anchor))
            answer = await self._call(
                "write", self._sdk.blocks.children.append, block_id=parent_id, **arguments
            )
            results = answer.get("results")
            if not isinstance(results, list) or len(results) != len(chunk):
                raise NotionUnexpectedResponse("the append answer does not list the new blocks")
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
        content = split_long_texts(dict(fields))
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
            # Callers catch NotionError, not the task group's wrapper.
            raise first_error(failures) from None

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
                except NotionError as error:
                    error.operation = name
                    if (
                        self.retry_policy.verdict(error, replay_safe=replay_safe) is not False
                        and attempt.num < self.retry_policy.attempts
                    ):
                        log.info(
                            "notion_retry",
                            call=name,
                            code=error.code,
                            status=error.status,
                            attempt=attempt.num,
                            retry_after_s=error.retry_after,
                        )
                    raise
                if not isinstance(answer, dict):
                    raise NotionUnexpectedResponse(
                        "the answer is not a JSON object", operation=name
                    )
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
            raise NotionUnexpectedResponse("the answer is not JSON") from None
        except TRANSLATED as exc:
            raise translate(exc, scrub=self._scrub, clock=self._clock) from None
