"""``/docs`` (Swagger UI) and ``/redoc`` that work without internet access.

FastAPI's own pages load Swagger UI and ReDoc from a CDN: on a machine without
internet (or behind a proxy that blocks it) they stay blank. Here the same pages
(FastAPI's ``get_swagger_ui_html`` / ``get_redoc_html``) point at copies of those
assets served by the app itself, under :data:`ASSETS_URL`. The copies come from the
``fastapi-offline`` package (Swagger UI 5 — needed for the OpenAPI 3.1 document FastAPI
writes — and ReDoc 2, under their Apache-2.0 and MIT licences; the package's own is
MIT), so they are updated like any dependency instead of vendored by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS_URL = "/docs"
REDOC_URL = "/redoc"
OAUTH2_REDIRECT_URL = "/docs/oauth2-redirect"
ASSETS_URL = "/docs/assets"
ASSETS_DIR = Path(fastapi_offline.__file__).parent / "static"
# The pages may load nothing from elsewhere: ReDoc's footer, for one, links a logo on
# its vendor's CDN. (The inline script is the pages' own start-up code; ReDoc's search
# runs in a worker made from a blob.)
PAGE_POLICY = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self' 'unsafe-inline'; "
    "style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; "
    "worker-src 'self' blob:; connect-src 'self'; frame-ancestors 'self'; base-uri 'self'"
}


def install_api_docs(app: FastAPI) -> None:
    """Add ``/docs``, ``/docs/oauth2-redirect``, ``/redoc`` and their assets to ``app``.

    The app must be created with ``docs_url=None, redoc_url=None`` (FastAPI's CDN pages
    off) and an ``openapi_url``. URLs are made relative to the request's ``root_path``,
    so the pages also work behind a proxy that serves the app under a prefix.
    """
    openapi_url = app.openapi_url
    if openapi_url is None:
        raise ValueError("the API documentation pages need the app's openapi_url")
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS_DIR), name="api-docs-assets")

    @app.get(DOCS_URL, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        return _offline_page(
            request,
            partial(get_swagger_ui_html, title=f"{app.title} - Swagger UI"),
            openapi_url=openapi_url,
            oauth2_redirect_url=OAUTH2_REDIRECT_URL,
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
        )

    @app.get(OAUTH2_REDIRECT_URL, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get(REDOC_URL, include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        return _offline_page(
            request,
            partial(get_redoc_html, title=f"{app.title} - ReDoc", with_google_fonts=False),
            openapi_url=openapi_url,
            redoc_js_url=f"{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS_URL}/favicon.png",
        )


def _offline_page(
    request: Request, build: Callable[..., HTMLResponse], **urls: str
) -> HTMLResponse:
    """One documentation page: each of ``urls`` under the request's ``root_path``, and
    :data:`PAGE_POLICY` so that it loads nothing from elsewhere."""
    root_path = request.scope.get("root_path", "")
    page = build(**{name: f"{root_path}{url}" for name, url in urls.items()})
    page.headers.update(PAGE_POLICY)
    return page
