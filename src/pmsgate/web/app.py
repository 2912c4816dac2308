"""Mounts the web application (accounts, API, console, static files) on the service's app."""

from __future__ import annotations

from pathlib import Path

from fastapi import Depends, FastAPI, Request
from fastapi.staticfiles import StaticFiles

from pmsgate.errors import PmsgateError

STATIC_DIR = Path(__file__).parent / "static"


async def require_web(request: Request) -> None:
    """Refuse web routes of an app that serves the gateway only (tests, embedded gateways)."""
    if getattr(request.app.state, "web", None) is None:
        raise PmsgateError(
            "The web application is not running in this process.",
            code="web_unavailable",
            status=503,
            hint="Start the service with `pmsgate serve`.",
        )


def install_web(app: FastAPI) -> None:
    """Add the web routers and ``/static`` to ``app`` (``app.state.web`` is set by its owner)."""
    from pmsgate.web import api, auth, console

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    guard = [Depends(require_web)]
    app.include_router(auth.router, dependencies=guard)
    app.include_router(api.router, dependencies=guard)
    app.include_router(console.router, dependencies=guard)
