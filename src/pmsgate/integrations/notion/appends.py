"""Appends split to the API's limits: planning which blocks go in which request.

A request carries at most 100 children, 1,000 block elements, ~450 KB and two levels
of nesting: :func:`plan_block` keeps a block with the leaf children that fit one
request and leaves the rest for later requests under the created block;
:func:`request_chunks` groups planned blocks into consecutive requests.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pmsgate.integrations.notion.builders import MAX_TEXT_CHARS

MAX_CHILDREN_PER_REQUEST = 100
MAX_ELEMENTS_PER_REQUEST = 1000
# The API takes 500 KB per request; stay clear of it (our JSON estimate is not the SDK's bytes).
REQUEST_BYTES_BUDGET = 450_000


@dataclass
class Planned:
    """One top-level block of an append request, and what must follow in later requests."""

    block: dict[str, Any]
    rest: list[dict[str, Any]]
    elements: int
    size: int


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
    return kind, split_long_texts(content)


def split_long_texts(content: dict[str, Any]) -> dict[str, Any]:
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


def plan_block(block: Mapping[str, Any]) -> Planned:
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
    return Planned(block=sent, rest=rest, elements=1 + len(inline), size=size)


def request_chunks(planned: list[Planned]) -> list[list[Planned]]:
    """Consecutive requests within the per-request limits of children, elements and bytes."""
    chunks: list[list[Planned]] = []
    current: list[Planned] = []
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
