"""What the notes emulator accepts in a request: block trees, type objects, ids, cursors.

The documented per-request limits are enforced here (docs/knowledge-sync.md): pages of
at most 100 results, at most 100 children and two levels of nesting per append, at
most 1,000 block elements and 500 KB per request.
"""

from __future__ import annotations

import uuid
from typing import Any

from pmsgate.sandbox.notion.errors import validation
from pmsgate.sandbox.notion.properties import parse_rich_text as _parse_rich_text
from pmsgate.sandbox.notion.properties import short as _short
from pmsgate.sandbox.notion.store.records import NewBlock

MAX_PAGE_SIZE = 100
MAX_CHILDREN = 100
MAX_NESTING = 2
MAX_BLOCK_ELEMENTS = 1000
MAX_PAYLOAD_BYTES = 500_000

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


def parse_children(items: Any, path: str, *, level: int, limits: bool) -> list[NewBlock]:
    """The blocks of a ``children`` array, validated (within the request limits if ``limits``)."""
    if not isinstance(items, list):
        raise validation(f"{path} should be an array, instead was `{_short(items)}`.")
    if limits and len(items) > MAX_CHILDREN:
        raise validation(f"{path}.length should be ≤ `{MAX_CHILDREN}`, instead was `{len(items)}`.")
    result: list[NewBlock] = []
    for index, item in enumerate(items):
        where = f"{path}[{index}]"
        if not isinstance(item, dict):
            raise validation(f"{where} should be an object, instead was `{_short(item)}`.")
        kind = item.get("type") or next((k for k in item if k in CREATABLE_TYPES), None)
        if kind not in CREATABLE_TYPES:
            raise validation(
                f"{where}.type should be one of {sorted(CREATABLE_TYPES)}, instead was `{kind}`."
            )
        if "children" in item:
            raise validation(
                f"{where}.children should be not present; nested blocks go in "
                f"{where}.{kind}.children."
            )
        extra = set(item) - {"object", "type", kind}
        if extra:
            raise validation(f"{where}.{sorted(extra)[0]} should be not present.")
        content, nested = parse_content(kind, item.get(kind, {}), f"{where}.{kind}")
        children: list[NewBlock] = []
        if nested is not None:
            if not can_have_children(kind, content):
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
            children = parse_children(
                nested, f"{where}.{kind}.children", level=level + 1, limits=limits
            )
        result.append(NewBlock(kind, content, children))
    return result


def parse_content(
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


def can_have_children(kind: str, content: dict[str, Any]) -> bool:
    return kind in NESTING_TYPES or (kind in HEADINGS and bool(content.get("is_toggleable")))


def normalise_id(value: Any, where: str) -> str:
    """A Notion id (with or without dashes) in its dashed form, or validation_error."""
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise validation(f"{where} should be a valid uuid, instead was `{value}`.") from None


def optional_object(value: Any, where: str) -> dict[str, Any] | None:
    if value is not None and not isinstance(value, dict):
        raise validation(f"{where} should be an object or `null`, instead was `{_short(value)}`.")
    return value


def paginate(
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
