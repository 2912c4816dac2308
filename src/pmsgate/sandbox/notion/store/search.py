"""POST /v1/search: pages and databases (data sources from 2025-09-03) by title."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pmsgate.sandbox.notion.errors import validation
from pmsgate.sandbox.notion.properties import short as _short
from pmsgate.sandbox.notion.store.core import DATA_SOURCES_VERSION, StoreCore
from pmsgate.sandbox.notion.store.parsing import paginate
from pmsgate.sandbox.notion.store.records import SearchHit, Workspace


class SearchMixin(StoreCore):
    """Search by title over a workspace's pages and databases."""

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
        return paginate(
            [h for _, h in matching], body.get("start_cursor"), body.get("page_size"), "body"
        )


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
