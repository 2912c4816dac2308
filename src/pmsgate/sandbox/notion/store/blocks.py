"""Blocks: a page's tree read level by level, appends within the limits, updates, trash."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pmsgate.sandbox.notion.errors import not_found, validation
from pmsgate.sandbox.notion.properties import short as _short
from pmsgate.sandbox.notion.store.core import DATA_SOURCES_VERSION, POSITION_VERSION, StoreCore
from pmsgate.sandbox.notion.store.parsing import (
    CREATABLE_TYPES,
    MAX_BLOCK_ELEMENTS,
    MAX_PAYLOAD_BYTES,
    can_have_children,
    normalise_id,
    paginate,
    parse_children,
    parse_content,
)
from pmsgate.sandbox.notion.store.records import Block, Page, Workspace


class BlocksMixin(StoreCore):
    """GET, PATCH and DELETE /v1/blocks and their children."""

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
        return paginate(self.live_children(parent), start_cursor, page_size, "query")

    def live_children(self, parent: Page | Block) -> list[Block]:
        """A block's or page's children that are not archived, in order."""
        kids = (self._blocks[i] for i in parent.children)
        return [b for b in kids if not b.archived]

    def has_children(self, node: Page | Block) -> bool:
        """Whether a block has children that are not archived."""
        return any(not self._blocks[i].archived for i in node.children)

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
        if isinstance(parent, Block) and not can_have_children(parent.type, parent.content):
            raise validation(f"Block type {parent.type} does not support children.")
        placement = "position" if version >= POSITION_VERSION else "after"
        unknown = set(body) - {"children", placement}
        if unknown:
            raise validation(f"body.{sorted(unknown)[0]} should be not present.")
        if "children" not in body:
            raise validation("body.children should be defined, instead was `undefined`.")
        tree = parse_children(body["children"], "body.children", level=1, limits=True)
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
            changes, nested = parse_content(
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

    def _touch(self, node: Page | Block, now: datetime) -> None:
        # Notion moves the page's last_edited_time too when any block on it changes.
        node.last_edited_time = now
        if isinstance(node, Block):
            self._pages[node.page_id].last_edited_time = now
            parent = self._blocks.get(node.parent_id)
            if parent is not None:
                parent.last_edited_time = now
