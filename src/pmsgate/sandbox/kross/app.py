"""The emulator's HTTP face: ``POST /v5/<operation>``, ``/apiv5`` and the ``/_sandbox/`` controls.

Every /v5 request goes through the same steps, in the order the real edge and
server are assumed to apply them (docs/kross-api.md):

1. User-Agent check (403, plain text ``error code: 1010``), before anything else;
2. injected latency;
3. operation lookup (404 ``OPERATION_NOT_FOUND``, or as the ``unknown_operation`` variant says;
   with ``grouped_paths`` the ungrouped operations exist only under ``reservations/``);
4. attribution to a facility (bearer token, or the ``hotel_id`` of ``auth/get-token``)
   and the facility's rate limits (429 ``RATE_LIMITED`` with ``Retry-After``);
5. injected 503s;
6. body parsing (400 ``INVALID_REQUEST``), the operation itself, serialisation;
7. for writes, the commit-then-timeout fault, *after* the state has changed:
   ``hang`` sleeps ``hang_s`` seconds before answering (a client whose timeout is
   shorter gives up; with ``httpx.ASGITransport``, which ignores client timeouts,
   wrap the call in ``anyio.fail_after``); ``disconnect`` raises
   ``httpx.RemoteProtocolError`` inside the app, which ``ASGITransport`` hands to
   the client as is (behind a real server such as uvicorn the client sees a 500 instead).
   The lost-then-timeout fault times a write out the same way *before* it is applied
   (the request never reached the server's state), so nothing changes.

How refusals and lists look depends on the variant switches of
:class:`~pmsgate.sandbox.kross.store.SandboxConfig` (``PUT /_sandbox/config``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

import anyio
import httpx
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, BeforeValidator, Field

from pmsgate.sandbox.core import bearer_token, json_body, validated
from pmsgate.sandbox.emulator_app import ErrorAnswers, common_controls, emulator_app
from pmsgate.sandbox.kross import errors, wire
from pmsgate.sandbox.kross.errors import KrossError, new_ruid
from pmsgate.sandbox.kross.store import (
    MAX_HISTORY_PER_CALL,
    WRITE_OPERATIONS,
    KrossStore,
    PictureUpload,
)

GET_TOKEN = "auth/get-token"
BROWSER_USER_AGENT_PREFIX = "Mozilla/5.0"

Operation = Callable[[KrossStore, str, dict[str, Any]], dict[str, Any]]
_Model = TypeVar("_Model", bound=BaseModel)


# --- the ten operations (get-token is handled apart: it is attributed by its body) ----------


def _get_availability(store: KrossStore, hotel_id: str, body: dict[str, Any]) -> dict[str, Any]:
    req = _parse(wire.AvailabilityBody, body)
    rows = store.availability(hotel_id, req.date_from, req.date_to, req.id_room_type)
    data = [wire.availability_row(r) for r in rows]
    return _list_envelope(store, data, len(rows), len(rows), 0)


def _get_reservations(store: KrossStore, hotel_id: str, body: dict[str, Any]) -> dict[str, Any]:
    req = _parse(wire.ReservationListBody, body)
    if req.limit > wire.MAX_LIST_LIMIT and store.config.max_page_size is None:
        raise KrossError(
            errors.INVALID_REQUEST, f"limit: at most {wire.MAX_LIST_LIMIT} rows per page"
        )
    page = store.list_reservations(hotel_id, req.to_filter())
    facility = store.facility(hotel_id)
    rows = [
        wire.reservation_row(
            r,
            facility,
            with_rooms=req.with_rooms,
            with_guest_portal=req.with_guest_portal,
            portal_shape=store.config.guest_portal_shape,
        )
        for r in page.rows
    ]
    return _list_envelope(store, rows, page.total, page.limit, page.offset)


def _get_check_in_instructions(
    store: KrossStore, hotel_id: str, body: dict[str, Any]
) -> dict[str, Any]:
    req = _parse(wire.RoomTypeBody, body)
    apartment = store.apartment_for(hotel_id, req.id_room_type, req.id_reservation)
    return {"data": wire.check_in_instructions(apartment)}


def _get_house_manual(store: KrossStore, hotel_id: str, body: dict[str, Any]) -> dict[str, Any]:
    req = _parse(wire.RoomTypeBody, body)
    apartment = store.apartment_for(hotel_id, req.id_room_type, req.id_reservation)
    return {"data": wire.house_manual(apartment)}


def _get_contract(store: KrossStore, hotel_id: str, body: dict[str, Any]) -> dict[str, Any]:
    req = _parse(wire.RoomTypeBody, body)
    apartment = store.apartment_for(hotel_id, req.id_room_type, req.id_reservation)
    return {"data": wire.contract(apartment)}


def _save_reservation(store: KrossStore, hotel_id: str, body: dict[str, Any]) -> dict[str, Any]:
    req = _parse(wire.SaveReservationBody, body)
    res = store.change_dates(hotel_id, req.id_reservation, req.arrival, req.departure)
    return {"data": wire.saved_dates(res)}


def _add_payment(store: KrossStore, hotel_id: str, body: dict[str, Any]) -> dict[str, Any]:
    req = _parse(wire.AddPaymentBody, body)
    payment = store.add_payment(
        hotel_id, req.id_reservation, req.amount, req.currency, req.method, req.date, req.note
    )
    return {"data": wire.payment_row(payment)}


def _check_in_guest(store: KrossStore, hotel_id: str, body: dict[str, Any]) -> dict[str, Any]:
    req = _parse(wire.CheckInGuestBody, body)
    guest = store.register_guest(hotel_id, req.id_reservation, req.guest.to_new_guest())
    res = store.facility(hotel_id).reservations[req.id_reservation]
    return {
        "data": {
            "id_guest": guest.id_guest,
            "id_reservation": req.id_reservation,
            **wire.portal_fields(res.portal(), store.config.guest_portal_shape),
        }
    }


def _save_guest_pictures(store: KrossStore, hotel_id: str, body: dict[str, Any]) -> dict[str, Any]:
    req = _parse(wire.SavePicturesBody, body)
    uploads = [
        PictureUpload(p.filename, p.content_type, _decode_base64(p.data_base64))
        for p in req.pictures
    ]
    res, stored = store.save_pictures(hotel_id, req.id_reservation, uploads, req.id_guest)
    return {"data": wire.saved_pictures(res, stored)}


OPERATIONS: dict[str, Operation] = {
    "calendar/get-availability": _get_availability,
    "reservations/get-list": _get_reservations,
    "get-check-in-instructions": _get_check_in_instructions,
    "get-house-manual": _get_house_manual,
    "get-contract": _get_contract,
    "reservations/save": _save_reservation,
    "reservations/add-payment": _add_payment,
    "check-in-guest": _check_in_guest,
    "save-guest-pictures": _save_guest_pictures,
}

# docs/requirements.md R5.1 writes these without a group; community clients call them under
# reservations/ (docs/kross-api.md). Both spellings answer, unless grouped_paths is switched on.
UNGROUPED = (
    "get-check-in-instructions",
    "get-house-manual",
    "get-contract",
    "check-in-guest",
    "save-guest-pictures",
)
ALIASES = {f"reservations/{name}": name for name in UNGROUPED}


def resolve_operation(path: str, *, grouped_paths: bool) -> str | None:
    """The operation a /v5 path names, or None when this server has no such path."""
    path = path.strip("/")
    if path in ALIASES:
        return ALIASES[path]
    if grouped_paths and path in UNGROUPED:
        return None
    return path if path == GET_TOKEN or path in OPERATIONS else None


# --- control bodies -----------------------------------------------------------------------


class PasswordBody(BaseModel):
    """POST /_sandbox/facilities/{hotel_id}/password."""

    password: str = Field(min_length=1)


class LimitsBody(BaseModel):
    """PUT /_sandbox/facilities/{hotel_id}/limits."""

    per_minute: int | None = Field(default=None, ge=1)
    per_hour: int | None = Field(default=None, ge=1)
    per_day: int | None = Field(default=None, ge=1)


class FaultsBody(BaseModel):
    """POST /_sandbox/faults."""

    latency_s: float | None = Field(default=None, ge=0)
    error_rate: float | None = Field(default=None, ge=0, le=1)
    commit_then_timeout: int | None = Field(default=None, ge=0)
    lost_then_timeout: int | None = Field(default=None, ge=0)
    timeout_mode: Literal["hang", "disconnect"] | None = None
    hang_s: float | None = Field(default=None, gt=0)


def _status_as_text(value: Any) -> Any:
    # Statuses are named by strings ("401"); a caller writing the number means the same.
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


class ConfigBody(BaseModel):
    """PUT /_sandbox/config: the variant switches (absent or null = unchanged)."""

    ignore_date_filters: bool | None = None
    token_location: Literal["data", "top", "nested"] | None = None
    guest_portal_shape: Literal["block", "link", "absent"] | None = None
    ignore_offset: bool | None = None
    omit_total_count: bool | None = None
    # 0 removes the cap.
    max_page_size: int | None = Field(default=None, ge=0)
    login_refusal: Annotated[
        Literal["401", "400", "403", "200"] | None, BeforeValidator(_status_as_text)
    ] = None
    token_rejection: Annotated[
        Literal["401", "200", "200-401"] | None, BeforeValidator(_status_as_text)
    ] = None
    grouped_paths: bool | None = None
    unknown_operation: Annotated[
        Literal["named", "404", "plain"] | None, BeforeValidator(_status_as_text)
    ] = None


class HistoryBody(BaseModel):
    """POST /_sandbox/facilities/{hotel_id}/history."""

    count: int = Field(ge=1, le=MAX_HISTORY_PER_CALL)


# --- the app ------------------------------------------------------------------------------


# The app's title (it serves no API docs).
TITLE = "Kross Booking API v5 emulator"


def create_kross_app(store: KrossStore) -> FastAPI:
    """The emulator as an ASGI app over ``store``."""
    return emulator_app(TITLE, _api_router(store), _control_router(store), _ERROR_ANSWERS)


def _api_router(store: KrossStore) -> APIRouter:
    router = APIRouter()

    @router.api_route("/v5/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    async def v5(path: str, request: Request) -> Response:
        if not request.headers.get("user-agent", "").startswith(BROWSER_USER_AGENT_PREFIX):
            store.record_user_agent_block()
            return PlainTextResponse("error code: 1010", status_code=403)
        operation = resolve_operation(path, grouped_paths=store.config.grouped_paths)
        store.record_request(operation)
        if store.faults.latency_s > 0:
            await anyio.sleep(store.faults.latency_s)
        if request.method != "POST":
            raise KrossError(errors.METHOD_NOT_ALLOWED)
        if operation is None:
            return _unknown_operation(store, path)
        if operation == GET_TOKEN:
            return _json(await _get_token(store, request))
        hotel_id = store.authenticate(bearer_token(request))
        store.admit(hotel_id)
        _maybe_fail(store)
        if operation in WRITE_OPERATIONS:
            await _time_out(store, store.take_lost_write())
        answer = OPERATIONS[operation](store, hotel_id, await _json_body(request))
        if operation in WRITE_OPERATIONS:
            await _time_out(store, store.take_write_fault())
        return _json(answer)

    @router.api_route("/apiv5", methods=["GET", "POST"])
    @router.api_route("/apiv5/{rest:path}", methods=["GET", "POST"])
    async def reference_page() -> HTMLResponse:
        return HTMLResponse(_REFERENCE_PAGE)

    return router


async def _get_token(store: KrossStore, request: Request) -> dict[str, Any]:
    body = await _json_body(request)
    hotel_id = str(body.get("hotel_id", ""))
    # Only a hotel_id that exists can be charged; unknown ones are refused as a wrong login,
    # uncounted.
    if store.has_facility(hotel_id):
        store.admit(hotel_id)
    _maybe_fail(store)
    req = _parse(wire.GetTokenBody, body)
    issued = store.issue_token(req.hotel_id, req.username, req.password, req.api_key)
    return wire.token_answer(issued, store.config.token_location)


def _unknown_operation(store: KrossStore, path: str) -> Response:
    """A path that names no operation, answered as the ``unknown_operation`` variant says."""
    spec = errors.UNKNOWN_OPERATIONS[store.config.unknown_operation]
    if spec is None:
        return PlainTextResponse("Not Found", status_code=404)
    message = f"no operation {path!r}" if spec is errors.OPERATION_NOT_FOUND else None
    raise KrossError(spec, message)


def _maybe_fail(store: KrossStore) -> None:
    if store.draw_server_error():
        raise KrossError(errors.SERVER_ERROR)


async def _time_out(store: KrossStore, mode: str | None) -> None:
    if mode == "hang":
        await anyio.sleep(store.faults.hang_s)
    elif mode == "disconnect":
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.")


def _control_router(store: KrossStore) -> APIRouter:
    router = common_controls(store)

    @router.get("/facilities")
    async def facilities() -> list[dict[str, Any]]:
        return store.facility_summaries()

    @router.post("/facilities/{hotel_id}/password")
    async def change_password(hotel_id: str, body: PasswordBody) -> dict[str, Any]:
        store.change_password(hotel_id, body.password)
        return {"ok": True, "hotel_id": hotel_id}

    @router.put("/facilities/{hotel_id}/limits")
    async def set_limits(hotel_id: str, body: LimitsBody) -> dict[str, Any]:
        limits = store.set_limits(hotel_id, body.per_minute, body.per_hour, body.per_day)
        return {"hotel_id": hotel_id, **vars(limits)}

    @router.get("/faults")
    async def faults() -> dict[str, Any]:
        return dict(vars(store.faults))

    @router.post("/faults")
    async def set_faults(body: FaultsBody) -> dict[str, Any]:
        return dict(vars(store.set_faults(**body.model_dump())))

    @router.delete("/faults")
    async def clear_faults() -> dict[str, Any]:
        store.clear_faults()
        return dict(vars(store.faults))

    @router.get("/config")
    async def config() -> dict[str, Any]:
        return dict(vars(store.config))

    @router.put("/config")
    async def set_config(body: ConfigBody) -> dict[str, Any]:
        return dict(vars(store.configure(**body.model_dump())))

    @router.post("/facilities/{hotel_id}/history")
    async def add_history(hotel_id: str, body: HistoryBody) -> dict[str, Any]:
        total = store.add_history(hotel_id, body.count)
        return {"hotel_id": hotel_id, "added": body.count, "reservations": total}

    return router


# --- parsing and rendering ----------------------------------------------------------------


def _json(payload: dict[str, Any], status: int = 200) -> JSONResponse:
    return JSONResponse({**payload, "ruid": new_ruid()}, status_code=status)


def _list_envelope(
    store: KrossStore, rows: list[dict[str, Any]], total: int, limit: int, offset: int
) -> dict[str, Any]:
    if store.config.omit_total_count:
        return {"data": rows, "limit": limit, "offset": offset}
    return {
        "data": rows,
        "count": len(rows),
        "total_count": total,
        "limit": limit,
        "offset": offset,
    }


def _refused(message: str) -> KrossError:
    return KrossError(errors.INVALID_REQUEST, message)


async def _json_body(request: Request) -> dict[str, Any]:
    return await json_body(request, _refused)


def _parse(model: type[_Model], body: dict[str, Any]) -> _Model:
    return validated(model, body, _refused)


def _decode_base64(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise KrossError(errors.INVALID_REQUEST, "data_base64 is not valid base64") from None


_ERROR_ANSWERS = ErrorAnswers(
    KrossError,
    invalid=errors.INVALID_REQUEST,
    internal=errors.INTERNAL_ERROR,
    no_route={404: errors.OPERATION_NOT_FOUND, 405: errors.METHOD_NOT_ALLOWED},
)


_REFERENCE_PAGE = """<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>Kross Booking API v5 - Reference</title></head>
<body>
<h1>Kross Booking API v5</h1>
<p>This is the human reference page, not an API endpoint. Operations are called with
<code>POST /v5/&lt;operation&gt;</code> and a JSON body.</p>
<ul>
<li>auth/get-token</li><li>calendar/get-availability</li><li>reservations/get-list</li>
<li>get-check-in-instructions</li><li>get-house-manual</li><li>get-contract</li>
<li>reservations/save</li><li>reservations/add-payment</li><li>check-in-guest</li>
<li>save-guest-pictures</li>
</ul>
</body>
</html>
"""
