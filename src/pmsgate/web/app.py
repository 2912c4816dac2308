"""Mounts the web application (accounts, API, console, static files) on the service's app.

The routers (one module each) import none of each other: what several pages share is in
:mod:`pmsgate.web.pages` (rendering, the error page, the sign-in redirect),
:mod:`pmsgate.web.customer_pages` and :mod:`pmsgate.web.admin_pages` (what a customer's
page is rendered with). Their errors become pages through one exception handler,
:func:`pmsgate.web.pages.render_console_error`.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import Depends, FastAPI, Request
from fastapi.staticfiles import StaticFiles

from pmsgate.errors import PmsgateError
from pmsgate.web import (
    admin_console,
    api,
    audit,
    call_log_console,
    console,
    incident_console,
    locale,
    login,
    oauth_console,
    registry_console,
    webhooks_console,
)

STATIC_DIR = Path(__file__).parent / "static"


async def require_web(request: Request) -> None:
    """Refuse web routes of an app that serves no container yet (its lifespan not entered)."""
    if getattr(request.app.state, "container", None) is None:
        raise PmsgateError(
            "The web application is not running in this process.",
            code="web_unavailable",
            status=503,
            hint="Start the service with `pmsgate serve`.",
        )


def install_web(app: FastAPI) -> None:
    """Add the web routers and ``/static`` to ``app``.

    Their dependencies read ``app.state.container``, set by the app's owner.
    """
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    # Every web route knows its reader (language, time zone) before it renders a word.
    guard = [Depends(require_web), Depends(locale.use_request_reader)]
    app.include_router(locale.router, dependencies=guard)
    app.include_router(login.router, dependencies=guard)
    app.include_router(api.router, dependencies=guard)
    app.include_router(console.router, dependencies=guard)
    app.include_router(audit.router, dependencies=guard)
    app.include_router(admin_console.router, dependencies=guard)
    app.include_router(registry_console.router, dependencies=guard)
    app.include_router(incident_console.router, dependencies=guard)
    app.include_router(call_log_console.router, dependencies=guard)
    app.include_router(oauth_console.router, dependencies=guard)
    app.include_router(webhooks_console.router, dependencies=guard)
