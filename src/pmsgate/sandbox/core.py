"""What the three emulators share (as moto's ``core`` is for its services).

Each emulator keeps its own wire details — its error table (``errors.py``: rows of
status, code and default message, in the real system's words) and the body its
errors answer with — and takes the rest from here:

- :class:`ErrorRow`, one row of an error table, and :class:`EmulatedError`, the base
  of every emulator's error: raised anywhere in a store or a route with a row of the
  table, an optional message and headers, and rendered by the emulator app's one
  exception handler (:func:`~pmsgate.sandbox.emulator_app.install_error_answers`);
- :func:`bearer_token` and :func:`json_object`, how a request's credentials and
  JSON body are read, each emulator choosing which of its errors a bad body is;
- :func:`set_given`, how a test control changes only the switches it was given.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse

T = TypeVar("T")
ModelT = TypeVar("ModelT", bound=BaseModel)


@dataclass(frozen=True)
class ErrorRow:
    """One row of an emulator's error table: its code (the wire's, or a name for the
    stats where the wire has none), its HTTP status and its default message."""

    code: str | int
    status: int
    message: str


class EmulatedError(Exception):
    """An error answer of an emulated upstream; each emulator's subclass renders the body."""

    def __init__(
        self,
        spec: ErrorRow,
        message: str | None = None,
        *,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message or spec.message)
        self.spec = spec
        self.message = message or spec.message
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        """The JSON error body, in the emulated upstream's shape."""
        raise NotImplementedError

    def response(self) -> JSONResponse:
        """The error answer: its body, the row's status and the error's headers."""
        return JSONResponse(self.body(), status_code=self.spec.status, headers=self.headers)


def set_given(target: T, **values: Any) -> T:
    """``target`` with the values given (not None) set on it: how a control changes switches."""
    for name, value in values.items():
        if value is not None:
            setattr(target, name, value)
    return target


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


async def json_body(request: Request, refuse: Callable[[str], Exception]) -> dict[str, Any]:
    """A request's body as a JSON object (:func:`json_object`), refused in plain words."""
    return json_object(
        await request.body(),
        not_json=lambda: refuse("the body is not valid JSON"),
        not_object=lambda: refuse("the body must be a JSON object"),
    )


def validated(
    model: type[ModelT],
    body: dict[str, Any],
    refuse: Callable[[str], Exception],
    *,
    unknown_field: str | None = None,
) -> ModelT:
    """``body`` as ``model``, or ``refuse("<where>: <what>")`` for the first field at fault.

    ``unknown_field`` words a field the model forbids (else pydantic's own words).
    """
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        extra = unknown_field is not None and first["type"] == "extra_forbidden"
        raise refuse(f"{where}: {unknown_field if extra else first['msg']}") from None
