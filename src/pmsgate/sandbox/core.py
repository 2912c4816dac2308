"""What the three emulators share (as moto's ``core`` is for its services).

Each emulator keeps its own wire details — its error table (``errors.py``: rows of
status, code and default message, in the real system's words) and the body its
errors answer with — and takes the rest from here:

- :class:`EmulatedError`, the base of every emulator's error: raised anywhere in a
  store or a route with a row of the table, an optional message and headers, and
  rendered by the emulator app's one exception handler;
- :func:`bearer_token` and :func:`json_object`, how a request's credentials and
  JSON body are read, each emulator choosing which of its errors a bad body is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from starlette.requests import Request


class ErrorRow(Protocol):
    """One row of an emulator's error table."""

    @property
    def status(self) -> int: ...

    @property
    def message(self) -> str: ...


RowT = TypeVar("RowT", bound=ErrorRow)


class EmulatedError(Exception, Generic[RowT]):
    """An error answer of an emulated upstream; each emulator's subclass renders the body."""

    def __init__(
        self,
        spec: RowT,
        message: str | None = None,
        *,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message or spec.message)
        self.spec = spec
        self.message = message or spec.message
        self.headers = headers or {}


def bearer_token(request: Request) -> str | None:
    """The token of an ``Authorization: Bearer`` header, or None."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


def json_object(
    raw: bytes,
    *,
    not_json: Callable[[], Exception],
    not_object: Callable[[], Exception],
) -> dict[str, Any]:
    """A request body as a JSON object (an empty body is ``{}``), or the emulator's error."""
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise not_json() from None
    if not isinstance(body, dict):
        raise not_object()
    return body
