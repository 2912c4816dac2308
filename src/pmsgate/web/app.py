"""Mounts the web application (accounts, API, console, static files) on the service's app."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from fastapi import Depends, FastAPI, Request
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from pmsgate.errors import PmsgateError

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
    from pmsgate.web import (
        admin_console,
        api,
        audit,
        auth,
        call_log_console,
        console,
        incident_console,
        locale,
        registry_console,
    )

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    # Every web route knows its reader (language, time zone) before it renders a word.
    guard = [Depends(require_web), Depends(locale.use_request_reader)]
    app.include_router(locale.router, dependencies=guard)
    app.include_router(auth.router, dependencies=guard)
    app.include_router(api.router, dependencies=guard)
    app.include_router(console.router, dependencies=guard)
    app.include_router(audit.router, dependencies=guard)
    app.include_router(admin_console.router, dependencies=guard)
    app.include_router(registry_console.router, dependencies=guard)
    app.include_router(incident_console.router, dependencies=guard)
    app.include_router(call_log_console.router, dependencies=guard)


# Paths whose errors a person reads in a browser: answered as pages, not JSON.
PAGE_PATHS = ("/console", "/login", "/logout", "/language")


def is_page(request: Request) -> bool:
    """Whether the request is for a console page (or one of its htmx fragments)."""
    path = request.url.path
    return path == "/" or any(path == p or path.startswith(p + "/") for p in PAGE_PATHS)


def login_redirect(request: Request, *, expired: bool = False) -> Response:
    """To the login page, back here afterwards (htmx: the whole page goes, not a fragment).

    ``expired``: the request came with a session that has ended; the sign-in page says so.
    """
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    location = f"/login?next={quote(target, safe='/')}" + ("&expired=1" if expired else "")
    if request.headers.get("HX-Request") == "true":
        # htmx would swap the login page into a panel; it follows HX-Redirect instead.
        return Response(status_code=200, headers={"HX-Redirect": location})
    return RedirectResponse(location, status_code=303)


def render_console_error(request: Request, error: PmsgateError) -> Response | None:
    """A console page's error as a page: sign in again, reload, or the error page."""
    if not is_page(request):
        return None
    if error.code == "not_authenticated":
        from pmsgate.web.auth import SESSION_COOKIE
        from pmsgate.web.kept_input import keep_on

        response = login_redirect(request, expired=bool(request.cookies.get(SESSION_COOKIE)))
        keep_on(response, request)  # what a refused form had typed, back after signing in
        return response
    if error.code == "csrf_failed" and request.headers.get("HX-Request") == "true":
        # A page older than its session: reload it, which brings a fresh token.
        return Response(status_code=200, headers={"HX-Refresh": "true"})
    from pmsgate.web.console import error_page

    return error_page(request, None, error)
