"""The notes workspace's objects as pmsgate reads them: rich text, blocks, apartment pages.

Typed where pmsgate works with them (the block types of :data:`BLOCK_TYPES`, the
apartments database's title, room type and listing properties); everything else is kept
as the API sent it (``raw``, ``properties``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

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
