"""The OpenAPI document says what every route really takes and answers.

FastAPI documents the bodies of routes that declare a model and a 422 of its own shape
(``detail``). Two things differ here, and :func:`install_openapi` fixes both:

- every error is the service's envelope ``{"error": {"code", "message", "hint"}}``
  (:class:`ErrorBody`), with the statuses a route can answer (:data:`ERROR_STATUSES`,
  plus :data:`UPSTREAM_STATUSES` on the routes that call the booking system);
- the gateway's tool and operation routes read their body as raw JSON (so the input
  rules and the payload checks run the same for HTTP and MCP); their schemas come
  from the catalogue and the payload models as ``openapi_extra`` (see
  ``pmsgate.gateway.http``), and the models' shared definitions are added to
  ``components.schemas`` here (:func:`schema_of`). Their 200 answers are the declared
  answer models (``responses``, documentation only: the routes send bytes they render
  themselves; docs/gateway.md, "Typed answers"), whose fields only some answers carry are
  declared with :func:`sometimes`.

Every bound those routes enforce is stated (docs/gateway.md, "Inputs and their bounds"):
their body schemas and the shared definitions pass through the function registered for
their path prefix (:func:`register_body_bounds`; the gateway's states the date years it
accepts on the day the document is made, so the document is remade when the day changes,
by the app's clock).

The document is checked by a bounded schemathesis run in the test suite
(``tests/e2e/test_openapi_fuzz.py``): no 5xx, no answer outside what is documented, no
schema-compliant request refused.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, Field

from pmsgate.boundary import TEXT_PATTERN
from pmsgate.clock import Clock, SystemClock

# Every status a route may answer with the error envelope, and what it means.
ERROR_STATUSES: dict[int, str] = {
    400: "The body could not be read.",
    401: "Missing or wrong key or token.",
    403: "Not allowed for this key, role or integration.",
    404: "Nothing of that name (tool, operation, facility, key, customer).",
    409: "Conflicts with the current state (an idempotency key in use, a job running).",
    413: "The body is larger than the route accepts.",
    422: "The request breaks the documented schema or an input rule "
    "(invalid_characters, integer_out_of_range, json_too_deep, ...).",
    429: "Too many attempts; see Retry-After.",
    503: "A dependency is unavailable or the upstream budget is spent; see Retry-After.",
}
# Routes that call the booking system also pass on its failures.
UPSTREAM_STATUSES: dict[int, str] = {
    502: "The booking system answered with an error or something unreadable.",
    504: "The booking system did not answer in time.",
}
UPSTREAM_PREFIXES = ("/v1/tools", "/v1/operations", "/admin/facilities/{hotel_id}/reconnect")

_shared_schemas: dict[str, Any] = {}
# Path prefix → the function stating, on a day, the bounds of a body schema under it.
BodyBounds = Callable[[dict[str, Any], dt.date], dict[str, Any]]
_body_bounds: dict[str, BodyBounds] = {}
Refine = Callable[[str, dict[str, Any]], dict[str, Any]]


def register_body_bounds(prefix: str, bounds: BodyBounds) -> None:
    """State in the body schemas of the routes under ``prefix`` (and in the shared
    definitions) what ``bounds(schema, today)`` adds: the bounds those routes enforce."""
    _body_bounds[prefix] = bounds


class ErrorDetail(BaseModel):
    """What went wrong, and what to do."""

    code: str = Field(description="A stable, machine-readable code.")
    message: str = Field(description="What went wrong, in words.")
    hint: str = Field(description="What to do about it.")


class ErrorBody(BaseModel):
    """Every error answer."""

    error: ErrorDetail


def _no_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


def sometimes(description: str) -> Any:
    """A field of an answer model that only some answers carry: left out otherwise, never sent
    as ``null`` (unless its type says so). In the schema: not required, no ``default``."""
    return Field(default=None, description=description, json_schema_extra=_no_default)


def schema_of(model: type[BaseModel], refine: Refine | None = None) -> dict[str, Any]:
    """``model``'s JSON Schema for an OpenAPI body; its nested definitions are kept for
    ``components.schemas`` (referenced from there). ``refine(title, schema)`` states in the
    model's schema and in each definition what pydantic's schema leaves out."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    definitions = schema.pop("$defs", {})
    if refine is not None:
        schema = refine(str(schema.get("title", "")), schema)
        definitions = {name: refine(name, sub) for name, sub in definitions.items()}
    _shared_schemas.update(definitions)
    return schema


def json_body(schema: dict[str, Any], *, required: bool = False) -> dict[str, Any]:
    """``openapi_extra`` documenting a JSON request body of ``schema``."""
    return {
        "requestBody": {
            "required": required,
            "content": {"application/json": {"schema": schema}},
        }
    }


def _today(app: FastAPI) -> dt.date:
    # The clock of the container the app serves (tests and the demo pass theirs), else the
    # system's: the bounds stated are the ones the gateway enforces on that day.
    container = getattr(app.state, "container", None)
    clock: Clock = getattr(container, "clock", None) or SystemClock()
    return clock.now().date()


def _bound_bodies(document: dict[str, Any], today: dt.date) -> None:
    """State the bounds of :func:`register_body_bounds` in the registered routes' bodies."""
    for prefix, bounds in _body_bounds.items():
        for path, operations in document.get("paths", {}).items():
            if not path.startswith(prefix):
                continue
            for operation in operations.values():
                content = operation.get("requestBody", {}).get("content", {})
                for media in content.values():
                    if "schema" in media:
                        media["schema"] = bounds(media["schema"], today)
        components = document["components"]["schemas"]
        for name in _shared_schemas:
            components[name] = bounds(components[name], today)


_COMPONENTS = "#/components/schemas/"


def _no_control_characters(schema: Any, components: dict[str, Any], seen: set[str]) -> None:
    """State "no control characters" on every text of ``schema`` that has no rule of its
    own (pattern, enum, const, format), following ``$ref`` into ``components`` once each."""
    if isinstance(schema, list):
        for item in schema:
            _no_control_characters(item, components, seen)
        return
    if not isinstance(schema, dict):
        return
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(_COMPONENTS) and ref not in seen:
        seen.add(ref)
        _no_control_characters(components.get(ref.removeprefix(_COMPONENTS)), components, seen)
    for key, value in schema.items():
        if key not in {"default", "examples", "const", "enum"}:
            _no_control_characters(value, components, seen)
    if schema.get("type") == "string" and not (
        {"pattern", "enum", "const", "format"} & set(schema)
    ):
        schema["pattern"] = TEXT_PATTERN


def _state_text_rules(document: dict[str, Any]) -> None:
    """Every route refuses control characters in its path and its body's text (boundary.py):
    stated on every path parameter and request body the gateway's own rules do not cover."""
    components = document.get("components", {}).get("schemas", {})
    seen: set[str] = set()
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if parameter.get("in") == "path":
                    _no_control_characters(parameter.get("schema"), components, seen)
            for media in operation.get("requestBody", {}).get("content", {}).values():
                _no_control_characters(media.get("schema"), components, seen)


def install_openapi(app: FastAPI) -> None:
    """Make ``app.openapi()`` document the error envelope on every route, and the bounds
    of the gateway's bodies as they are today (remade when the day changes)."""
    made_on: list[dt.date] = []

    def openapi() -> dict[str, Any]:
        today = _today(app)
        if app.openapi_schema is not None and made_on == [today]:
            return app.openapi_schema
        made_on[:] = [today]
        document = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        components = document.setdefault("components", {}).setdefault("schemas", {})
        components.update(_shared_schemas)
        _bound_bodies(document, today)
        _state_text_rules(document)
        body = ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}")
        components.update(body.pop("$defs", {}))
        components["ErrorBody"] = body
        for name in ("HTTPValidationError", "ValidationError"):
            components.pop(name, None)
        error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
        for path, operations in document.get("paths", {}).items():
            statuses = dict(ERROR_STATUSES)
            if path.startswith(UPSTREAM_PREFIXES):
                statuses.update(UPSTREAM_STATUSES)
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                for status, description in statuses.items():
                    responses[str(status)] = {"description": description, "content": error}
        app.openapi_schema = document
        return document

    app.openapi = openapi  # type: ignore[method-assign]
