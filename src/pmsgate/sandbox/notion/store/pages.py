"""Pages, the apartments database's rows: read, create (with first blocks), update, trash."""

from __future__ import annotations

from typing import Any

from pmsgate.sandbox.notion import errors
from pmsgate.sandbox.notion.errors import NotionApiError, validation
from pmsgate.sandbox.notion.properties import parse_values
from pmsgate.sandbox.notion.properties import short as _short
from pmsgate.sandbox.notion.store.core import DATA_SOURCES_VERSION, POSITION_VERSION
from pmsgate.sandbox.notion.store.databases import DatabasesMixin
from pmsgate.sandbox.notion.store.parsing import (
    MAX_BLOCK_ELEMENTS,
    MAX_PAYLOAD_BYTES,
    optional_object,
    parse_children,
)
from pmsgate.sandbox.notion.store.records import Database, Page, Workspace


class PagesMixin(DatabasesMixin):
    """GET, POST and PATCH /v1/pages."""

    def page(self, workspace: Workspace, page_id: str) -> Page:
        """One page, or object_not_found."""
        return self._owned(self._pages, workspace, "page", page_id)

    def database_of(self, page: Page) -> Database:
        """The database a page is a row of."""
        return self._databases[page.database_id]

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
            raise NotionApiError(
                errors.INVALID_REQUEST,
                f"The emulator does not implement body.{sorted(unknown)[0]} of POST /v1/pages.",
            )
        database = self._parent_database(workspace, body.get("parent"), version)
        values = parse_values(database.schema, body.get("properties", {}))
        tree = parse_children(body.get("children", []), "body.children", level=1, limits=True)
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
            icon=optional_object(body.get("icon"), "body.icon"),
            cover=optional_object(body.get("cover"), "body.cover"),
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
            raise NotionApiError(
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
            page.icon = optional_object(body["icon"], "body.icon")
        if "cover" in body:
            page.cover = optional_object(body["cover"], "body.cover")
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
            raise NotionApiError(
                errors.INVALID_REQUEST,
                "The emulator creates pages in the apartments database only (parent database_id"
                + (" or data_source_id)." if version >= DATA_SOURCES_VERSION else ")."),
            )
        if kind == "data_source_id":
            return self.data_source(workspace, str(parent[kind]))
        return self.database(workspace, str(parent[kind]))
