"""The MCP endpoint, driven by the official MCP client over streamable HTTP.

The client (``mcp.Client`` over ``mcp.client.streamable_http``, a ``ClientSession``
underneath) reaches the app through ``httpx2.ASGITransport``: the SDK's HTTP client
is ``httpx2`` (a dependency of ``mcp`` 2.x), not ``httpx``. Both protocol eras run:
the initialize handshake (``legacy``) and the 2026-07-28 single-exchange requests
(``auto`` negotiates them).

Two stacks:

- the MCP layer alone: a FastAPI app routing ``/mcp`` to :func:`create_mcp_app`,
  keys checked by the real :class:`FacilityService` on a migrated database, and
  ``RecordingTools``, a test double of the ``Tools`` *interface* (the catalogue's
  real definitions; ``call`` answers with the facility it was given or raises a
  scripted error) — it pins schemas, results, error mapping and key isolation,
  including failures the real tools cannot be made to produce on demand;
- the real gateway: ``create_app`` over ``open_container`` with the booking-system
  emulator, exactly what ``pmsgate serve`` runs.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from fastapi import FastAPI
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent
from mcp_types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    MODERN_PROTOCOL_VERSIONS,
)
from pydantic import BaseModel, SecretStr
from starlette.types import Scope

from pmsgate.app import create_app
from pmsgate.catalogue.loader import load_tools
from pmsgate.catalogue.tools import ToolDefinition
from pmsgate.clock import ManualClock
from pmsgate.container import open_container
from pmsgate.errors import InvalidInput, PmsgateError, install_error_handlers
from pmsgate.gateway.context import GatewayServices
from pmsgate.gateway.facilities import FacilityView, NewFacility
from pmsgate.gateway.facility_service import FacilityService
from pmsgate.gateway.mcp import create_mcp_app
from pmsgate.gateway.oauth_tokens import MCP_PATH, BearerAuth, Caller
from pmsgate.gateway.scopes import TOOLS_READ, write_scope
from pmsgate.gateway.tools import stay_date_years
from pmsgate.gateway.vault import Vault, generate_key_spec
from pmsgate.sandbox.kross.seed import SANDBOX_PARTNER_API_KEY
from pmsgate.sandbox.kross.store import KrossStore
from pmsgate.storage.db import open_database, session_factory
from pmsgate.version import build_info
from tests.gateway.facility_support import new_facility_from_seed
from tests.support.answers import assert_error
from tests.support.facilities import emulator_settings, served_gateway

pytestmark = pytest.mark.anyio

BASE_URL = "http://gateway.test"
MCP_URL = f"{BASE_URL}/mcp"
ERAS = ["legacy", "auto"]
TODAY = ManualClock().now().date()
ALLOWED_ORIGIN = "https://console.example.com"


class Answer(BaseModel):
    """Shaped like ``ToolAnswer``: what the MCP layer serialises."""

    data: dict[str, Any]
    meta: dict[str, Any]


@dataclass
class RecordingTools:
    """Test double of the ``Tools`` interface: real catalogue, scripted answers."""

    definitions: dict[str, ToolDefinition] = field(default_factory=load_tools)
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    def input_schema(self, name: str) -> dict[str, Any]:
        return self.definitions[name].input_schema(stay_date_years(TODAY))

    def answer_model(self, name: str) -> None:
        # Scripted answers, not the declared ones: no outputSchema is listed for them (the
        # real answers against theirs: tests/gateway/test_typed_answers.py).
        return None

    async def call(self, facility: FacilityView, name: str, arguments: dict[str, Any]) -> Answer:
        self.calls.append((facility.hotel_id, name, arguments))
        if name == "get-reservation-status" and "reservation_id" not in arguments:
            raise InvalidInput("reservation_id: Field required", code="invalid_arguments")
        if arguments.get("reservation_id") == 429:
            raise PmsgateError(
                "The facility's budget is spent.",
                code="rate_limited",
                status=429,
                headers={"Retry-After": "7"},
            )
        if arguments.get("reservation_id") == 500:
            raise RuntimeError("secret-looking detail that must never reach the caller")
        return Answer(
            data={"hotel_id": facility.hotel_id, "tool": name, "arguments": arguments},
            meta={"source": "cache", "age_s": 1.5, "stale": False, "count": 1},
        )


@dataclass
class Stack:
    """What a test talks to: the app, two facilities' keys, the tools double."""

    app: FastAPI
    facilities: FacilityService
    tools: RecordingTools
    keys: dict[str, str]
    recorded: list[tuple[str, str]]

    @asynccontextmanager
    async def http(self, key: str | None) -> AsyncIterator[httpx2.AsyncClient]:
        headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
        transport = httpx2.ASGITransport(app=self.app)
        async with httpx2.AsyncClient(
            transport=transport, base_url=BASE_URL, headers=headers
        ) as http:
            yield http

    @asynccontextmanager
    async def client(self, key: str | None, mode: str) -> AsyncIterator[Client]:
        async with (
            self.http(key) as http,
            Client(streamable_http_client(MCP_URL, http_client=http), mode=mode) as client,
        ):
            yield client


def mcp_app_with_lifespan(
    tools: RecordingTools,
    authenticate: Callable[[str, str], Awaitable[FacilityView]],
    recorded: list[tuple[str, str]],
) -> FastAPI:
    """A gateway-shaped app: /mcp routed to the MCP app, its lifespan entered by the app's."""
    bearer = BearerAuth(authenticate, None)  # gateway keys only, as the app's without OAuth

    async def caller(authorization: str | None, scope: Scope) -> Caller:
        return await bearer.authenticate(authorization, TOOLS_READ, scope, MCP_PATH)

    mcp_app, mcp_lifespan = create_mcp_app(
        tools_provider=lambda: tools,  # a double of the Tools interface (see module docstring)
        authenticate=caller,
        record_call=lambda tool, outcome: recorded.append((tool, outcome)),
        allowed_origins=[ALLOWED_ORIGIN],
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with mcp_lifespan():
            yield

    app = FastAPI(lifespan=lifespan)
    install_error_handlers(app)
    app.add_route("/mcp", mcp_app, include_in_schema=False)
    return app


async def _facility(service: FacilityService, hotel_id: str, username: str) -> str:
    _, key = await service.add(
        NewFacility(
            hotel_id=hotel_id,
            username=username,
            password=SecretStr("a-password-for-tests"),
            kind="partner",
            integration_id=f"integration-{hotel_id}",
        )
    )
    return key


@pytest.fixture
async def stack(database_url: str, clock: ManualClock) -> AsyncIterator[Stack]:
    async with open_database(database_url, migrate=False) as engine:
        service = FacilityService(
            session_factory(engine),
            Vault(generate_key_spec()),
            clock,
            SecretStr(SANDBOX_PARTNER_API_KEY),
        )
        keys = {
            "A": await _facility(service, "111111", "api11111"),
            "B": await _facility(service, "222222", "api22222"),
        }
        tools = RecordingTools()
        recorded: list[tuple[str, str]] = []
        app = mcp_app_with_lifespan(tools, service.authenticate, recorded)
        async with app.router.lifespan_context(app):
            yield Stack(app=app, facilities=service, tools=tools, keys=keys, recorded=recorded)


def _body(result: CallToolResult) -> dict[str, Any]:
    """The JSON text of a result (what a model reads), checked against structuredContent."""
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, TextContent)
    body: dict[str, Any] = json.loads(block.text)
    assert result.structured_content == body
    return body


# --- listing ----------------------------------------------------------------------------


async def listed_tools(gateway: Any, mode: str) -> tuple[Any, str]:
    """tools/list as facility A's client in ``mode``; the answer and the protocol version."""
    async with gateway.client(gateway.keys["A"], mode) as client:
        return await client.list_tools(), client.protocol_version


def assert_the_catalogue(tools: list[Any]) -> None:
    """``tools`` are the catalogue's, each with its input schema (today's) and description."""
    catalogue = load_tools()
    assert {tool.name for tool in tools} == set(catalogue)
    for tool in tools:
        definition = catalogue[tool.name]
        assert tool.input_schema == definition.input_schema(stay_date_years(TODAY))
        assert tool.description == definition.description


@pytest.mark.parametrize("mode", ERAS)
async def test_list_tools_gives_the_six_catalogue_tools_with_their_schemas(
    stack: Stack, mode: str
) -> None:
    listed, version = await listed_tools(stack, mode)

    assert version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert_the_catalogue(listed.tools)
    assert [tool.name for tool in listed.tools] == list(load_tools())
    assert len(listed.tools) == 6
    for tool in listed.tools:
        assert tool.annotations is not None and tool.annotations.read_only_hint is True


# --- calling ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ERAS)
async def test_a_call_answers_data_and_meta_for_the_keys_facility(stack: Stack, mode: str) -> None:
    async with stack.client(stack.keys["B"], mode) as client:
        result = await client.call_tool("get-reservation-status", {"reservation_id": 1001})

    assert result.is_error is False
    body = _body(result)
    assert body["data"] == {
        "hotel_id": "222222",
        "tool": "get-reservation-status",
        "arguments": {"reservation_id": 1001},
    }
    assert body["meta"] == {"source": "cache", "age_s": 1.5, "stale": False, "count": 1}
    assert stack.tools.calls == [("222222", "get-reservation-status", {"reservation_id": 1001})]
    assert stack.recorded == [("get-reservation-status", "ok")]


async def test_concurrent_calls_with_two_keys_each_reach_only_their_own_facility(
    stack: Stack,
) -> None:
    seen: dict[str, list[str]] = {"A": [], "B": []}

    async def calls(who: str) -> None:
        async with stack.client(stack.keys[who], "auto") as client:
            for number in range(10):
                result = await client.call_tool("check-portal-status", {"reservation_id": number})
                seen[who].append(_body(result)["data"]["hotel_id"])

    async with anyio.create_task_group() as tg:
        tg.start_soon(calls, "A")
        tg.start_soon(calls, "B")

    assert seen == {"A": ["111111"] * 10, "B": ["222222"] * 10}


# --- tool errors ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ERAS)
async def test_a_tool_error_is_an_error_result_with_the_code_and_hint(
    stack: Stack, mode: str
) -> None:
    async with stack.client(stack.keys["A"], mode) as client:
        invalid = await client.call_tool("get-reservation-status", {})
        unknown = await client.call_tool("get-house-manual", {})

    assert invalid.is_error is True
    assert _body(invalid) == {
        "error": {
            "code": "invalid_arguments",
            "message": "reservation_id: Field required",
            "hint": InvalidInput.hint,
        }
    }
    assert unknown.is_error is True
    assert _body(unknown)["error"]["code"] == "unknown_tool"
    # An unknown name is refused before the tools and not counted (no label per made-up name).
    assert stack.recorded == [("get-reservation-status", "error")]
    assert [name for _, name, _ in stack.tools.calls] == ["get-reservation-status"]


async def test_a_rate_limit_error_tells_the_model_when_to_retry(stack: Stack) -> None:
    async with stack.client(stack.keys["A"], "auto") as client:
        result = await client.call_tool("get-reservation-status", {"reservation_id": 429})

    assert result.is_error is True
    error = _body(result)["error"]
    assert error["code"] == "rate_limited"
    assert error["retry_after_s"] == 7


async def test_an_unexpected_failure_is_an_internal_error_without_details(stack: Stack) -> None:
    async with stack.client(stack.keys["A"], "auto") as client:
        result = await client.call_tool("get-reservation-status", {"reservation_id": 500})

    assert result.is_error is True
    text = json.dumps(_body(result))
    assert _body(result)["error"]["code"] == "internal_error"
    assert "secret-looking" not in text
    assert "Traceback" not in text and "RuntimeError" not in text


# --- authentication ---------------------------------------------------------------------

INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
JSON_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.mark.parametrize(
    ("key", "code"),
    [
        (None, "missing_gateway_key"),
        ("pgw_" + "x" * 43, "invalid_gateway_key"),
        ("not-a-gateway-key", "invalid_gateway_key"),
    ],
)
async def test_a_missing_or_wrong_key_gets_401_with_the_error_body(
    stack: Stack, key: str | None, code: str
) -> None:
    async with stack.http(key) as http:
        response = await http.post("/mcp", json=INITIALIZE, headers=JSON_HEADERS)

    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    body = response.json()
    assert body["error"]["code"] == code
    assert set(body["error"]) == {"code", "message", "hint"}
    assert stack.tools.calls == []


@pytest.mark.parametrize("mode", ERAS)
async def test_the_mcp_client_with_a_wrong_key_cannot_connect(stack: Stack, mode: str) -> None:
    with pytest.raises(Exception):  # noqa: B017 - the SDK's exception type is not the point
        async with stack.client("pgw_" + "y" * 43, mode) as client:
            await client.list_tools()
    assert stack.tools.calls == []


async def test_a_revoked_key_is_refused(stack: Stack) -> None:
    async with stack.client(stack.keys["A"], "auto") as client:
        result = await client.call_tool("check-portal-status", {"reservation_id": 1})
        assert result.is_error is False

    [key] = await stack.facilities.list_keys("111111")
    await stack.facilities.revoke_key("111111", key.id)

    async with stack.http(stack.keys["A"]) as http:
        response = await http.post("/mcp", json=INITIALIZE, headers=JSON_HEADERS)
    assert_error(response, 401, "invalid_gateway_key")


# --- transport --------------------------------------------------------------------------


async def initialize_with(app: Any, key: str) -> Any:
    """An MCP initialize request to ``app``'s /mcp with the gateway key ``key``."""
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url=BASE_URL) as http:
        auth = {"Authorization": f"Bearer {key}"}
        return await http.post("/mcp", json=INITIALIZE, headers={**JSON_HEADERS, **auth})


async def tools_list(http: Any, version: str) -> Any:
    """A tools/list request saying it speaks MCP ``version`` (the header)."""
    return await http.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        headers={**JSON_HEADERS, "Mcp-Protocol-Version": version},
    )


async def test_answers_are_plain_json_without_a_session(stack: Stack) -> None:
    async with stack.http(stack.keys["A"]) as http:
        response = await http.post("/mcp", json=INITIALIZE, headers=JSON_HEADERS)
        listed = await tools_list(http, "2025-06-18")

    # Stateless: no session id to pin a client to one replica; JSON: no SSE stream held open.
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert "mcp-session-id" not in response.headers
    assert response.json()["result"]["serverInfo"]["name"] == "pmsgate"
    assert response.json()["result"]["serverInfo"]["version"] == build_info().version != ""
    assert listed.status_code == 200
    assert len(listed.json()["result"]["tools"]) == 6


async def test_any_host_name_is_accepted_behind_the_key(stack: Stack) -> None:
    async with stack.http(stack.keys["A"]) as http:
        response = await http.post(
            "/mcp", json=INITIALIZE, headers={**JSON_HEADERS, "Host": "gateway.example.org"}
        )
    assert response.status_code == 200


async def _post(stack: Stack, content: bytes, headers: dict[str, str]) -> httpx2.Response:
    async with stack.http(stack.keys["A"]) as http:
        return await http.post("/mcp", content=content, headers=headers)


@pytest.mark.parametrize(
    "origin", ["https://evil.example", "http://console.example.com", "null", "https://x.test:8443"]
)
async def test_a_request_from_a_foreign_origin_is_refused_with_403_before_the_key(
    stack: Stack, origin: str
) -> None:
    async with stack.http(stack.keys["A"]) as http:
        response = await http.post(
            "/mcp", json=INITIALIZE, headers={**JSON_HEADERS, "Origin": origin}
        )
    assert_error(response, 403, "origin_not_allowed")
    assert set(response.json()["error"]) == {"code", "message", "hint"}
    async with stack.http(None) as http:  # refused as foreign even without a key
        keyless = await http.post(
            "/mcp", json=INITIALIZE, headers={**JSON_HEADERS, "Origin": origin}
        )
    assert keyless.json()["error"]["code"] == "origin_not_allowed"


@pytest.mark.parametrize("origin", [None, ALLOWED_ORIGIN, "HTTPS://Console.Example.com/"])
async def test_no_origin_or_an_allowed_one_is_served(stack: Stack, origin: str | None) -> None:
    headers = {**JSON_HEADERS, **({"Origin": origin} if origin else {})}
    async with stack.http(stack.keys["A"]) as http:
        response = await http.post("/mcp", json=INITIALIZE, headers=headers)
    assert response.status_code == 200
    assert response.json()["result"]["serverInfo"]["name"] == "pmsgate"


@pytest.mark.parametrize("protocol", ["2025-06-18", "2026-07-28"])
@pytest.mark.parametrize(
    ("content", "headers", "status", "code"),
    [
        (
            b"{}",
            {"Content-Type": "text/plain", "Accept": "application/json"},
            415,
            "unsupported_media_type",
        ),
        (b"{}", {"Accept": "application/json"}, 415, "unsupported_media_type"),
        (
            json.dumps(INITIALIZE).encode(),
            {"Content-Type": "application/json", "Accept": "text/html"},
            406,
            "not_acceptable",
        ),
    ],
)
async def test_a_transport_error_is_the_json_error_body(
    stack: Stack, protocol: str, content: bytes, headers: dict[str, str], status: int, code: str
) -> None:
    response = await _post(stack, content, {**headers, "Mcp-Protocol-Version": protocol})
    assert response.status_code == status
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["error"]["code"] == code


@pytest.mark.parametrize("protocol", [None, "2025-06-18", "2026-07-28"])
@pytest.mark.parametrize(
    ("content", "rpc_code"),
    [
        (b"{not json", -32700),
        (b"[1, 2", -32700),
        (b'{"jsonrpc": "2.0", "id": 1}', None),
        (b'"just a string"', None),
    ],
)
async def test_an_unreadable_message_is_a_json_rpc_error(
    stack: Stack, protocol: str | None, content: bytes, rpc_code: int | None
) -> None:
    headers = {"Content-Type": "application/json", **JSON_HEADERS}
    if protocol:
        headers["Mcp-Protocol-Version"] = protocol
    response = await _post(stack, content, headers)
    assert 400 <= response.status_code < 500
    body = response.json()
    assert body["jsonrpc"] == "2.0" and "id" in body
    assert isinstance(body["error"]["code"], int)
    if rpc_code is not None:
        assert body["error"]["code"] == rpc_code
    assert stack.tools.calls == []


@pytest.mark.parametrize("version", list(HANDSHAKE_PROTOCOL_VERSIONS))
async def test_initialize_is_answered_in_each_supported_handshake_version(
    stack: Stack, version: str
) -> None:
    offer = {**INITIALIZE, "params": {**INITIALIZE["params"], "protocolVersion": version}}
    async with stack.http(stack.keys["A"]) as http:
        response = await http.post("/mcp", json=offer, headers=JSON_HEADERS)
        listed = await tools_list(http, version)
    assert response.json()["result"]["protocolVersion"] == version
    assert len(listed.json()["result"]["tools"]) == 6


async def test_an_unsupported_version_is_countered_with_the_newest_handshake_version(
    stack: Stack,
) -> None:
    offer = {**INITIALIZE, "params": {**INITIALIZE["params"], "protocolVersion": "1999-01-01"}}
    async with stack.http(stack.keys["A"]) as http:
        response = await http.post("/mcp", json=offer, headers=JSON_HEADERS)
        unknown_header = await tools_list(http, "1999-01-01")
    assert response.json()["result"]["protocolVersion"] == LATEST_HANDSHAKE_VERSION
    # A request in an unknown version is refused as a JSON-RPC error, never served.
    assert 400 <= unknown_header.status_code < 500
    assert isinstance(unknown_header.json()["error"]["code"], int)
    assert stack.tools.calls == []


@pytest.mark.parametrize("version", list(MODERN_PROTOCOL_VERSIONS))
async def test_the_single_exchange_versions_are_served(stack: Stack, version: str) -> None:
    async with stack.client(stack.keys["A"], "auto") as client:
        assert client.protocol_version == version
        assert len((await client.list_tools()).tools) == 6


# --- the real gateway -------------------------------------------------------------------
# The app `pmsgate serve` runs (create_app over open_container), its booking system the
# emulator through an ASGI transport: keys, tools, cache and limiter are all the real ones.


@dataclass
class RealGateway:
    """The assembled gateway with two of the emulator's facilities registered."""

    app: FastAPI
    services: GatewayServices
    keys: dict[str, str]
    hotel_ids: dict[str, str]

    @asynccontextmanager
    async def client(self, key: str | None, mode: str) -> AsyncIterator[Client]:
        headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
        transport = httpx2.ASGITransport(app=self.app)
        async with (
            httpx2.AsyncClient(transport=transport, base_url=BASE_URL, headers=headers) as http,
            Client(streamable_http_client(MCP_URL, http_client=http), mode=mode) as client,
        ):
            yield client


@pytest.fixture
async def real(
    database_url: str, kross_http: httpx.AsyncClient, kross_store: KrossStore, clock: ManualClock
) -> AsyncIterator[RealGateway]:
    settings = emulator_settings(database_url, kross_http)
    async with open_container(settings, kross_http=kross_http, clock=clock) as container:
        services = container.gateway
        keys: dict[str, str] = {}
        hotel_ids: dict[str, str] = {}
        for who, record in zip("AB", kross_store.facility_summaries()[:2], strict=True):
            _, keys[who] = await services.facilities.add(new_facility_from_seed(record))
            hotel_ids[who] = record["hotel_id"]
        app = create_app(settings, container=container)
        async with app.router.lifespan_context(app):
            yield RealGateway(app=app, services=services, keys=keys, hotel_ids=hotel_ids)


@pytest.mark.parametrize("mode", ERAS)
async def test_real_gateway_lists_the_six_tools_with_the_catalogue_schemas(
    real: RealGateway, mode: str
) -> None:
    listed, _ = await listed_tools(real, mode)

    assert_the_catalogue(listed.tools)


@pytest.mark.parametrize("mode", ERAS)
async def test_real_gateway_answers_every_tool_with_data_and_meta(
    real: RealGateway, mode: str, clock: ManualClock
) -> None:
    today = clock.now().date()
    async with real.client(real.keys["A"], mode) as client:
        first = await client.call_tool("get-in-house-guests", {})
        assert first.is_error is False, first.content
        in_house = _body(first)
        assert in_house["meta"]["source"] == "upstream"
        assert in_house["data"]["count"] == len(in_house["data"]["reservations"]) > 0
        reservation_id = in_house["data"]["reservations"][0]["reservation_id"]

        calls: dict[str, dict[str, Any]] = {
            "check-availability": {
                "arrival": (today + dt.timedelta(days=3)).isoformat(),
                "departure": (today + dt.timedelta(days=5)).isoformat(),
            },
            "get-reservation-status": {"reservation_id": reservation_id},
            "get-incomplete-portals": {},
            "check-portal-status": {"reservation_id": reservation_id},
            "get-checkin-instructions": {"reservation_id": reservation_id},
        }
        for name, arguments in calls.items():
            result = await client.call_tool(name, arguments)
            assert result.is_error is False, (name, result.content)
            meta = _body(result)["meta"]
            assert set(meta) >= {"source", "age_s", "stale", "count", "dropped_out_of_range"}

    # MCP and HTTP serve the same answers from the same cache.
    transport = httpx2.ASGITransport(app=real.app)
    async with httpx2.AsyncClient(transport=transport, base_url=BASE_URL) as http:
        over_http = await http.post(
            "/v1/tools/get-in-house-guests",
            json={},
            headers={"Authorization": f"Bearer {real.keys['A']}"},
        )
    assert over_http.json()["data"] == in_house["data"]
    assert over_http.json()["meta"]["source"] == "cache"


async def test_real_gateway_never_lets_a_key_reach_another_facility(real: RealGateway) -> None:
    async with real.client(real.keys["B"], "auto") as client:
        theirs = _body(await client.call_tool("get-in-house-guests", {}))
    reservation_id = theirs["data"]["reservations"][0]["reservation_id"]

    async with real.client(real.keys["A"], "auto") as client:
        mine = _body(await client.call_tool("get-in-house-guests", {}))
        probe = await client.call_tool("get-reservation-status", {"reservation_id": reservation_id})

    assert reservation_id not in {r["reservation_id"] for r in mine["data"]["reservations"]}
    assert probe.is_error is True
    assert _body(probe)["error"]["code"] == "reservation_not_found"


@pytest.mark.parametrize("mode", ERAS)
async def test_real_gateway_reports_a_tool_error_as_an_error_result(
    real: RealGateway, mode: str
) -> None:
    async with real.client(real.keys["A"], mode) as client:
        result = await client.call_tool("check-availability", {"arrival": "next tuesday"})

    assert result.is_error is True
    error = _body(result)["error"]
    assert error["code"] == "invalid_arguments"
    assert error["hint"]
    assert "arrival" in error["message"] and "departure" in error["message"]


async def test_real_gateway_refuses_a_wrong_key_with_401(real: RealGateway) -> None:
    transport = httpx2.ASGITransport(app=real.app)
    async with httpx2.AsyncClient(
        transport=transport, base_url=BASE_URL, follow_redirects=True
    ) as http:
        missing = await http.post("/mcp", json=INITIALIZE, headers=JSON_HEADERS)
        wrong = await http.post(
            "/mcp",
            json=INITIALIZE,
            headers={**JSON_HEADERS, "Authorization": "Bearer pgw_" + "z" * 43},
        )
    for response, code in [(missing, "missing_gateway_key"), (wrong, "invalid_gateway_key")]:
        assert_error(response, 401, code)


@pytest.mark.parametrize("mode", ERAS)
async def test_real_gateway_refuses_a_key_without_tools_read(real: RealGateway, mode: str) -> None:
    """A key scoped to operations only never reaches an MCP tool (docs/gateway.md, Scopes)."""
    _, key = await real.services.facilities.mint_key(
        real.hotel_ids["A"], "ops only", scopes=["operations:read", write_scope("check-in-guest")]
    )
    with pytest.raises(Exception):  # noqa: B017 - the SDK's exception type is not the point
        async with real.client(key, mode) as client:
            await client.call_tool("get-in-house-guests", {})
    response = await initialize_with(real.app, key)
    assert response.status_code == 403
    error = response.json()["error"]
    assert error["code"] == "scope_missing"
    assert "tools:read" in error["message"] and "tools:read" in error["hint"]
    # The tools-only key of the same facility works over the same SDK.
    _, tools_key = await real.services.facilities.mint_key(real.hotel_ids["A"], "tools")
    async with real.client(tools_key, mode) as client:
        assert len((await client.list_tools()).tools) == len(load_tools())


async def test_real_gateway_serves_mcp_at_exactly_slash_mcp(real: RealGateway) -> None:
    response = await initialize_with(real.app, real.keys["A"])
    # A redirect to /mcp/ is not harmless: behind a TLS-terminating proxy its Location is
    # http://…, which the MCP SDK refuses to follow (downgrade), and some clients do not
    # re-POST on a 307 at all. Route it exactly: app.add_route("/mcp", mcp_app).
    assert response.status_code == 200, response.headers.get("location")
    assert response.json()["result"]["serverInfo"]["name"] == "pmsgate"


async def test_real_gateway_refuses_a_foreign_origin_by_default(real: RealGateway) -> None:
    transport = httpx2.ASGITransport(app=real.app)
    headers = {**JSON_HEADERS, "Authorization": f"Bearer {real.keys['A']}"}
    async with httpx2.AsyncClient(transport=transport, base_url=BASE_URL) as http:
        foreign = await http.post(
            "/mcp", json=INITIALIZE, headers={**headers, "Origin": "https://evil.example"}
        )
        server = await http.post("/mcp", json=INITIALIZE, headers=headers)
    # PMSGATE_ALLOWED_ORIGINS is empty by default: any Origin is foreign, none is a server.
    assert (foreign.status_code, foreign.json()["error"]["code"]) == (403, "origin_not_allowed")
    assert server.status_code == 200


async def test_real_gateway_serves_the_origins_allowed_in_the_settings(
    database_url: str, kross_http: httpx.AsyncClient, kross_store: KrossStore, clock: ManualClock
) -> None:
    settings = emulator_settings(
        database_url,
        kross_http,
        allowed_origins="https://console.example.com, http://localhost:3000/",
    )
    async with served_gateway(settings, kross_http, kross_store, clock, register=False) as served:
        transport = httpx2.ASGITransport(app=served.app)
        async with httpx2.AsyncClient(transport=transport, base_url=BASE_URL) as http:
            answers = [
                await http.post("/mcp", json=INITIALIZE, headers={**JSON_HEADERS, "Origin": origin})
                for origin in ("http://localhost:3000", "https://evil.example")
            ]
    # An allowed origin passes on to the key check (no key here: 401); another is refused.
    assert [a.status_code for a in answers] == [401, 403]
    assert answers[1].json()["error"]["code"] == "origin_not_allowed"
