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
import uuid
from typing import Any

import anyio
from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from pmsgate.sandbox.notes import errors
from pmsgate.sandbox.notes.errors import NotesApiError, validation
from pmsgate.sandbox.notes.seed import ADDRESS_PROPERTY, ROOM_TYPE_PROPERTY, TITLE_PROPERTY
from pmsgate.sandbox.notes.store import (
    DATA_SOURCES_VERSION,
    Block,
    Database,
    NotesStore,
    Page,
    Workspace,
)

# Query-body fields the emulator accepts; filters and sorts are refused, not silently ignored.
_QUERY_FIELDS = frozenset({"start_cursor", "page_size", "filter", "sorts", "archived", "in_trash"})


# --- control bodies ----------------------------------------------------------------------------


class AdvanceBody(BaseModel):
    """POST /_sandbox/clock/advance."""

    seconds: float = Field(ge=0)


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


def create_notes_app(store: NotesStore) -> FastAPI:
    """The emulator as an ASGI app over ``store``."""
    app = FastAPI(title="Notion API emulator", docs_url=None, redoc_url=None, openapi_url=None)
    _install_error_handlers(app, store)
    app.include_router(_api_router(store))
    app.include_router(_control_router(store), prefix="/_sandbox")
    return app


def _api_router(store: NotesStore) -> APIRouter:
    router = APIRouter()

    @router.post("/v1/databases/{database_id}/query")
    async def query_database(database_id: str, request: Request) -> JSONResponse:
        workspace, version = await _enter(store, request)
        database = store.database(workspace, database_id)
        return _query(store, database, version, await _json_body(request))

    @router.get("/v1/databases/{database_id}")
    async def get_database(database_id: str, request: Request) -> JSONResponse:
        workspace, version = await _enter(store, request)
        return _json(database_json(store.database(workspace, database_id), version))

    @router.post("/v1/data_sources/{data_source_id}/query")
    async def query_data_source(data_source_id: str, request: Request) -> JSONResponse:
        workspace, version = await _enter(store, request)
        database = store.data_source(workspace, data_source_id)
        return _query(store, database, version, await _json_body(request))

    @router.get("/v1/pages/{page_id}")
    async def get_page(page_id: str, request: Request) -> JSONResponse:
        workspace, version = await _enter(store, request)
        return _json(page_json(store, store.page(workspace, page_id), version))

    @router.get("/v1/blocks/{block_id}/children")
    async def list_children(block_id: str, request: Request) -> JSONResponse:
        workspace, _ = await _enter(store, request)
        params = request.query_params
        blocks, cursor = store.children(
            workspace, block_id, params.get("start_cursor"), params.get("page_size")
        )
        return _json(list_json([block_json(store, b) for b in blocks], cursor, "block"))

    @router.patch("/v1/blocks/{block_id}/children")
    async def append_children(block_id: str, request: Request) -> JSONResponse:
        workspace, _ = await _enter(store, request)
        raw = await request.body()
        created = store.append_children(workspace, block_id, _parse_json(raw), len(raw))
        return _json(list_json([block_json(store, b) for b in created], None, "block"))

    @router.get("/v1/blocks/{block_id}")
    async def get_block(block_id: str, request: Request) -> JSONResponse:
        workspace, _ = await _enter(store, request)
        return _json(node_json(store, store.node(workspace, block_id)))

    @router.patch("/v1/blocks/{block_id}")
    async def update_block(block_id: str, request: Request) -> JSONResponse:
        workspace, _ = await _enter(store, request)
        block = store.update_block(workspace, block_id, await _json_body(request))
        return _json(block_json(store, block))

    @router.delete("/v1/blocks/{block_id}")
    async def delete_block(block_id: str, request: Request) -> JSONResponse:
        workspace, _ = await _enter(store, request)
        return _json(block_json(store, store.archive_block(workspace, block_id)))

    return router


async def _enter(store: NotesStore, request: Request) -> tuple[Workspace, str]:
    """The common preamble of every /v1 route: count, version, token, bucket, faults."""
    route = request.scope.get("route")
    template = getattr(route, "path", request.url.path)
    store.record_request(f"{request.method} {template}")
    if store.faults.latency_s > 0:
        await anyio.sleep(store.faults.latency_s)
    version = store.check_version(request.headers.get("notion-version"))
    workspace = store.authenticate(_bearer_token(request))
    store.admit(workspace)
    fault = store.draw_fault(request.url.path)
    if fault is not None:
        raise fault
    return workspace, version


def _query(
    store: NotesStore, database: Database, version: str, body: dict[str, Any]
) -> JSONResponse:
    unknown = set(body) - _QUERY_FIELDS
    if unknown:
        raise validation(f"body.{sorted(unknown)[0]} should be not present.")
    if body.get("filter") or body.get("sorts"):
        raise validation("The emulator does not support filter or sorts; query without them.")
    pages, cursor = store.query(database, body.get("start_cursor"), body.get("page_size"))
    results = [page_json(store, p, version) for p in pages]
    return _json(list_json(results, cursor, "page_or_database"))


def _control_router(store: NotesStore) -> APIRouter:
    router = APIRouter()

    @router.post("/reset")
    async def reset() -> dict[str, Any]:
        store.reset()
        return {"ok": True}

    @router.get("/workspaces")
    async def workspaces() -> list[dict[str, Any]]:
        return store.workspaces()

    @router.get("/stats")
    async def stats() -> dict[str, Any]:
        return store.stats.as_dict()

    @router.get("/clock")
    async def clock() -> dict[str, Any]:
        return {"now": store.clock.now().isoformat()}

    @router.post("/clock/advance")
    async def advance_clock(body: AdvanceBody) -> dict[str, Any]:
        return {"now": store.advance_clock(body.seconds).isoformat()}

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


def _faults_json(store: NotesStore) -> dict[str, Any]:
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


def _rich(text: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "text",
            "text": {"content": text, "link": None},
            "annotations": {
                "bold": False,
                "italic": False,
                "strikethrough": False,
                "underline": False,
                "code": False,
                "color": "default",
            },
            "plain_text": text,
            "href": None,
        }
    ]


def _url(title: str, object_id: str) -> str:
    slug = "-".join(title.split())
    return f"https://www.notion.so/{slug}-{object_id.replace('-', '')}"


def block_json(store: NotesStore, block: Block) -> dict[str, Any]:
    """A block object."""
    bot = store.workspace_of(block).bot_id
    content = json.loads(json.dumps(block.content))  # callers must never alias the store
    return {
        "object": "block",
        "id": block.id,
        "parent": {"type": block.parent_type, block.parent_type: block.parent_id},
        "created_time": _iso(block.created_time),
        "last_edited_time": _iso(block.last_edited_time),
        "created_by": _user(bot),
        "last_edited_by": _user(bot),
        "has_children": store.has_children(block),
        "archived": block.archived,
        "in_trash": block.archived,
        "type": block.type,
        block.type: content,
    }


def node_json(store: NotesStore, node: Page | Block) -> dict[str, Any]:
    """A block object; a page is seen as a ``child_page`` block."""
    if isinstance(node, Block):
        return block_json(store, node)
    bot = store.workspace_of(node).bot_id
    return {
        "object": "block",
        "id": node.id,
        "parent": {"type": "database_id", "database_id": node.database_id},
        "created_time": _iso(node.created_time),
        "last_edited_time": _iso(node.last_edited_time),
        "created_by": _user(bot),
        "last_edited_by": _user(bot),
        "has_children": store.has_children(node),
        "archived": node.archived,
        "in_trash": node.archived,
        "type": "child_page",
        "child_page": {"title": node.title},
    }


def page_json(store: NotesStore, page: Page, version: str) -> dict[str, Any]:
    """A page object (a row of the apartments database)."""
    database = store.database_of(page)
    bot = store.workspace_of(page).bot_id
    parent: dict[str, Any]
    if version >= DATA_SOURCES_VERSION:
        parent = {
            "type": "data_source_id",
            "data_source_id": database.data_source_id,
            "database_id": database.id,
        }
    else:
        parent = {"type": "database_id", "database_id": database.id}
    return {
        "object": "page",
        "id": page.id,
        "created_time": _iso(page.created_time),
        "last_edited_time": _iso(page.last_edited_time),
        "created_by": _user(bot),
        "last_edited_by": _user(bot),
        "cover": None,
        "icon": None,
        "parent": parent,
        "archived": page.archived,
        "in_trash": page.archived,
        "properties": {
            TITLE_PROPERTY: {"id": "title", "type": "title", "title": _rich(page.title)},
            ROOM_TYPE_PROPERTY: {"id": "pmsR", "type": "number", "number": page.room_type_id},
            ADDRESS_PROPERTY: {"id": "addr", "type": "rich_text", "rich_text": _rich(page.address)},
        },
        "url": _url(page.title, page.id),
        "public_url": None,
    }


def database_json(database: Database, version: str) -> dict[str, Any]:
    """A database object, shaped by the requested Notion-Version."""
    body: dict[str, Any] = {
        "object": "database",
        "id": database.id,
        "created_time": _iso(database.created_time),
        "last_edited_time": _iso(database.last_edited_time),
        "title": _rich(database.title),
        "description": [],
        "icon": None,
        "cover": None,
        "parent": {"type": "workspace", "workspace": True},
        "url": _url(database.title, database.id),
        "public_url": None,
        "archived": False,
        "in_trash": False,
        "is_inline": False,
    }
    if version >= DATA_SOURCES_VERSION:
        body["data_sources"] = [{"id": database.data_source_id, "name": database.title}]
    else:
        body["properties"] = {
            TITLE_PROPERTY: {"id": "title", "name": TITLE_PROPERTY, "type": "title", "title": {}},
            ROOM_TYPE_PROPERTY: {
                "id": "pmsR",
                "name": ROOM_TYPE_PROPERTY,
                "type": "number",
                "number": {"format": "number"},
            },
            ADDRESS_PROPERTY: {
                "id": "addr",
                "name": ADDRESS_PROPERTY,
                "type": "rich_text",
                "rich_text": {},
            },
        }
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


def _request_id() -> str:
    return str(uuid.uuid4())


def _json(payload: dict[str, Any], status: int = 200) -> JSONResponse:
    return JSONResponse({**payload, "request_id": _request_id()}, status_code=status)


def _bearer_token(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


async def _json_body(request: Request) -> dict[str, Any]:
    return _parse_json(await request.body())


def _parse_json(raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise NotesApiError(errors.INVALID_JSON) from None
    if not isinstance(body, dict):
        raise validation("body should be an object.")
    return body


def _install_error_handlers(app: FastAPI, store: NotesStore) -> None:
    def render(exc: NotesApiError) -> JSONResponse:
        store.record_error(exc.spec.code)
        return JSONResponse(
            exc.body(_request_id()), status_code=exc.spec.status, headers=exc.headers
        )

    @app.exception_handler(NotesApiError)
    async def notes_error(request: Request, exc: NotesApiError) -> JSONResponse:
        return render(exc)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(part) for part in first.get("loc", ())) or "body"
        return render(validation(f"{where}: {first.get('msg', 'invalid')}"))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code in (404, 405):
            return render(NotesApiError(errors.INVALID_REQUEST_URL))
        return render(validation(str(exc.detail)))

    # An emulator bug still answers with the error object, never a bare traceback page.
    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        return render(NotesApiError(errors.INTERNAL_SERVER_ERROR))
