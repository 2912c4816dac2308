"""The gateway's HTTP API: ``/v1/tools`` and ``/v1/operations`` for callers with a gateway key."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse

from pmsgate.boundary import loads_json
from pmsgate.errors import InvalidInput, Unauthorized
from pmsgate.gateway.facilities import FacilityView

router = APIRouter(prefix="/v1", tags=["gateway"])


def bearer_key(authorization: str | None) -> str:
    """The gateway key from an ``Authorization: Bearer`` header, or a 401."""
    scheme, _, key = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise Unauthorized(
            "A gateway key is required.",
            code="missing_gateway_key",
            hint="Send `Authorization: Bearer <gateway key>`; an admin mints one with "
            "`pmsgate facilities mint-key HOTEL_ID`.",
        )
    return key.strip()


async def _facility(request: Request, authorization: str | None) -> FacilityView:
    services = request.app.state.services
    facility: FacilityView = await services.facilities.authenticate(bearer_key(authorization))
    return facility


async def _json_object(request: Request) -> dict[str, Any]:
    """The body as a JSON object, checked by the input rules (pmsgate.boundary)."""
    raw = await request.body()
    if not raw.strip():
        return {}
    body = loads_json(raw)
    if not isinstance(body, dict):
        raise InvalidInput(
            "The body must be a JSON object.", code="invalid_json", hint="Wrap arguments in {…}."
        )
    return body


@router.get("/tools")
async def list_tools(request: Request) -> dict[str, Any]:
    """The six tools with their JSON Schemas."""
    tools = request.app.state.services.tools
    return {
        "tools": [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema()}
            for t in tools.definitions.values()
        ]
    }


@router.post("/tools/{name}")
async def call_tool(
    name: str, request: Request, authorization: str | None = Header(default=None)
) -> JSONResponse:
    """Call one tool for the key's facility."""
    services = request.app.state.services
    services.tools.definition(name)
    facility = await _facility(request, authorization)
    arguments = await _json_object(request)
    outcome = "error"
    try:
        answer = await services.tools.call(facility, name, arguments)
        outcome = "stale" if answer.meta.get("stale") else "ok"
        return JSONResponse(answer.model_dump())
    finally:
        services.metrics.tool_calls.labels(name, outcome).inc()


@router.post("/operations/{path:path}")
async def call_operation(
    path: str,
    request: Request,
    authorization: str | None = Header(default=None),
    idempotency_key: str | None = Header(default=None),
) -> JSONResponse:
    """Call one allowed booking-system operation (writes need an Idempotency-Key)."""
    services = request.app.state.services
    services.gateway.operation(path)  # refuse unknown and out-of-scope before anything else
    facility = await _facility(request, authorization)
    payload = await _json_object(request)
    outcome = "error"
    try:
        answer = await services.operations.call(facility, path, payload, idempotency_key)
        outcome = "replayed" if answer.replayed else "ok"
        headers = {"Idempotent-Replayed": "true"} if answer.replayed else {}
        return JSONResponse(answer.body, status_code=answer.status, headers=headers)
    finally:
        services.metrics.tool_calls.labels(f"op:{path}"[:80], outcome).inc()
