"""A notes page as knowledge-base nodes: one node per toggle or section, with a stable source key.

**Which nodes.** The page's top-level blocks are read in order (layout containers
such as columns and synced blocks are see-through, as in the template check):

- every **toggle** — and every toggleable heading — is a node of its own: its
  title is the toggle's text, its body its descendants, flattened;
- every other **heading** opens a section: its node's title is the heading's text
  and its body the loose blocks (paragraphs, lists, callouts, quotes…) that follow
  it up to the next heading, wherever toggles sit in between. A heading with no
  loose blocks after it (a group heading over toggles) carries no knowledge and
  yields no node;
- loose blocks before the first heading form an introduction node titled with the
  page's title.

Toggles are not nested under the heading before them: on real pages a heading is
as often a group label as a section, and a toggle's own title says what it is.

**Stable source key.** ``pmsgate:<page id>:<block id>`` (``…:intro`` for the
introduction): a block keeps its id when it is edited or moved, so a re-run finds
the node it wrote before and updates it in place. The **content hash** covers the
title, the body and :data:`FORMAT_VERSION`; a node whose hash is unchanged is not
written again. Bump the version when these rules change, so every node is
rewritten once.

**Flattened body.** One line per block with text, children indented by two spaces
per level; list items keep a ``-`` or ``n.`` marker, to-dos a ``[ ]``/``[x]`` box;
dividers and empty blocks are dropped.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from pmsgate.integrations.notion.models import Block

FORMAT_VERSION = 1
SOURCE_PREFIX = "pmsgate"
INTRO = "intro"
# The platform's limits on a node (docs/assistant-api.md: title ≤ 255, body ≤ 100,000).
TITLE_MAX = 255
BODY_MAX = 100_000
UNTITLED = "Senza titolo / Untitled"

HEADINGS = frozenset({"heading_1", "heading_2", "heading_3"})
# Blocks that only lay out their children: their content counts as the page's own level.
LAYOUT_CONTAINERS = frozenset({"column_list", "column", "synced_block"})
_SKIPPED = frozenset({"divider", "table_of_contents", "breadcrumb"})
_TRUNCATED = "\n…"


def source_key(page_id: str, block_id: str) -> str:
    """The stable key of the node a page's block yields."""
    return f"{SOURCE_PREFIX}:{normalise_id(page_id)}:{normalise_id(block_id)}"


def normalise_id(value: str) -> str:
    """A notes id in one spelling (lower case, no dashes), so keys never differ by format."""
    return value.replace("-", "").strip().lower()


def content_hash(title: str, body: str) -> str:
    """The hash a node carries in its metadata: same title and body, same hash."""
    payload = json.dumps([FORMAT_VERSION, title, body], ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


@dataclass(frozen=True)
class NodeDraft:
    """One node a page yields, before it is written to the platform."""

    source_key: str
    block_id: str
    title: str
    body: str
    content_hash: str
    position: int

    def contains(self, *values: str) -> bool:
        """Whether every value appears in the node's title or body."""
        text = f"{self.title}\n{self.body}"
        return all(value and value in text for value in values)


@dataclass
class _Open:
    block_id: str
    title: str
    toggle: bool = False
    blocks: list[Block] = field(default_factory=list)


def page_nodes(page_id: str, blocks: Sequence[Block], *, page_title: str = "") -> list[NodeDraft]:
    """The nodes of a page's block tree (as ``NotionClient.read_tree`` gives it), in page order."""
    drafts: list[_Open] = []
    intro = _Open(INTRO, page_title.strip() or UNTITLED)
    current: _Open = intro
    for block in top_level(blocks):
        if block.type == "toggle" or (block.type in HEADINGS and block.is_toggleable):
            node = _Open(block.id, block.plain_text, toggle=True, blocks=list(block.children))
            drafts.append(node)
            if block.type in HEADINGS:
                current = node
        elif block.type in HEADINGS:
            current = _Open(block.id, block.plain_text)
            drafts.append(current)
        else:
            current.blocks.append(block)
    result: list[NodeDraft] = []
    for position, node in enumerate([intro, *drafts]):
        title = _title(node.title)
        body = _body(list(flatten(node.blocks)))
        if not body and not (node.toggle and node.title.strip()):
            # A heading or an introduction without text under it says nothing to a guest.
            continue
        key = source_key(page_id, node.block_id) if node is not intro else _intro_key(page_id)
        result.append(
            NodeDraft(
                source_key=key,
                block_id=node.block_id,
                title=title,
                body=body,
                content_hash=content_hash(title, body),
                position=position,
            )
        )
    return result


def flatten(blocks: Iterable[Block], depth: int = 0) -> Iterator[str]:
    """Blocks and their descendants as text lines, children indented."""
    number = 0
    for block in blocks:
        if block.archived:
            continue
        if block.type in LAYOUT_CONTAINERS:
            yield from flatten(block.children, depth)
            continue
        number = number + 1 if block.type == "numbered_list_item" else 0
        text = " ".join(block.plain_text.split())
        if text and block.type not in _SKIPPED:
            yield "  " * depth + _marker(block, number) + text
        yield from flatten(block.children, depth + 1)


def _marker(block: Block, number: int) -> str:
    if block.type == "bulleted_list_item":
        return "- "
    if block.type == "numbered_list_item":
        return f"{number}. "
    if block.type == "to_do":
        checked = bool((block.raw.get("to_do") or {}).get("checked"))
        return "[x] " if checked else "[ ] "
    return ""


def top_level(blocks: Iterable[Block]) -> Iterator[Block]:
    """The page's own blocks: archived ones left out, layout containers' children lifted."""
    for block in blocks:
        if block.archived:
            continue
        if block.type in LAYOUT_CONTAINERS:
            yield from top_level(block.children)
        else:
            yield block


def _intro_key(page_id: str) -> str:
    return f"{SOURCE_PREFIX}:{normalise_id(page_id)}:{INTRO}"


def _title(text: str) -> str:
    title = " ".join(text.split()) or UNTITLED
    return title if len(title) <= TITLE_MAX else title[: TITLE_MAX - 1] + "…"


def _body(lines: list[str]) -> str:
    body = "\n".join(line for line in lines if line.strip())
    if len(body) <= BODY_MAX:
        return body
    return body[: BODY_MAX - len(_TRUNCATED)] + _TRUNCATED
