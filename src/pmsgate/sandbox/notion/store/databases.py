"""The apartments database and its data source: lookups and queries (filters, sorts, pages)."""

from __future__ import annotations

from typing import Any

from pmsgate.sandbox.notion.errors import not_found
from pmsgate.sandbox.notion.properties import compile_filter, compile_sorts, sort_rows
from pmsgate.sandbox.notion.store.core import StoreCore
from pmsgate.sandbox.notion.store.parsing import normalise_id, paginate
from pmsgate.sandbox.notion.store.records import Database, Page, Workspace


class DatabasesMixin(StoreCore):
    """GET /v1/databases, /v1/data_sources and their queries."""

    def database(self, workspace: Workspace, database_id: str) -> Database:
        """One database of the workspace, or object_not_found."""
        return self._owned(self._databases, workspace, "database", database_id)

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
        return paginate(pages, body.get("start_cursor"), body.get("page_size"), "body")
