"""Typed answers (docs/gateway.md, "Typed answers"): each tool's answer is declared once.

The catalogue declares the model of each registered answer (``ANSWER_MODELS`` in
``pmsgate.catalogue.tools``); ``/openapi.json`` names it as the tool route's 200 answer and
MCP lists it as the tool's ``outputSchema``. The gateway answers with JSON it renders itself
(kept bytes, no validation per call), so these tests hold the answers to the declaration:
the real gateway on the booking-system emulator, every tool in every shape the emulator can
make its answers take (portal block, link only, no portal; a window read in part), over
HTTP (each answer and its kept copy against the document's schema, with JSON Schema's
format checks) and over MCP with the official SDK's client (which itself checks
``structuredContent`` against the listed ``outputSchema``), and the operation routes'
answers against theirs.
"""

from __future__ import annotations

import datetime as dt
import json
import typing
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from jsonschema import Draft202012Validator
from pydantic import SecretStr

from pmsgate.app import create_app
from pmsgate.catalogue.loader import load_tools
from pmsgate.catalogue.tools import (
    ANSWER_MODELS,
    ReservationsInRangeAnswer,
    StatusLabel,
    TruncatedReason,
    answer_schema,
)
from pmsgate.clock import ManualClock
from pmsgate.config import Settings
from pmsgate.container import open_container
from pmsgate.gateway import window
from pmsgate.gateway.operations import OperationReadAnswer, OperationWriteAnswer
from pmsgate.gateway.scopes import all_scopes
from pmsgate.gateway.tools import STATUS_LABELS, ToolRegistryError, check_answers
from pmsgate.gateway.vault import generate_key_spec
from pmsgate.integrations.kross.operations import load_operations
from pmsgate.sandbox.kross.seed import SANDBOX_PARTNER_API_KEY
from pmsgate.sandbox.kross.store import KrossStore
from tests.gateway.facility_support import new_facility_from_seed
from tests.support.mcp import mcp_client

pytestmark = pytest.mark.anyio

BASE_URL = "http://gateway.test"
COMPONENTS = "#/components/schemas/"
# The shapes the emulator can give its answers: each variant's switches (KrossStore.configure).
VARIANTS: dict[str, dict[str, Any]] = {
    "portal-block": {"guest_portal_shape": "block"},
    "portal-link": {"guest_portal_shape": "link"},
    "portal-absent": {"guest_portal_shape": "absent"},
    "window-in-part": {"ignore_offset": True},
}


@dataclass
class Served:
    """The real gateway on the emulator, one facility registered with every scope."""

    app: FastAPI
    http: httpx.AsyncClient
    key: str
    hotel_id: str
    store: KrossStore
    clock: ManualClock

    @property
    def today(self) -> dt.date:
        return self.clock.now().date()

    async def post(
        self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> httpx.Response:
        auth = {"Authorization": f"Bearer {self.key}", **(headers or {})}
        return await self.http.post(path, json=body, headers=auth)


@asynccontextmanager
async def gateway_app(
    database_url: str, kross_http: httpx.AsyncClient, kross_store: KrossStore, clock: ManualClock
) -> AsyncIterator[tuple[FastAPI, str, str]]:
    """The real gateway's app on the emulator (its lifespan not entered yet) with the
    emulator's first facility registered, its key holding every scope: (app, key, hotel_id)."""
    settings = Settings(
        database_url=database_url,
        kross_base_url=str(kross_http.base_url),
        partner_api_key=SecretStr(SANDBOX_PARTNER_API_KEY),
        secret_keys=SecretStr(generate_key_spec("t1")),
        limiter_wait_s=0.0,
    )
    async with open_container(settings, kross_http=kross_http, clock=clock) as container:
        record = kross_store.facility_summaries()[0]
        _, key = await container.gateway.facilities.add(
            new_facility_from_seed(record, scopes=list(all_scopes()))
        )
        yield create_app(settings, container=container), key, record["hotel_id"]


@pytest.fixture
async def served(
    database_url: str, kross_http: httpx.AsyncClient, kross_store: KrossStore, clock: ManualClock
) -> AsyncIterator[Served]:
    async with (
        gateway_app(database_url, kross_http, kross_store, clock) as (app, key, hotel_id),
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE_URL) as http,
    ):
        yield Served(app, http, key, hotel_id, kross_store, clock)


def use_variant(served: Served, variant: str) -> None:
    """Switch the emulator to ``variant``; a window read in part needs more than a page of it
    (the emulator ignores the date filters, so past stays count)."""
    served.store.configure(**VARIANTS[variant])
    if VARIANTS[variant].get("ignore_offset"):
        served.store.add_history(served.hotel_id, 150)


def staying_tonight(store: KrossStore, hotel_id: str, today: dt.date) -> int:
    """A live reservation of the emulator staying tonight."""
    return min(
        r.id_reservation
        for r in store.facility(hotel_id).reservations.values()
        if r.holds_room and r.arrival <= today < r.departure
    )


def every_tool_call(reservation_id: int, today: dt.date) -> list[tuple[str, dict[str, Any]]]:
    """Each of the six tools, with each way of asking it (defaults, explicit arguments, a
    stay inside and outside the cached availability window)."""

    def day(days: int) -> str:
        return (today + dt.timedelta(days=days)).isoformat()

    return [
        ("check-availability", {"arrival": day(3), "departure": day(5)}),
        ("check-availability", {"arrival": day(120), "departure": day(122)}),
        ("get-reservation-status", {"reservation_id": reservation_id}),
        ("get-in-house-guests", {}),
        ("get-in-house-guests", {"date": day(1)}),
        ("get-incomplete-portals", {}),
        ("get-incomplete-portals", {"date_from": day(-3), "date_to": day(20)}),
        ("check-portal-status", {"reservation_id": reservation_id}),
        ("get-checkin-instructions", {"reservation_id": reservation_id}),
    ]


def validator(document: dict[str, Any], schema: dict[str, Any]) -> Draft202012Validator:
    """A validator of ``schema`` (a part of the OpenAPI ``document``, its ``$ref`` resolved in
    the document's components), formats (dates) checked."""
    root = {**schema, "components": document["components"]}
    Draft202012Validator.check_schema(root)
    return Draft202012Validator(root, format_checker=Draft202012Validator.FORMAT_CHECKER)


def answer_of(document: dict[str, Any], path: str, status: str = "200") -> dict[str, Any]:
    """The schema ``document`` states for ``path``'s answer of ``status``."""
    answer = document["paths"][path]["post"]["responses"][status]
    schema: dict[str, Any] = answer["content"]["application/json"]["schema"]
    return schema


def assert_valid(check: Draft202012Validator, body: Any, what: Any) -> None:
    problems = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in check.iter_errors(body)
    ]
    assert not problems, (what, problems)


# --- the declaration --------------------------------------------------------------------


def test_every_tool_declares_its_answer_and_the_schema_is_valid_json_schema() -> None:
    for name, tool in load_tools().items():
        model = tool.answer_model()
        assert model is not None, name
        schema = answer_schema(model)
        Draft202012Validator.check_schema(schema)
        # MCP (through 2025-11-25) takes an object at the root, and the envelope is exact.
        assert schema["type"] == "object", name
        assert schema["required"] == ["data", "meta"], name
        assert schema["additionalProperties"] is False, name


def test_the_declared_words_are_the_gateways() -> None:
    assert set(typing.get_args(TruncatedReason)) == set(typing.get_args(window.TruncatedReason))
    assert set(typing.get_args(StatusLabel)) == {*STATUS_LABELS.values(), "unknown"}


def test_a_reservation_list_over_a_range_is_typed_as_a_range() -> None:
    in_house = load_tools()["get-in-house-guests"]
    ranged = in_house.model_copy(
        update={
            "parameters": {"date_from": in_house.parameters["date"]}
            | {"date_to": in_house.parameters["date"]}
        }
    )
    assert ranged.answer_model() is ReservationsInRangeAnswer


def test_a_tool_whose_answer_declares_no_model_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(ANSWER_MODELS, "availability")
    with pytest.raises(ToolRegistryError, match="declares no model"):
        check_answers([load_tools()["check-availability"]])


def test_the_openapi_document_names_a_typed_answer_for_every_tool_and_operation() -> None:
    document = create_app(Settings()).openapi()
    components = document["components"]["schemas"]
    for name, tool in load_tools().items():
        model = tool.answer_model()
        assert model is not None
        path = f"/v1/tools/{name}"
        assert answer_of(document, path) == {"$ref": f"{COMPONENTS}{model.__name__}"}
        assert components[model.__name__]["additionalProperties"] is False
    for operation in load_operations():
        path = f"/v1/operations/{operation.name}"
        if path not in document["paths"]:
            continue  # auth/get-token: never a route
        model = OperationWriteAnswer if operation.is_write else OperationReadAnswer
        assert answer_of(document, path) == {"$ref": f"{COMPONENTS}{model.__name__}"}
    for path, routes in document["paths"].items():
        if not path.startswith("/v1/"):
            continue
        for route in routes.values():
            for status, answer in route["responses"].items():
                if status.startswith("4"):
                    schema = answer["content"]["application/json"]["schema"]
                    assert schema == {"$ref": f"{COMPONENTS}ErrorBody"}, (path, status)


# --- the answers over HTTP ----------------------------------------------------------------


@pytest.mark.parametrize("variant", list(VARIANTS))
async def test_every_tool_answer_and_its_kept_copy_match_the_documented_schema(
    served: Served, variant: str
) -> None:
    use_variant(served, variant)
    document = (await served.http.get("/openapi.json")).json()
    reservation_id = staying_tonight(served.store, served.hotel_id, served.today)
    seen_meta: set[str] = set()
    for name, arguments in every_tool_call(reservation_id, served.today):
        path = f"/v1/tools/{name}"
        check = validator(document, answer_of(document, path))
        model = load_tools()[name].answer_model()
        assert model is not None
        sources = []
        for _ in range(2):  # made, then (while its reads stand) the kept bytes
            answer = await served.post(path, arguments)
            assert answer.status_code == 200, (name, arguments, answer.text)
            body = answer.json()
            assert_valid(check, body, (variant, name, arguments))
            model.model_validate(body)
            sources.append(body["meta"]["source"])
            seen_meta |= set(body["meta"])
        assert sources[-1] == "cache"
    if variant == "window-in-part":
        assert "truncated_reason" in seen_meta


async def test_a_window_read_in_part_and_unknown_portals_fill_the_optional_fields(
    served: Served,
) -> None:
    """The fields only some answers carry are declared, and do appear."""
    document = (await served.http.get("/openapi.json")).json()
    path = "/v1/tools/get-incomplete-portals"
    check = validator(document, answer_of(document, path))
    use_variant(served, "portal-absent")
    unknown = (await served.post(path, {})).json()
    assert unknown["data"]["unknown"] > 0 and "note" in unknown["data"], unknown["data"]
    assert_valid(check, unknown, "portals unknown")

    use_variant(served, "window-in-part")
    served.clock.advance(301)  # the window read again: past its 300 s
    partial = (await served.post(path, {"date_from": served.today.isoformat()})).json()
    assert {"complete", "window_note"} <= set(partial["data"]), partial["data"]
    assert partial["meta"]["truncated"] is True and "truncated_reason" in partial["meta"]
    assert_valid(check, partial, "window in part")


async def test_operation_answers_match_the_documented_schema(served: Served) -> None:
    document = (await served.http.get("/openapi.json")).json()
    reservation_id = staying_tonight(served.store, served.hotel_id, served.today)
    reads = {
        "reservations/get-list": {"id_reservation": reservation_id, "with_rooms": True},
        "calendar/get-availability": {
            "date_from": served.today.isoformat(),
            "date_to": (served.today + dt.timedelta(days=3)).isoformat(),
        },
        "get-check-in-instructions": {"id_reservation": reservation_id},
        "get-house-manual": {"id_reservation": reservation_id},
    }
    for name, payload in reads.items():
        path = f"/v1/operations/{name}"
        answer = await served.post(path, payload)
        assert answer.status_code == 200, (name, answer.text)
        assert_valid(validator(document, answer_of(document, path)), answer.json(), name)
        OperationReadAnswer.model_validate(answer.json())

    path = "/v1/operations/reservations/add-payment"
    payment = {
        "id_reservation": reservation_id,
        "amount": 10.5,
        "currency": "EUR",
        "method": "cash",
    }
    headers = {"Idempotency-Key": str(uuid.uuid4())}
    check = validator(document, answer_of(document, path))
    first = await served.post(path, payment, headers)
    replay = await served.post(path, payment, headers)
    for answer in (first, replay):
        assert answer.status_code == 200, answer.text
        assert_valid(check, answer.json(), "add-payment")
        OperationWriteAnswer.model_validate(answer.json())
    assert replay.headers["Idempotent-Replayed"] == "true"

    refused = await served.post("/v1/tools/get-reservation-status", {"reservation_id": 1})
    assert refused.status_code == 404
    error = answer_of(document, "/v1/tools/get-reservation-status", "404")
    assert_valid(validator(document, error), refused.json(), "404")


async def test_the_tool_listing_matches_its_documented_schema(served: Served) -> None:
    document = (await served.http.get("/openapi.json")).json()
    schema = document["paths"]["/v1/tools"]["get"]["responses"]["200"]["content"]
    listing = await served.http.get("/v1/tools", headers={"Authorization": f"Bearer {served.key}"})
    assert listing.status_code == 200
    check = validator(document, schema["application/json"]["schema"])
    assert_valid(check, listing.json(), "GET /v1/tools")
    assert [t["name"] for t in listing.json()["tools"]] == list(load_tools())


# --- the answers over MCP -----------------------------------------------------------------


@pytest.mark.parametrize("variant", ["portal-block", "portal-absent", "window-in-part"])
async def test_mcp_lists_each_output_schema_and_every_answer_matches_it(
    served: Served, variant: str
) -> None:
    use_variant(served, variant)
    reservation_id = staying_tonight(served.store, served.hotel_id, served.today)
    async with mcp_client(served.app, served.key) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) == set(load_tools())
        for name, tool in load_tools().items():
            model = tool.answer_model()
            assert model is not None
            assert listed[name].output_schema == answer_schema(model), name
        for name, arguments in every_tool_call(reservation_id, served.today):
            # The SDK's client checks structuredContent against the listed outputSchema too.
            result = await client.call_tool(name, arguments)
            assert result.is_error is False, (name, result.content)
            schema = listed[name].output_schema
            assert schema is not None
            check = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
            assert_valid(check, result.structured_content, (variant, name))
            # The text older clients read is the same answer.
            text = result.content[0].text  # type: ignore[union-attr]
            assert json.loads(text) == result.structured_content


async def test_mcp_tool_errors_stay_error_results_without_the_answer_schema(
    served: Served,
) -> None:
    async with mcp_client(served.app, served.key) as client:
        result = await client.call_tool("get-reservation-status", {"reservation_id": 1})
    assert result.is_error is True
    assert result.structured_content["error"]["code"] == "reservation_not_found"
