"""The notes emulator's HTTP face: the Notion endpoints the SDK uses, and ``/_sandbox/`` controls.

Every ``/v1`` request goes through the same steps, in the order the real API is
assumed to apply them:

1. counted in the stats (method and route template), then injected latency;
2. the ``Notion-Version`` header (400 ``missing_version`` when absent);
3. ``Authorization: Bearer <integration token>`` (401 ``unauthorized``);
4. the token's bucket, about 3 requests/second with bursts of 10
   (429 ``rate_limited`` with ``Retry-After`` in whole seconds);
5. injected faults (500 for named ids, 503 at the configured rate);
6. body parsing (400 ``invalid_json``), the store's validation and change, serialisation.

Timestamps are rounded down to the minute, as the real API does, so a client
comparing ``last_edited_time`` values must allow for edits within the same minute.
With ``Notion-Version`` 2025-09-03 a database lists its data sources and pages
name a ``data_source_id`` parent; with earlier versions a database carries its
properties and is queried at ``POST /v1/databases/{id}/query``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from pmsgate.sandbox.core import bearer_token, json_object
from pmsgate.sandbox.emulator_app import ErrorAnswers, common_controls, emulator_app
from pmsgate.sandbox.notion import errors
from pmsgate.sandbox.notion.errors import NotionApiError, new_request_id, validation
from pmsgate.sandbox.notion.properties import rich_text_items
from pmsgate.sandbox.notion.store import (
    DATA_SOURCES_VERSION,
    POSITION_VERSION,
    Block,
    Database,
    NotionStore,
    Page,
    SearchHit,
    User,
    Workspace,
)

# Query-body fields the emulator accepts (``archived``, ``in_trash`` and ``result_type`` are
# taken and have no effect: trashed pages are never listed, and every row is a page).
_QUERY_FIELDS = frozenset(
    {"start_cursor", "page_size", "filter", "sorts", "archived", "in_trash", "result_type"}
)
# Endpoints of the official SDK the emulator knows but does not serve (pmsgate never calls
# them): answered 400 invalid_request naming the endpoint, not as an unknown URL.
_NOT_EMULATED = re.compile(
    r"(GET pages/[^/]+/properties/[^/]+|GET pages/[^/]+/markdown"
    r"|PATCH pages/[^/]+/markdown|POST pages/[^/]+/move|POST databases|PATCH databases/[^/]+"
    r"|POST data_sources|PATCH data_sources/[^/]+|GET data_sources/[^/]+/templates"
    r"|(GET|POST) comments|(GET|PATCH|DELETE) comments/[^/]+|(GET|POST) file_uploads"
    r"|GET file_uploads/[^/]+|POST file_uploads/[^/]+/(send|complete)|GET custom_emojis"
    r"|POST blocks/meeting_notes/query|(GET|POST) views|(GET|PATCH|DELETE) views/[^/]+"
    r"|POST views/[^/]+/queries|(GET|DELETE) views/[^/]+/queries/[^/]+)"
)


# --- control bodies ----------------------------------------------------------------------------


class RateLimitBody(BaseModel):
    """PUT /_sandbox/rate-limit: the bucket of one workspace, or of all when none is named."""

    requests_per_second: float | None = Field(default=None, gt=0)
    burst: int | None = Field(default=None, ge=1)
    workspace_id: str | None = None


class FaultsBody(BaseModel):
    """POST /_sandbox/faults."""

    latency_s: float | None = Field(default=None, ge=0)
    error_rate: float | None = Field(default=None, ge=0, le=1)
    fail_ids: list[str] | None = None


# --- the app -----------------------------------------------------------------------------------


# The app's title (it serves no API docs).
TITLE = "Notion API emulator"


def create_notion_app(store: NotionStore) -> FastAPI:
    """The emulator as an ASGI app over ``store``."""
    return emulator_app(TITLE, _api_router(store), _control_router(store), _error_answers(store))


def _api_router(store: NotionStore) -> APIRouter:
    router = APIRouter()
    router.include_router(_search_and_user_routes(store))
    router.include_router(_database_routes(store))
    router.include_router(_page_routes(store))
    router.include_router(_block_routes(store))

    @router.api_route("/v1/{rest:path}", methods=["GET", "POST", "PATCH", "PUT", "DELETE"])
    async def not_served(rest: str, request: Request) -> JSONResponse:
        await _enter(store, request)
        if _NOT_EMULATED.fullmatch(f"{request.method} {rest}"):
            raise NotionApiError(
                errors.INVALID_REQUEST,
                f"The emulator does not implement {request.method} /v1/{rest}.",
            )
        raise NotionApiError(errors.INVALID_REQUEST_URL)

    return router


def _search_and_user_routes(store: NotionStore) -> APIRouter:
    router = APIRouter(prefix="/v1")

    @router.post("/search")
    async def search(request: Request) -> JSONResponse:
        workspace, version = await _enter(store, request)
        hits, cursor = store.search(workspace, await _json_body(request), version)
        kind = "page_or_data_source" if version >= DATA_SOURCES_VERSION else "page_or_database"
        return _json(list_json([hit_json(store, h, version) for h in hits], cursor, kind))

    @router.get("/users/me")
    async def me(request: Request) -> JSONResponse:
        workspace, _ = await _enter(store, request)
        return _json(user_json(workspace, store.bot(workspace)))

    @router.get("/users")
    async def list_users(request: Request) -> JSONResponse:
        workspace, _ = await _enter(store, request)
        params = request.query_params
        users, cursor = store.users(workspace, params.get("start_cursor"), params.get("page_size"))
        return _json(list_json([user_json(workspace, u) for u in users], cursor, "user"))

    @router.get("/users/{user_id}")
    async def get_user(user_id: str, request: Request) -> JSONResponse:
        workspace, _ = await _enter(store, request)
        return _json(user_json(workspace, store.user(workspace, user_id)))

    return router


def _database_routes(store: NotionStore) -> APIRouter:
    router = APIRouter(prefix="/v1")

    @router.post("/databases/{database_id}/query")
    async def query_database(database_id: str, request: Request) -> JSONResponse:
        workspace, version = await _enter(store, request)
        if version >= DATA_SOURCES_VERSION:
            # 2025-09-03 moved database queries to the data sources (upgrade guide).
            raise NotionApiError(errors.INVALID_REQUEST_URL)
        database = store.database(workspace, database_id)
        return _query(store, database, version, await _json_body(request), "page_or_database")

    @router.get("/databases/{database_id}")
    async def get_database(database_id: str, request: Request) -> JSONResponse:
        workspace, version = await _enter(store, request)
        return _json(database_json(store.database(workspace, database_id), version))

    @router.post("/data_sources/{data_source_id}/query")
    async def query_data_source(data_source_id: str, request: Request) -> JSONResponse:
        workspace, version = await _enter(store, request, since=DATA_SOURCES_VERSION)
        database = store.data_source(workspace, data_source_id)
        body = await _json_body(request)
        return _query(store, database, version, body, "page_or_data_source")

    @router.get("/data_sources/{data_source_id}")
    async def get_data_source(data_source_id: str, request: Request) -> JSONResponse:
        workspace, version = await _enter(store, request, since=DATA_SOURCES_VERSION)
        return _json(data_source_json(store.data_source(workspace, data_source_id), version))

    return router


def _page_routes(store: NotionStore) -> APIRouter:
    router = APIRouter(prefix="/v1")

    @router.get("/pages/{page_id}")
    async def get_page(page_id: str, request: Request) -> JSONResponse:
        workspace, version = await _enter(store, request)
        return _json(page_json(store, store.page(workspace, page_id), version))

    @router.post("/pages")
    async def create_page(request: Request) -> JSONResponse:
        workspace, version = await _enter(store, request)
        raw = await request.body()
        page = store.create_page(workspace, _parse_json(raw), version, len(raw))
        return _json(page_json(store, page, version))

    @router.patch("/pages/{page_id}")
    async def update_page(page_id: str, request: Request) -> JSONResponse:
        workspace, version = await _enter(store, request)
        page = store.update_page(workspace, page_id, await _json_body(request), version)
        return _json(page_json(store, page, version))

    return router


def _block_routes(store: NotionStore) -> APIRouter:
    router = APIRouter(prefix="/v1")

    @router.get("/blocks/{block_id}/children")
    async def list_children(block_id: str, request: Request) -> JSONResponse:
        workspace, version = await _enter(store, request)
        params = request.query_params
        blocks, cursor = store.children(
            workspace, block_id, params.get("start_cursor"), params.get("page_size")
        )
        return _json(list_json([block_json(store, b, version) for b in blocks], cursor, "block"))

    @router.patch("/blocks/{block_id}/children")
    async def append_children(block_id: str, request: Request) -> JSONResponse:
        workspace, version = await _enter(store, request)
        raw = await request.body()
        created = store.append_children(workspace, block_id, _parse_json(raw), len(raw), version)
        return _json(list_json([block_json(store, b, version) for b in created], None, "block"))

    @router.get("/blocks/{block_id}")
    async def get_block(block_id: str, request: Request) -> JSONResponse:
        workspace, version = await _enter(store, request)
        return _json(node_json(store, store.node(workspace, block_id), version))

    @router.patch("/blocks/{block_id}")
    async def update_block(block_id: str, request: Request) -> JSONResponse:
        workspace, version = await _enter(store, request)
        block = store.update_block(workspace, block_id, await _json_body(request), version)
        return _json(block_json(store, block, version))

    @router.delete("/blocks/{block_id}")
    async def delete_block(block_id: str, request: Request) -> JSONResponse:
        workspace, version = await _enter(store, request)
        return _json(block_json(store, store.archive_block(workspace, block_id), version))

    return router


async def _enter(
    store: NotionStore, request: Request, *, since: str | None = None
) -> tuple[Workspace, str]:
    """The common preamble of every /v1 route: count, version, token, bucket, faults.

    ``since`` is the first Notion-Version that has the route; older versions get
    ``invalid_request_url``, as for a path that does not exist.
    """
    route = request.scope.get("route")
    template = getattr(route, "path", request.url.path)
    store.record_request(f"{request.method} {template}")
    if store.faults.latency_s > 0:
        await anyio.sleep(store.faults.latency_s)
    version = store.check_version(request.headers.get("notion-version"))
    workspace = store.authenticate(bearer_token(request))
    store.admit(workspace)
    fault = store.draw_fault(request.url.path)
    if fault is not None:
        raise fault
    if since is not None and version < since:
        raise NotionApiError(errors.INVALID_REQUEST_URL)
    return workspace, version


def _query(
    store: NotionStore, database: Database, version: str, body: dict[str, Any], kind: str
) -> JSONResponse:
    unknown = set(body) - _QUERY_FIELDS
    if unknown:
        raise validation(f"body.{sorted(unknown)[0]} should be not present.")
    pages, cursor = store.query(database, body)
    results = [page_json(store, p, version) for p in pages]
    return _json(list_json(results, cursor, kind))


def _control_router(store: NotionStore) -> APIRouter:
    router = common_controls(store)

    @router.get("/workspaces")
    async def workspaces() -> list[dict[str, Any]]:
        return store.workspaces()

    @router.put("/rate-limit")
    async def set_rate_limit(body: RateLimitBody) -> dict[str, Any]:
        return store.set_rate_limit(body.requests_per_second, body.burst, body.workspace_id)

    @router.get("/faults")
    async def faults() -> dict[str, Any]:
        return _faults_json(store)

    @router.post("/faults")
    async def set_faults(body: FaultsBody) -> dict[str, Any]:
        store.set_faults(body.latency_s, body.error_rate, body.fail_ids)
        return _faults_json(store)

    @router.delete("/faults")
    async def clear_faults() -> dict[str, Any]:
        store.clear_faults()
        return _faults_json(store)

    return router


def _faults_json(store: NotionStore) -> dict[str, Any]:
    faults = store.faults
    return {
        "latency_s": faults.latency_s,
        "error_rate": faults.error_rate,
        "fail_ids": sorted(faults.fail_ids),
    }


# --- Notion shapes -----------------------------------------------------------------------------


def _iso(moment: Any) -> str:
    # The real API reports times to the minute.
    return str(moment.strftime("%Y-%m-%dT%H:%M:00.000Z"))


def _user(user_id: str) -> dict[str, Any]:
    return {"object": "user", "id": user_id}


def _url(title: str, object_id: str) -> str:
    slug = "-".join(title.split())
    return f"https://www.notion.so/{slug}-{object_id.replace('-', '')}"


def _trash(archived: bool, version: str) -> dict[str, bool]:
    # 2026-03-11 dropped ``archived`` (deprecated since 2024) for ``in_trash``.
    if version >= POSITION_VERSION:
        return {"in_trash": archived}
    return {"archived": archived, "in_trash": archived}


def _edits(store: NotionStore, item: Page | Block) -> dict[str, Any]:
    """When and by whom an object was created and last edited (always the bot here)."""
    bot = store.workspace_of(item).bot_id
    return {
        "created_time": _iso(item.created_time),
        "last_edited_time": _iso(item.last_edited_time),
        "created_by": _user(bot),
        "last_edited_by": _user(bot),
    }


def _block_object(
    store: NotionStore,
    item: Page | Block,
    parent: dict[str, Any],
    version: str,
    kind: str,
    content: Any,
) -> dict[str, Any]:
    return {
        "object": "block",
        "id": item.id,
        "parent": parent,
        **_edits(store, item),
        "has_children": store.has_children(item),
        **_trash(item.archived, version),
        "type": kind,
        kind: content,
    }


def block_json(
    store: NotionStore, block: Block, version: str = DATA_SOURCES_VERSION
) -> dict[str, Any]:
    """A block object."""
    parent = {"type": block.parent_type, block.parent_type: block.parent_id}
    content = json.loads(json.dumps(block.content))  # callers must never alias the store
    return _block_object(store, block, parent, version, block.type, content)


def node_json(
    store: NotionStore, node: Page | Block, version: str = DATA_SOURCES_VERSION
) -> dict[str, Any]:
    """A block object; a page is seen as a ``child_page`` block."""
    if isinstance(node, Block):
        return block_json(store, node, version)
    parent = _page_parent(store.database_of(node), version)
    return _block_object(store, node, parent, version, "child_page", {"title": node.title})


def _page_parent(database: Database, version: str) -> dict[str, Any]:
    if version >= DATA_SOURCES_VERSION:
        return {
            "type": "data_source_id",
            "data_source_id": database.data_source_id,
            "database_id": database.id,
        }
    return {"type": "database_id", "database_id": database.id}


def page_json(store: NotionStore, page: Page, version: str) -> dict[str, Any]:
    """A page object (a row of the apartments database)."""
    database = store.database_of(page)
    # Callers must never alias the store's values.
    properties = json.loads(json.dumps(database.schema.render(page.values)))
    return {
        "object": "page",
        "id": page.id,
        **_edits(store, page),
        "cover": json.loads(json.dumps(page.cover)),
        "icon": json.loads(json.dumps(page.icon)),
        "parent": _page_parent(database, version),
        **_trash(page.archived, version),
        "properties": properties,
        "url": _url(page.title, page.id),
        "public_url": None,
    }


def _container(database: Database, object_id: str, version: str) -> dict[str, Any]:
    """What a database and its data source share."""
    return {
        "id": object_id,
        "created_time": _iso(database.created_time),
        "last_edited_time": _iso(database.last_edited_time),
        "title": rich_text_items(database.title),
        "description": [],
        "icon": None,
        "cover": None,
        "url": _url(database.title, object_id),
        "public_url": None,
        **_trash(False, version),
        "is_inline": False,
    }


def database_json(database: Database, version: str) -> dict[str, Any]:
    """A database object, shaped by the requested Notion-Version."""
    body: dict[str, Any] = {
        "object": "database",
        **_container(database, database.id, version),
        "parent": {"type": "workspace", "workspace": True},
    }
    if version >= DATA_SOURCES_VERSION:
        body["data_sources"] = [{"id": database.data_source_id, "name": database.title}]
    else:
        body["properties"] = database.schema.json()
    return body


def data_source_json(database: Database, version: str) -> dict[str, Any]:
    """The database's (single) data source object (2025-09-03 on)."""
    return {
        "object": "data_source",
        **_container(database, database.data_source_id, version),
        "parent": {"type": "database_id", "database_id": database.id},
        "database_parent": {"type": "workspace", "workspace": True},
        "properties": database.schema.json(),
    }


def hit_json(store: NotionStore, hit: SearchHit, version: str) -> dict[str, Any]:
    """A search result: a page, a database (before 2025-09-03) or a data source."""
    if isinstance(hit.target, Page):
        return page_json(store, hit.target, version)
    if version >= DATA_SOURCES_VERSION:
        return data_source_json(hit.target, version)
    return database_json(hit.target, version)


def user_json(workspace: Workspace, user: User) -> dict[str, Any]:
    """A user object: the integration's bot (owned by the workspace) or a person."""
    body: dict[str, Any] = {
        "object": "user",
        "id": user.id,
        "name": user.name,
        "avatar_url": None,
        "type": user.type,
    }
    if user.type == "bot":
        body["bot"] = {
            "owner": {"type": "workspace", "workspace": True},
            "workspace_name": workspace.name,
        }
    else:
        body["person"] = {"email": user.email}
    return body


def list_json(results: list[dict[str, Any]], next_cursor: str | None, kind: str) -> dict[str, Any]:
    """A paginated list object."""
    return {
        "object": "list",
        "results": results,
        "next_cursor": next_cursor,
        "has_more": next_cursor is not None,
        "type": kind,
        kind: {},
    }


# --- parsing and rendering ---------------------------------------------------------------------


def _json(payload: dict[str, Any], status: int = 200) -> JSONResponse:
    return JSONResponse({**payload, "request_id": new_request_id()}, status_code=status)


async def _json_body(request: Request) -> dict[str, Any]:
    return _parse_json(await request.body())


def _parse_json(raw: bytes) -> dict[str, Any]:
    return json_object(
        raw,
        not_json=lambda: NotionApiError(errors.INVALID_JSON),
        not_object=lambda: validation("body should be an object."),
    )


def _error_answers(store: NotionStore) -> ErrorAnswers:
    return ErrorAnswers(
        NotionApiError,
        invalid=errors.VALIDATION_ERROR,
        internal=errors.INTERNAL_SERVER_ERROR,
        no_route={404: errors.INVALID_REQUEST_URL, 405: errors.INVALID_REQUEST_URL},
        keeps_status=False,
        seen=lambda error: store.record_error(str(error.spec.code)),
    )
