"""What the emulators' apps share: the app's frame and the controls every emulator has.

:func:`emulator_app` mounts an emulator's API and its ``/_sandbox/`` controls on an
app without API docs, and answers every error in the emulator's error body (which of
its errors answers what FastAPI refuses: :class:`ErrorAnswers`); :func:`common_controls`
are the controls every emulator has (reset, stats, the clock), next to which each adds
its own (faults, limits, workspaces, facilities …); :func:`request_error_text` words
FastAPI's refusal of a request for the emulator's own error body.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from pmsgate.clock import Clock
from pmsgate.sandbox.core import EmulatedError, ErrorRow


@dataclass(frozen=True)
class ErrorAnswers:
    """Which rows of an emulator's error table answer what FastAPI itself refuses.

    ``invalid`` answers a request FastAPI refused (its words from :func:`request_error_text`),
    ``internal`` an emulator bug, ``no_route`` a route refused with one of its statuses
    (404, 405); any other refusal is the ``invalid`` row with FastAPI's detail, at
    FastAPI's status when ``keeps_status``. ``seen`` is told of every error answered.
    """

    raised: type[EmulatedError]
    invalid: ErrorRow
    internal: ErrorRow
    no_route: Mapping[int, ErrorRow]
    keeps_status: bool = True
    seen: Callable[[EmulatedError], None] = lambda error: None

    def refused(self, status: int, detail: str) -> EmulatedError:
        """The error that answers a route FastAPI refused with ``status`` and ``detail``."""
        if status in self.no_route:
            return self.raised(self.no_route[status])
        kept = status if self.keeps_status else self.invalid.status
        return self.raised(ErrorRow(self.invalid.code, kept, detail))


def emulator_app(title: str, api: APIRouter, controls: APIRouter, answers: ErrorAnswers) -> FastAPI:
    """An emulator's ASGI app: its API, its controls under ``/_sandbox``, its error answers."""
    app = FastAPI(title=title, docs_url=None, redoc_url=None, openapi_url=None)
    install_error_answers(app, answers)
    app.include_router(api)
    app.include_router(controls, prefix="/_sandbox")
    return app


def install_error_answers(app: FastAPI, answers: ErrorAnswers) -> None:
    """Every error, the emulator's own or FastAPI's, answered in the emulator's error body.

    An emulator bug too answers with the error body, never a bare traceback page.
    """

    def render(error: EmulatedError) -> JSONResponse:
        answers.seen(error)
        return error.response()

    @app.exception_handler(answers.raised)
    async def emulated(request: Request, exc: EmulatedError) -> JSONResponse:
        return render(exc)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        return render(answers.raised(answers.invalid, request_error_text(exc)))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return render(answers.refused(exc.status_code, str(exc.detail)))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        return render(answers.raised(answers.internal))


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
