"""The notes emulator's state and semantics, one tenant per workspace (integration token).

The store knows nothing about HTTP: it takes parsed arguments, changes state and
raises :class:`~pmsgate.sandbox.notion.errors.NotesApiError` for every refusal. It
enforces the documented limits of the Notion API (reference/upstreams.md §3):
pages of at most 100 results, at most 100 children and two levels of nesting per
append, at most 1,000 block elements and 500 KB per request, rich text of at most
2,000 characters, and about 3 requests/second per integration token (a token
bucket: 3 per second on average, bursts of 10). All time comes from the injected
clock, so the bucket refills only when a test advances a ManualClock.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from math import ceil
from typing import Any, Literal

from pmsgate.clock import Clock, ManualClock, SystemClock
from pmsgate.sandbox.kross.seed import FACILITY_COUNT, build_facilities
from pmsgate.sandbox.kross.store import KrossStore
from pmsgate.sandbox.notion import errors
from pmsgate.sandbox.notion.errors import NotesApiError, not_found, validation
from pmsgate.sandbox.notion.properties import (
    PropertySpec,
    Schema,
    compile_filter,
    compile_sorts,
    parse_values,
    plain_text,
    rich_text_items,
    sort_rows,
)
from pmsgate.sandbox.notion.properties import parse_rich_text as _parse_rich_text
from pmsgate.sandbox.notion.properties import short as _short
from pmsgate.sandbox.notion.seed import (
    ADDRESS_PROPERTY,
    DATABASE_TITLE,
    LISTING_PROPERTY,
    PUBLISHED_PROPERTY,
    REVIEWED_PROPERTY,
    ROOM_TYPE_PROPERTY,
    STATUS_OPTIONS,
    STATUS_PROPERTY,
    TITLE_PROPERTY,
    PageTruth,
    build_workspaces,
)

# Versions the emulator answers (developers.notion.com/reference/changes-by-version).
# From DATA_SOURCES_VERSION on, a database is a container of data sources, queried at
# /v1/data_sources/{id}/query; from POSITION_VERSION on, appends take ``position``
# instead of ``after`` and objects report ``in_trash`` only (no ``archived``).
SUPPORTED_VERSIONS = frozenset(
    {"2021-05-13", "2021-08-16", "2022-02-22", "2022-06-28", "2025-09-03", "2026-03-11"}
)
DATA_SOURCES_VERSION = "2025-09-03"
POSITION_VERSION = "2026-03-11"
MAX_PAGE_SIZE = 100
MAX_CHILDREN = 100
MAX_NESTING = 2
MAX_BLOCK_ELEMENTS = 1000
MAX_PAYLOAD_BYTES = 500_000
DEFAULT_REQUESTS_PER_SECOND = 3.0
DEFAULT_BURST = 10

TEXT_TYPES = frozenset(
    {
        "paragraph",
        "heading_1",
        "heading_2",
        "heading_3",
        "toggle",
        "callout",
        "bulleted_list_item",
        "numbered_list_item",
        "quote",
        "to_do",
    }
)
CREATABLE_TYPES = TEXT_TYPES | {"divider"}
HEADINGS = frozenset({"heading_1", "heading_2", "heading_3"})
# Types that may hold children; headings only when toggleable.
NESTING_TYPES = frozenset(
    {"paragraph", "toggle", "callout", "bulleted_list_item", "numbered_list_item", "quote", "to_do"}
)
COLORS = frozenset(
    f"{c}{suffix}"
    for c in ("gray", "brown", "orange", "yellow", "green", "blue", "purple", "pink", "red")
    for suffix in ("", "_background")
) | {"default"}
# Keys a block type's object may carry (besides ``children``).
_TYPE_KEYS: dict[str, frozenset[str]] = {
    **{t: frozenset({"rich_text", "color"}) for t in TEXT_TYPES},
    **{h: frozenset({"rich_text", "color", "is_toggleable"}) for h in HEADINGS},
    "callout": frozenset({"rich_text", "color", "icon"}),
    "to_do": frozenset({"rich_text", "color", "checked"}),
    "divider": frozenset(),
}

ParentType = Literal["page_id", "block_id"]


@dataclass
class TokenBucket:
    """An integration's allowance: ``rate`` requests/second on average, bursts of ``burst``."""

    rate: float
    burst: float
    tokens: float
    updated: float

    def refill(self, now: float) -> None:
        """Add what the elapsed time has earned, up to the burst."""
        self.tokens = min(self.burst, self.tokens + max(0.0, now - self.updated) * self.rate)
        self.updated = now

    def take(self, now: float) -> int | None:
        """Take one request, or return the whole seconds until one is available."""
        self.refill(now)
        # The epsilon keeps float drift (0.99999…) from refusing a request that is due.
        if self.tokens >= 1 - 1e-9:
            self.tokens = max(0.0, self.tokens - 1)
            return None
        return max(1, ceil((1 - self.tokens) / self.rate))


@dataclass
class Workspace:
    """One customer's notes workspace, reached with one integration token."""

    id: str
    name: str
    hotel_id: str
    token: str
    bot_id: str
    database_id: str
    data_source_id: str
    created_time: datetime
    bucket: TokenBucket
    truth: list[PageTruth]
    users: list[User] = field(default_factory=list)


@dataclass(frozen=True)
class User:
    """A user of a workspace: the integration's bot or a person."""

    id: str
    type: Literal["bot", "person"]
    name: str
    email: str | None = None


@dataclass(frozen=True)
class SearchHit:
    """One search result: a page, or a database seen as itself or as its data source."""

    id: str
    target: Page | Database


@dataclass
class Database:
    """The apartments database of a workspace (with its single data source and its schema)."""

    id: str
    data_source_id: str
    workspace_id: str
    title: str
    created_time: datetime
    last_edited_time: datetime
    schema: Schema = field(default_factory=lambda: apartments_schema())
    page_ids: list[str] = field(default_factory=list)


@dataclass
class Page:
    """A database row: one apartment's notes page; ``values`` by property name."""

    id: str
    workspace_id: str
    database_id: str
    values: dict[str, Any]
    created_time: datetime
    last_edited_time: datetime
    children: list[str] = field(default_factory=list)
    archived: bool = False
    icon: dict[str, Any] | None = None
    cover: dict[str, Any] | None = None

    @property
    def title(self) -> str:
        """The page's title as plain text."""
        return plain_text(self.values.get(TITLE_PROPERTY))


def apartments_schema() -> Schema:
    """The apartments database's properties: what pmsgate reads and what people keep there."""
    return Schema(
        [
            PropertySpec(TITLE_PROPERTY, "title", "title"),
            PropertySpec(ROOM_TYPE_PROPERTY, "pmsR", "number"),
            PropertySpec(ADDRESS_PROPERTY, "addr", "rich_text"),
            PropertySpec(LISTING_PROPERTY, "lstg", "rich_text"),
            PropertySpec(
                STATUS_PROPERTY,
                "stat",
                "select",
                [dict(option) for option in STATUS_OPTIONS],
            ),
            PropertySpec(PUBLISHED_PROPERTY, "publ", "checkbox"),
            PropertySpec(REVIEWED_PROPERTY, "rvwd", "date"),
        ]
    )


@dataclass
class Block:
    """A block on a page; ``content`` is the type object without its children."""

    id: str
    workspace_id: str
    page_id: str
    parent_type: ParentType
    parent_id: str
    type: str
    content: dict[str, Any]
    created_time: datetime
    last_edited_time: datetime
    children: list[str] = field(default_factory=list)
    archived: bool = False


@dataclass
class NewBlock:
    """A validated block of an append request, not created yet."""

    type: str
    content: dict[str, Any]
    children: list[NewBlock] = field(default_factory=list)

    def elements(self) -> int:
        """This block and all its descendants."""
        return 1 + sum(child.elements() for child in self.children)

    def depth(self) -> int:
        """Levels of nesting: 1 for a block without children."""
        return 1 + max((child.depth() for child in self.children), default=0)


@dataclass
class Faults:
    """Injected misbehaviour; all off by default."""

    latency_s: float = 0.0
    error_rate: float = 0.0  # share of admitted requests answered 503 service_unavailable
    fail_ids: set[str] = field(default_factory=set)  # requests naming these ids answer 500


@dataclass
class Stats:
    """What the emulator has seen since the last reset (workspaces stand for their tokens)."""

    requests_total: int = 0
    requests_by_workspace: Counter[str] = field(default_factory=Counter)
    requests_by_endpoint: Counter[str] = field(default_factory=Counter)
    rate_limited: Counter[str] = field(default_factory=Counter)
    errors_by_code: Counter[str] = field(default_factory=Counter)
    appends: int = 0
    append_max_children: int = 0
    append_max_depth: int = 0
    append_max_elements: int = 0
    blocks_created: int = 0
    blocks_updated: int = 0
    blocks_archived: int = 0
    pages_created: int = 0
    pages_updated: int = 0
    injected_errors: int = 0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view."""
        return {
            "requests": {
                "total": self.requests_total,
                "by_workspace": dict(self.requests_by_workspace),
                "by_endpoint": dict(self.requests_by_endpoint),
            },
            "rate_limited": {
                "total": self.rate_limited.total(),
                "by_workspace": dict(self.rate_limited),
            },
            "errors_by_code": dict(self.errors_by_code),
            "appends": {
                "requests": self.appends,
                "max_children": self.append_max_children,
                "max_depth": self.append_max_depth,
                "max_elements": self.append_max_elements,
            },
            "blocks": {
                "created": self.blocks_created,
                "updated": self.blocks_updated,
                "archived": self.blocks_archived,
            },
            "pages": {"created": self.pages_created, "updated": self.pages_updated},
            "injected_errors": self.injected_errors,
        }


class NotesStore:
    """State and semantics of the notes-workspace emulator."""

    def __init__(
        self,
        seed: int = 1,
        clock: Clock | None = None,
        kross: KrossStore | None = None,
        facility_count: int = FACILITY_COUNT,
    ) -> None:
        self.seed = seed
        self.clock: Clock = clock or (kross.clock if kross is not None else SystemClock())
        self.kross = kross
        self.facility_count = facility_count
        self.reset()

    def reset(self) -> None:
        """Back to the seed data as of the clock's time: no changes, stats, faults or limits."""
        now = self.clock.now()
        # Same facilities as the booking-system emulator: its live state when given, else its seed.
        facilities = (
            self.kross.facilities()
            if self.kross is not None
            else build_facilities(self.seed, now, self.facility_count)
        )
        self._ids = random.Random(f"notes-block-ids-{self.seed}")
        self._workspaces: dict[str, Workspace] = {}
        self._by_token: dict[str, str] = {}
        self._databases: dict[str, Database] = {}
        self._data_sources: dict[str, str] = {}
        self._pages: dict[str, Page] = {}
        self._blocks: dict[str, Block] = {}
        self.requests_per_second = DEFAULT_REQUESTS_PER_SECOND
        self.burst = DEFAULT_BURST
        for ws in build_workspaces(self.seed, now, facilities):
            workspace = Workspace(
                id=ws.id,
                name=ws.name,
                hotel_id=ws.hotel_id,
                token=ws.token,
                bot_id=ws.bot_id,
                database_id=ws.database_id,
                data_source_id=ws.data_source_id,
                created_time=ws.created_time,
                bucket=self._new_bucket(now.timestamp()),
                truth=[p.truth for p in ws.pages],
                users=_users(self.seed, ws.id, ws.bot_id),
            )
            self._workspaces[ws.id] = workspace
            self._by_token[ws.token] = ws.id
            database = Database(
                id=ws.database_id,
                data_source_id=ws.data_source_id,
                workspace_id=ws.id,
                title=DATABASE_TITLE,
                created_time=ws.created_time,
                last_edited_time=ws.created_time,
            )
            self._databases[database.id] = database
            self._data_sources[ws.data_source_id] = database.id
            for index, seeded in enumerate(ws.pages):
                page = Page(
                    id=seeded.id,
                    workspace_id=ws.id,
                    database_id=database.id,
                    values=_seeded_values(database.schema, seeded, index),
                    created_time=seeded.created_time,
                    last_edited_time=seeded.created_time,
                )
                self._pages[page.id] = page
                database.page_ids.append(page.id)
                # Seed content may exceed the per-request limits (e.g. a toggle of 120 children).
                tree = self._parse_children(seeded.blocks, "seed", level=1, limits=False)
                for spec in tree:
                    self._create(workspace, page, page, spec, seeded.created_time)
        self.faults = Faults()
        self.stats = Stats()
        # Seeded so that a given error rate fails the same requests on every run.
        self._fault_rng = random.Random(self.seed)

    # --- request checks ----------------------------------------------------------------------

    @staticmethod
    def check_version(value: str | None) -> str:
        """The request's Notion-Version, or missing_version / validation_error."""
        if not value:
            raise NotesApiError(errors.MISSING_VERSION)
        if value not in SUPPORTED_VERSIONS:
            raise NotesApiError(
                errors.INVALID_VERSION,
                "Notion-Version header failed validation: Notion-Version header should be one "
                f"of {sorted(SUPPORTED_VERSIONS)}, instead was `{value}`.",
            )
        return value

    def authenticate(self, token: str | None) -> Workspace:
        """The workspace an integration token opens, or unauthorized."""
        workspace_id = self._by_token.get(token or "")
        if workspace_id is None:
            raise NotesApiError(errors.UNAUTHORIZED)
        return self._workspaces[workspace_id]

    def record_request(self, endpoint: str) -> None:
        """Count one request (endpoint = method and route template)."""
        self.stats.requests_total += 1
        self.stats.requests_by_endpoint[endpoint] += 1

    def record_error(self, code: str) -> None:
        """Count one error answer by its code."""
        self.stats.errors_by_code[code] += 1

    def admit(self, workspace: Workspace) -> None:
        """Take one request from the workspace's bucket, or refuse with 429 and Retry-After."""
        self.stats.requests_by_workspace[workspace.id] += 1
        wait = workspace.bucket.take(self.clock.now().timestamp())
        if wait is not None:
            self.stats.rate_limited[workspace.id] += 1
            raise NotesApiError(errors.RATE_LIMITED, headers={"Retry-After": str(wait)})

    def draw_fault(self, path: str) -> NotesApiError | None:
        """The injected error this request gets, if any."""
        compact = path.replace("-", "")  # ids may be sent with or without dashes
        if any(i.replace("-", "") in compact for i in self.faults.fail_ids):
            self.stats.injected_errors += 1
            return NotesApiError(errors.INTERNAL_SERVER_ERROR)
        if self.faults.error_rate > 0 and self._fault_rng.random() < self.faults.error_rate:
            self.stats.injected_errors += 1
            return NotesApiError(errors.SERVICE_UNAVAILABLE)
        return None

    # --- reads -------------------------------------------------------------------------------

    def database(self, workspace: Workspace, database_id: str) -> Database:
        """One database of the workspace, or object_not_found."""
        key = normalise_id(database_id, "path.database_id")
        database = self._databases.get(key)
        if database is None or database.workspace_id != workspace.id:
            raise not_found("database", database_id)
        return database

    def data_source(self, workspace: Workspace, data_source_id: str) -> Database:
        """The database behind a data source id, or object_not_found."""
        key = normalise_id(data_source_id, "path.data_source_id")
        database_id = self._data_sources.get(key)
        if database_id is None or self._databases[database_id].workspace_id != workspace.id:
            raise not_found("data_source", data_source_id)
        return self._databases[database_id]

    def query(self, database: Database, body: dict[str, Any]) -> tuple[list[Page], str | None]:
        """One page of the database's rows, filtered and sorted as asked, and the next cursor.

        Without ``sorts`` rows come in the database's order; a cursor is only valid with the
        filter and sorts it was given with, as in the real API.
        """
        pages = [self._pages[i] for i in database.page_ids if not self._pages[i].archived]
        if body.get("filter") is not None:
            matches = compile_filter(body["filter"], database.schema, self.clock.now())
            pages = [page for page in pages if matches(page)]
        if body.get("sorts") is not None:
            pages = sort_rows(pages, compile_sorts(body["sorts"], database.schema))
        return _paginate(pages, body.get("start_cursor"), body.get("page_size"), "body")

    def page(self, workspace: Workspace, page_id: str) -> Page:
        """One page, or object_not_found."""
        key = normalise_id(page_id, "path.page_id")
        page = self._pages.get(key)
        if page is None or page.workspace_id != workspace.id:
            raise not_found("page", page_id)
        return page

    def node(self, workspace: Workspace, block_id: str) -> Page | Block:
        """A block, or a page seen as a ``child_page`` block; object_not_found otherwise."""
        key = normalise_id(block_id, "path.block_id")
        found: Page | Block | None = self._blocks.get(key) or self._pages.get(key)
        if found is None or found.workspace_id != workspace.id:
            raise not_found("block", block_id)
        return found

    def children(
        self, workspace: Workspace, block_id: str, start_cursor: Any, page_size: Any
    ) -> tuple[list[Block], str | None]:
        """One page of a block's first-level children, and the next cursor."""
        parent = self.node(workspace, block_id)
        return _paginate(self.live_children(parent), start_cursor, page_size, "query")

    def live_children(self, parent: Page | Block) -> list[Block]:
        """A block's or page's children that are not archived, in order."""
        kids = (self._blocks[i] for i in parent.children)
        return [b for b in kids if not b.archived]

    def has_children(self, node: Page | Block) -> bool:
        """Whether a block has children that are not archived."""
        return any(not self._blocks[i].archived for i in node.children)

    def workspace_of(self, node: Page | Block | Database) -> Workspace:
        """The workspace an object lives in."""
        return self._workspaces[node.workspace_id]

    def database_of(self, page: Page) -> Database:
        """The database a page is a row of."""
        return self._databases[page.database_id]

    def bot(self, workspace: Workspace) -> User:
        """The integration's bot user (the token's own user)."""
        return workspace.users[0]

    def users(
        self, workspace: Workspace, start_cursor: Any, page_size: Any
    ) -> tuple[list[User], str | None]:
        """One page of the workspace's users (people and the bot), and the next cursor."""
        return _paginate(workspace.users, start_cursor, page_size, "query")

    def user(self, workspace: Workspace, user_id: str) -> User:
        """One user of the workspace, or object_not_found."""
        key = normalise_id(user_id, "path.user_id")
        found = next((u for u in workspace.users if u.id == key), None)
        if found is None:
            raise not_found("user", user_id)
        return found

    def search(
        self, workspace: Workspace, body: dict[str, Any], version: str
    ) -> tuple[list[SearchHit], str | None]:
        """POST /v1/search: pages and databases (data sources from 2025-09-03) by title.

        ``query`` matches titles case-insensitively as a substring (Notion's ranking is
        not emulated); without ``sort`` the most recently edited come first.
        """
        unknown = set(body) - {"query", "filter", "sort", "start_cursor", "page_size"}
        if unknown:
            raise validation(f"body.{sorted(unknown)[0]} should be not present.")
        query = body.get("query") or ""
        if not isinstance(query, str):
            raise validation(f"body.query should be a string, instead was `{_short(query)}`.")
        containers = "data_source" if version >= DATA_SOURCES_VERSION else "database"
        wanted = _search_filter(body.get("filter"), containers)
        descending = _search_sort(body.get("sort"))
        hits: list[tuple[datetime, SearchHit]] = []
        for database in self._databases.values():
            if database.workspace_id != workspace.id:
                continue
            if wanted in (None, containers):
                hit_id = database.data_source_id if containers == "data_source" else database.id
                hits.append((database.last_edited_time, SearchHit(hit_id, database)))
            if wanted in (None, "page"):
                for page_id in database.page_ids:
                    page = self._pages[page_id]
                    if not page.archived:
                        hits.append((page.last_edited_time, SearchHit(page.id, page)))
        needle = query.casefold().strip()
        matching = [(t, h) for t, h in hits if needle in h.target.title.casefold()]
        # A stable sort keeps the workspace order among equal times (cursors stay valid).
        matching.sort(key=lambda pair: pair[0], reverse=descending)
        return _paginate(
            [h for _, h in matching], body.get("start_cursor"), body.get("page_size"), "body"
        )

    # --- writes ------------------------------------------------------------------------------

    def append_children(
        self,
        workspace: Workspace,
        block_id: str,
        body: dict[str, Any],
        payload_bytes: int,
        version: str = DATA_SOURCES_VERSION,
    ) -> list[Block]:
        """PATCH /v1/blocks/{id}/children: validate the whole request, then create its blocks.

        Where they go: ``after`` (a child's id) up to 2025-09-03, ``position``
        (``after_block``, ``start`` or ``end``) from 2026-03-11 on; the end by default.
        """
        if payload_bytes > MAX_PAYLOAD_BYTES:
            raise validation(
                f"Request body too large: {payload_bytes} bytes, at most {MAX_PAYLOAD_BYTES}."
            )
        parent = self.node(workspace, block_id)
        if parent.archived:
            raise validation(
                "Can't edit block that is archived. You must unarchive the block before editing."
            )
        if isinstance(parent, Block) and not _can_have_children(parent.type, parent.content):
            raise validation(f"Block type {parent.type} does not support children.")
        placement = "position" if version >= POSITION_VERSION else "after"
        unknown = set(body) - {"children", placement}
        if unknown:
            raise validation(f"body.{sorted(unknown)[0]} should be not present.")
        if "children" not in body:
            raise validation("body.children should be defined, instead was `undefined`.")
        tree = self._parse_children(body["children"], "body.children", level=1, limits=True)
        elements = sum(spec.elements() for spec in tree)
        if elements > MAX_BLOCK_ELEMENTS:
            raise validation(
                f"body.children should contain at most {MAX_BLOCK_ELEMENTS} block elements, "
                f"instead was `{elements}`."
            )
        position = self._insertion_point(parent, body, placement)
        now = self.clock.now()
        page = parent if isinstance(parent, Page) else self._pages[parent.page_id]
        created = [self._create(workspace, page, parent, spec, now, attach=False) for spec in tree]
        parent.children[position:position] = [b.id for b in created]
        self._touch(parent, now)
        self.stats.appends += 1
        self.stats.blocks_created += elements
        self.stats.append_max_children = max(self.stats.append_max_children, len(tree))
        self.stats.append_max_elements = max(self.stats.append_max_elements, elements)
        depth = max((spec.depth() for spec in tree), default=0)
        self.stats.append_max_depth = max(self.stats.append_max_depth, depth)
        return created

    def update_block(
        self,
        workspace: Workspace,
        block_id: str,
        body: dict[str, Any],
        version: str = DATA_SOURCES_VERSION,
    ) -> Block:
        """PATCH /v1/blocks/{id}: change a block's text and attributes, or (un)trash it."""
        node = self.node(workspace, block_id)
        if isinstance(node, Page):
            raise validation("A child_page block is updated through PATCH /v1/pages/{id}.")
        # 2026-03-11 renamed ``archived`` to ``in_trash`` in requests too.
        trash_keys = ("in_trash",) if version >= POSITION_VERSION else ("archived", "in_trash")
        for key in body:
            if key in (*trash_keys, node.type):
                continue
            if key in CREATABLE_TYPES:
                raise validation(f"body.{key}: a {node.type} block cannot become a {key} block.")
            raise validation(f"body.{key} should be not present.")
        archived = body.get("in_trash", body.get("archived"))
        if archived is not None and not isinstance(archived, bool):
            raise validation(f"body.archived should be a boolean, instead was `{archived}`.")
        changes: dict[str, Any] = {}
        if node.type in body:
            changes, nested = _parse_content(
                node.type, body[node.type], f"body.{node.type}", partial=True
            )
            if nested is not None:
                raise validation(
                    f"body.{node.type}.children should be not present; append children instead."
                )
        if node.archived and archived is not False and changes:
            raise validation(
                "Can't edit block that is archived. You must unarchive the block before editing."
            )
        now = self.clock.now()
        node.content.update(changes)
        if archived is not None:
            node.archived = archived
        self._touch(node, now)
        self.stats.blocks_updated += 1
        return node

    def create_page(
        self, workspace: Workspace, body: dict[str, Any], version: str, payload_bytes: int = 0
    ) -> Page:
        """POST /v1/pages: a new row of the apartments database, with its first blocks.

        The parent is the database (``database_id``) or, from 2025-09-03 on, its data source
        (``data_source_id``); properties not given start empty.
        """
        if payload_bytes > MAX_PAYLOAD_BYTES:
            raise validation(
                f"Request body too large: {payload_bytes} bytes, at most {MAX_PAYLOAD_BYTES}."
            )
        unknown = set(body) - {"parent", "properties", "children", "icon", "cover"}
        if unknown:
            raise NotesApiError(
                errors.INVALID_REQUEST,
                f"The emulator does not implement body.{sorted(unknown)[0]} of POST /v1/pages.",
            )
        database = self._parent_database(workspace, body.get("parent"), version)
        values = parse_values(database.schema, body.get("properties", {}))
        tree = self._parse_children(body.get("children", []), "body.children", level=1, limits=True)
        elements = sum(spec.elements() for spec in tree)
        if elements > MAX_BLOCK_ELEMENTS:
            raise validation(
                f"body.children should contain at most {MAX_BLOCK_ELEMENTS} block elements, "
                f"instead was `{elements}`."
            )
        now = self.clock.now()
        page = Page(
            id=self._new_id(),
            workspace_id=workspace.id,
            database_id=database.id,
            values=values,
            created_time=now,
            last_edited_time=now,
            icon=_optional_object(body.get("icon"), "body.icon"),
            cover=_optional_object(body.get("cover"), "body.cover"),
        )
        self._pages[page.id] = page
        database.page_ids.append(page.id)
        for spec in tree:
            self._create(workspace, page, page, spec, now)
        self.stats.pages_created += 1
        self.stats.blocks_created += elements
        return page

    def update_page(
        self, workspace: Workspace, page_id: str, body: dict[str, Any], version: str
    ) -> Page:
        """PATCH /v1/pages/{id}: change property values, icon or cover, or (un)trash the page."""
        page = self.page(workspace, page_id)
        # 2026-03-11 renamed ``archived`` to ``in_trash`` in requests too.
        trash_keys = ("in_trash",) if version >= POSITION_VERSION else ("archived", "in_trash")
        unknown = set(body) - {"properties", "icon", "cover", *trash_keys}
        if unknown:
            key = sorted(unknown)[0]
            if key == "archived":
                raise validation("body.archived should be not present; use body.in_trash.")
            raise NotesApiError(
                errors.INVALID_REQUEST,
                f"The emulator does not implement body.{key} of PATCH /v1/pages/{{id}}.",
            )
        trashed = body.get("in_trash", body.get("archived"))
        if trashed is not None and not isinstance(trashed, bool):
            raise validation(f"body.in_trash should be a boolean, instead was `{_short(trashed)}`.")
        database = self.database_of(page)
        values = parse_values(database.schema, body.get("properties", {}))
        edits = bool(values) or "icon" in body or "cover" in body
        if page.archived and trashed is not False and edits:
            raise validation(
                "Can't edit page that is archived. You must unarchive the page before editing."
            )
        page.values.update(values)
        if "icon" in body:
            page.icon = _optional_object(body["icon"], "body.icon")
        if "cover" in body:
            page.cover = _optional_object(body["cover"], "body.cover")
        if trashed is not None:
            page.archived = trashed
        page.last_edited_time = self.clock.now()
        self.stats.pages_updated += 1
        return page

    def _parent_database(self, workspace: Workspace, parent: Any, version: str) -> Database:
        """The database a new page goes into, from its ``parent`` object."""
        if not isinstance(parent, dict):
            raise validation(f"body.parent should be an object, instead was `{_short(parent)}`.")
        kinds = ["database_id"]
        if version >= DATA_SOURCES_VERSION:
            kinds.append("data_source_id")
        given = [key for key in ("database_id", "data_source_id", "page_id") if key in parent]
        if len(given) != 1 or given[0] not in (*kinds, "page_id"):
            raise validation(
                f"body.parent should have exactly one of {', '.join(kinds)}, page_id, instead "
                f"was `{_short(parent)}`."
            )
        kind = given[0]
        if kind == "page_id":
            raise NotesApiError(
                errors.INVALID_REQUEST,
                "The emulator creates pages in the apartments database only (parent database_id"
                + (" or data_source_id)." if version >= DATA_SOURCES_VERSION else ")."),
            )
        if kind == "data_source_id":
            return self.data_source(workspace, str(parent[kind]))
        return self.database(workspace, str(parent[kind]))

    def archive_block(self, workspace: Workspace, block_id: str) -> Block:
        """DELETE /v1/blocks/{id}: move a block to the trash (it leaves its parent's children)."""
        node = self.node(workspace, block_id)
        if isinstance(node, Page):
            raise validation("The emulator does not delete pages.")
        node.archived = True
        self._touch(node, self.clock.now())
        self.stats.blocks_archived += 1
        return node

    def _insertion_point(self, parent: Page | Block, body: dict[str, Any], placement: str) -> int:
        """Where an append's blocks go among the parent's children (an index)."""
        end = len(parent.children)
        raw = body.get(placement)
        if raw is None:
            return end
        after: Any = raw
        if placement == "position":
            kind = raw.get("type") if isinstance(raw, dict) else None
            if kind == "start":
                return 0
            if kind == "end":
                return end
            if kind != "after_block":
                raise validation(
                    "body.position.type should be `after_block`, `start` or `end`, instead was "
                    f"`{_short(kind)}`."
                )
            target = raw.get("after_block")
            after = target.get("id") if isinstance(target, dict) else None
        where = f"body.{placement}"
        key = normalise_id(after, where) if isinstance(after, str) else None
        if key is None or key not in parent.children or self._blocks[key].archived:
            raise validation(f"{where} should name a child of block {parent.id}.")
        return parent.children.index(key) + 1

    # --- test controls -----------------------------------------------------------------------

    def workspaces(self) -> list[dict[str, Any]]:
        """Tokens, database ids and each page's seeded ground truth (reset restores it)."""
        return [
            {
                "workspace_id": ws.id,
                "name": ws.name,
                "hotel_id": ws.hotel_id,
                "token": ws.token,
                "bot_id": ws.bot_id,
                "database_id": ws.database_id,
                "data_source_id": ws.data_source_id,
                "database_title": DATABASE_TITLE,
                "rate_limit": {"requests_per_second": ws.bucket.rate, "burst": ws.bucket.burst},
                "pages": [truth.as_dict() for truth in ws.truth],
            }
            for ws in self._workspaces.values()
        ]

    def set_rate_limit(
        self,
        requests_per_second: float | None = None,
        burst: int | None = None,
        workspace_id: str | None = None,
    ) -> dict[str, float]:
        """Change the bucket of one workspace, or of all (until the next reset); it starts full."""
        if workspace_id is not None:
            if workspace_id not in self._workspaces:
                raise not_found("workspace", workspace_id)
            targets = [self._workspaces[workspace_id]]
        else:
            targets = list(self._workspaces.values())
            self.requests_per_second = requests_per_second or self.requests_per_second
            self.burst = burst or self.burst
        now = self.clock.now().timestamp()
        for ws in targets:
            if requests_per_second is not None:
                ws.bucket.rate = requests_per_second
            if burst is not None:
                ws.bucket.burst = burst
            # A new limit starts with a full bucket, as after a quiet period.
            ws.bucket.tokens, ws.bucket.updated = float(ws.bucket.burst), now
        first = targets[0].bucket if targets else self._new_bucket(now)
        return {"requests_per_second": first.rate, "burst": first.burst}

    def advance_clock(self, seconds: float) -> datetime:
        """Move a ManualClock forward; any other clock refuses."""
        if not isinstance(self.clock, ManualClock):
            raise validation("The emulator's clock is not a ManualClock.")
        return self.clock.advance(seconds)

    def set_faults(
        self,
        latency_s: float | None = None,
        error_rate: float | None = None,
        fail_ids: list[str] | None = None,
    ) -> Faults:
        """Arm faults (the ones not given stay as they are)."""
        if latency_s is not None:
            self.faults.latency_s = latency_s
        if error_rate is not None:
            self.faults.error_rate = error_rate
        if fail_ids is not None:
            self.faults.fail_ids = {normalise_id(i, "body.fail_ids") for i in fail_ids}
        return self.faults

    def clear_faults(self) -> None:
        """Disarm every fault."""
        self.faults = Faults()

    # --- helpers -----------------------------------------------------------------------------

    def _new_bucket(self, now: float) -> TokenBucket:
        return TokenBucket(self.requests_per_second, self.burst, float(self.burst), now)

    def _new_id(self) -> str:
        return str(uuid.UUID(int=self._ids.getrandbits(128), version=4))

    def _create(
        self,
        workspace: Workspace,
        page: Page,
        parent: Page | Block,
        spec: NewBlock,
        now: datetime,
        *,
        attach: bool = True,
    ) -> Block:
        block = Block(
            id=self._new_id(),
            workspace_id=workspace.id,
            page_id=page.id,
            parent_type="page_id" if isinstance(parent, Page) else "block_id",
            parent_id=parent.id,
            type=spec.type,
            content=spec.content,
            created_time=now,
            last_edited_time=now,
        )
        self._blocks[block.id] = block
        if attach:
            parent.children.append(block.id)
        for child in spec.children:
            self._create(workspace, page, block, child, now)
        return block

    def _touch(self, node: Page | Block, now: datetime) -> None:
        # Notion moves the page's last_edited_time too when any block on it changes.
        node.last_edited_time = now
        if isinstance(node, Block):
            self._pages[node.page_id].last_edited_time = now
            parent = self._blocks.get(node.parent_id)
            if parent is not None:
                parent.last_edited_time = now

    def _parse_children(self, items: Any, path: str, *, level: int, limits: bool) -> list[NewBlock]:
        if not isinstance(items, list):
            raise validation(f"{path} should be an array, instead was `{_short(items)}`.")
        if limits and len(items) > MAX_CHILDREN:
            raise validation(
                f"{path}.length should be ≤ `{MAX_CHILDREN}`, instead was `{len(items)}`."
            )
        result: list[NewBlock] = []
        for index, item in enumerate(items):
            where = f"{path}[{index}]"
            if not isinstance(item, dict):
                raise validation(f"{where} should be an object, instead was `{_short(item)}`.")
            kind = item.get("type") or next((k for k in item if k in CREATABLE_TYPES), None)
            if kind not in CREATABLE_TYPES:
                raise validation(
                    f"{where}.type should be one of {sorted(CREATABLE_TYPES)}, "
                    f"instead was `{kind}`."
                )
            if "children" in item:
                raise validation(
                    f"{where}.children should be not present; nested blocks go in "
                    f"{where}.{kind}.children."
                )
            extra = set(item) - {"object", "type", kind}
            if extra:
                raise validation(f"{where}.{sorted(extra)[0]} should be not present.")
            content, nested = _parse_content(kind, item.get(kind, {}), f"{where}.{kind}")
            children: list[NewBlock] = []
            if nested is not None:
                if not _can_have_children(kind, content):
                    raise validation(
                        f"{where}.{kind}.children should be not present: a {kind} block "
                        "cannot have children."
                    )
                if limits and level >= MAX_NESTING and nested:
                    raise validation(
                        f"{where}.{kind}.children should be not present, instead was "
                        f"`{_short(nested)}`. At most {MAX_NESTING} levels of nesting are "
                        "allowed in one request."
                    )
                children = self._parse_children(
                    nested, f"{where}.{kind}.children", level=level + 1, limits=limits
                )
            result.append(NewBlock(kind, content, children))
        return result


# --- parsing helpers ---------------------------------------------------------------------------


_PEOPLE = (("Giulia Esempio", "giulia"), ("Marco Prova", "marco"))


def _users(seed: int, workspace_id: str, bot_id: str) -> list[User]:
    """The bot and two fictitious people; drawn from their own generator, not the seed's."""
    rng = random.Random(f"notes-users-{seed}-{workspace_id}")
    people = [
        User(
            id=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            type="person",
            name=name,
            email=f"{handle}@example.invalid",
        )
        for name, handle in _PEOPLE
    ]
    return [User(id=bot_id, type="bot", name="pmsgate"), *people]


def _search_filter(raw: Any, containers: str) -> str | None:
    """The object type a search is limited to (``page`` or the version's container type)."""
    if raw is None:
        return None
    allowed = ("page", containers)
    if not isinstance(raw, dict) or raw.get("property") != "object":
        raise validation("body.filter.property should be `object`.")
    value = raw.get("value")
    if value not in allowed:
        raise validation(
            f"body.filter.value should be `{allowed[0]}` or `{allowed[1]}`, instead was "
            f"`{_short(value)}`."
        )
    return str(value)


def _search_sort(raw: Any) -> bool:
    """Whether a search sorts by descending last_edited_time (the default)."""
    if raw is None:
        return True
    if not isinstance(raw, dict) or raw.get("timestamp") != "last_edited_time":
        raise validation("body.sort.timestamp should be `last_edited_time`.")
    direction = raw.get("direction")
    if direction not in ("ascending", "descending"):
        raise validation(
            "body.sort.direction should be `ascending` or `descending`, instead was "
            f"`{_short(direction)}`."
        )
    return direction == "descending"


def normalise_id(value: Any, where: str) -> str:
    """A Notion id (with or without dashes) in its dashed form, or validation_error."""
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise validation(f"{where} should be a valid uuid, instead was `{value}`.") from None


def _parse_content(
    kind: str, raw: Any, where: str, *, partial: bool = False
) -> tuple[dict[str, Any], Any | None]:
    """A type object, validated and completed with defaults, and its nested children if any."""
    if not isinstance(raw, dict):
        raise validation(f"{where} should be an object, instead was `{_short(raw)}`.")
    nested = raw.get("children")
    for key in raw:
        if key != "children" and key not in _TYPE_KEYS[kind]:
            raise validation(f"{where}.{key} should be not present.")
    content: dict[str, Any] = {}
    if kind in TEXT_TYPES:
        if "rich_text" in raw:
            content["rich_text"] = _parse_rich_text(raw["rich_text"], f"{where}.rich_text")
        elif not partial:
            raise validation(f"{where}.rich_text should be defined, instead was `undefined`.")
        if "color" in raw or not partial:
            default = "gray_background" if kind == "callout" else "default"
            color = raw.get("color", default)
            if color not in COLORS:
                raise validation(f"{where}.color should be a Notion color, instead was `{color}`.")
            content["color"] = color
    if kind in HEADINGS and ("is_toggleable" in raw or not partial):
        content["is_toggleable"] = bool(raw.get("is_toggleable", False))
    if kind == "callout" and ("icon" in raw or not partial):
        icon = raw.get("icon", {"type": "emoji", "emoji": "💡"})
        if icon is not None and not isinstance(icon, dict):
            raise validation(f"{where}.icon should be an object, instead was `{_short(icon)}`.")
        content["icon"] = icon
    if kind == "to_do" and ("checked" in raw or not partial):
        content["checked"] = bool(raw.get("checked", False))
    return content, nested


def _seeded_values(schema: Schema, seeded: Any, index: int) -> dict[str, Any]:
    """A seeded page's property values; the ones the seed does not name follow its position."""
    status = STATUS_OPTIONS[index % len(STATUS_OPTIONS)]
    reviewed = {
        "start": (seeded.created_time + timedelta(days=7 * index)).date().isoformat(),
        "end": None,
        "time_zone": None,
    }
    return {
        TITLE_PROPERTY: rich_text_items(seeded.title),
        ROOM_TYPE_PROPERTY: seeded.room_type_id,
        ADDRESS_PROPERTY: rich_text_items(seeded.address),
        LISTING_PROPERTY: [],
        STATUS_PROPERTY: dict(status),
        PUBLISHED_PROPERTY: index % 2 == 0,
        REVIEWED_PROPERTY: None if index % 4 == 3 else reviewed,
    }


def _optional_object(value: Any, where: str) -> dict[str, Any] | None:
    if value is not None and not isinstance(value, dict):
        raise validation(f"{where} should be an object or `null`, instead was `{_short(value)}`.")
    return value


def _can_have_children(kind: str, content: dict[str, Any]) -> bool:
    return kind in NESTING_TYPES or (kind in HEADINGS and bool(content.get("is_toggleable")))


def _paginate(
    items: list[Any], start_cursor: Any, page_size: Any, where: str
) -> tuple[list[Any], str | None]:
    size = MAX_PAGE_SIZE
    if page_size is not None:
        try:
            size = int(page_size)
        except (TypeError, ValueError):
            raise validation(
                f"{where}.page_size should be a number, instead was `{page_size}`."
            ) from None
        if size < 1 or size > MAX_PAGE_SIZE:
            raise validation(
                f"{where}.page_size should be ≤ `{MAX_PAGE_SIZE}` and ≥ `1`, instead was `{size}`."
            )
    start = 0
    if start_cursor is not None:
        cursor = normalise_id(start_cursor, f"{where}.start_cursor")
        ids = [item.id for item in items]
        if cursor not in ids:
            raise validation(f"{where}.start_cursor is not a valid cursor: `{start_cursor}`.")
        start = ids.index(cursor)
    chunk = items[start : start + size]
    following = items[start + size] if start + size < len(items) else None
    return chunk, following.id if following is not None else None
