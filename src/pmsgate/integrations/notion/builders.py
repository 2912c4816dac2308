"""Blocks in the shape of a write request: rich text, paragraphs, headings, toggles, callouts.

What callers hand to :meth:`~pmsgate.integrations.notion.client.NotionClient.append_blocks`;
a text longer than the API's 2,000 characters per item is split into several items.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

MAX_TEXT_CHARS = 2000

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
