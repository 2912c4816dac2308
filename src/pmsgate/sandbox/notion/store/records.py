"""What the notes emulator keeps: workspaces, databases, pages, blocks, users, faults, stats."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from math import ceil
from typing import Any, Literal

from pmsgate.sandbox.notion.properties import PropertySpec, Schema, plain_text, rich_text_items
from pmsgate.sandbox.notion.seed import (
    ADDRESS_PROPERTY,
    LISTING_PROPERTY,
    PUBLISHED_PROPERTY,
    REVIEWED_PROPERTY,
    ROOM_TYPE_PROPERTY,
    STATUS_OPTIONS,
    STATUS_PROPERTY,
    TITLE_PROPERTY,
    PageTruth,
    WorkspaceFacts,
)

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
class Workspace(WorkspaceFacts):
    """One customer's notes workspace, reached with one integration token."""

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


def seeded_values(schema: Schema, seeded: Any, index: int) -> dict[str, Any]:
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
