"""What the emulators' apps share: the app's frame and the controls every emulator has.

:func:`emulator_app` mounts an emulator's API and its ``/_sandbox/`` controls on an
app without API docs; :func:`common_controls` are the controls every emulator has
(reset, stats, the clock), next to which each adds its own (faults, limits,
workspaces, facilities …); :func:`request_error_text` words FastAPI's refusal of a
request for the emulator's own error body.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from fastapi import APIRouter, FastAPI
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field

from pmsgate.clock import Clock


def emulator_app(
    title: str, api: APIRouter, controls: APIRouter, install_handlers: Callable[[FastAPI], None]
) -> FastAPI:
    """An emulator's ASGI app: its API, its controls under ``/_sandbox``, its error handlers."""
    app = FastAPI(title=title, docs_url=None, redoc_url=None, openapi_url=None)
    install_handlers(app)
    app.include_router(api)
    app.include_router(controls, prefix="/_sandbox")
    return app


def request_error_text(exc: RequestValidationError) -> str:
    """``<where>: <what>`` of the first fault FastAPI found in a request."""
    first = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(part) for part in first.get("loc", ())) or "body"
    return f"{where}: {first.get('msg', 'invalid')}"


class AdvanceBody(BaseModel):
    """POST /_sandbox/clock/advance."""

    seconds: float = Field(ge=0)


class _Stats(Protocol):
    def as_dict(self) -> dict[str, Any]: ...


class Controlled(Protocol):
    """What the common controls need of an emulator's store."""

    @property
    def clock(self) -> Clock: ...

    @property
    def stats(self) -> _Stats: ...

    def reset(self) -> None: ...

    def advance_clock(self, seconds: float) -> datetime: ...


def common_controls(store: Controlled) -> APIRouter:
    """``POST /reset``, ``GET /stats``, ``GET /clock`` and ``POST /clock/advance``."""
    router = APIRouter()

    @router.post("/reset")
    async def reset() -> dict[str, Any]:
        store.reset()
        return {"ok": True}

    @router.get("/stats")
    async def stats() -> dict[str, Any]:
        return store.stats.as_dict()

    @router.get("/clock")
    async def clock() -> dict[str, Any]:
        return {"now": store.clock.now().isoformat()}

    @router.post("/clock/advance")
    async def advance_clock(body: AdvanceBody) -> dict[str, Any]:
        return {"now": store.advance_clock(body.seconds).isoformat()}

    return router
