"""The input rules of every route (pmsgate.boundary): control characters, integers beyond
64 bits and non-finite numbers are a 422 with a clear code, never stored, never sent upstream."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.answers import assert_error
from tests.support.mcp import mcp_client

pytestmark = pytest.mark.anyio

BAD_BODIES = [
    ('{"reservation_id": 1, "note": "a\\u0000b"}', "invalid_characters"),
    ('{"reservation_id": 1, "a\\u001bb": 1}', "invalid_characters"),
    ('{"reservation_id": "\\ud800"}', "invalid_characters"),
    ('{"reservation_id": 9223372036854775808}', "integer_out_of_range"),
    ('{"reservation_id": -9223372036854775809}', "integer_out_of_range"),
    ('{"reservation_id": ' + "9" * 5000 + "}", "integer_out_of_range"),
    ('{"reservation_id": NaN}', "number_out_of_range"),
    ('{"reservation_id": 1e999}', "number_out_of_range"),
]


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}


@pytest.mark.parametrize(("raw", "code"), BAD_BODIES)
@pytest.mark.parametrize(
    "path", ["/v1/tools/get-reservation-status", "/v1/operations/reservations/get-list"]
)
async def test_a_body_breaking_an_input_rule_is_a_422_with_its_code_and_nothing_is_sent(
    gateway, facility, kross_store, path: str, raw: str, code: str
) -> None:
    _, key = facility
    before = kross_store.stats.requests_total
    answer = await gateway.http.post(path, content=raw.encode(), headers=_auth(key))
    assert_error(answer, 422, code)
    assert kross_store.stats.requests_total == before


async def test_tabs_and_line_breaks_are_text_not_control_characters(gateway, facility) -> None:
    _, key = facility
    answer = await gateway.http.post(
        "/v1/operations/reservations/get-list",
        content=b'{"n_page": 1, "\\tnote": "line one\\nline two\\r"}',
        headers=_auth(key),
    )
    assert answer.json().get("error", {}).get("code") != "invalid_characters", answer.text


@pytest.mark.parametrize(
    "url", ["/v1/tools/get-in-house-guests%00", "/v1/tools/get-in-house-guests?x=%07"]
)
async def test_a_control_character_in_the_path_or_query_is_a_422(
    gateway, facility, url: str
) -> None:
    _, key = facility
    answer = await gateway.http.post(url, json={}, headers=_auth(key))
    assert (answer.status_code, answer.json()["error"]["code"]) == (422, "invalid_characters")


async def mcp_error_codes(gateway: Any, key: str, *calls: tuple[str, Any]) -> list[str]:
    """Call each ``(tool, arguments)`` over MCP with ``key``; every answer is an error; the
    error codes."""
    async with mcp_client(gateway.app, key) as client:
        results = [await client.call_tool(name, arguments) for name, arguments in calls]
    assert all(result.is_error for result in results), results
    return [result.structured_content["error"]["code"] for result in results]


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"reservation_id": 2**63}, "integer_out_of_range"),
        ({"reservation_id": 1, "note": "\x00"}, "invalid_characters"),
    ],
)
async def test_mcp_tool_arguments_follow_the_same_rules(
    gateway, facility, kross_store, arguments: dict[str, Any], code: str
) -> None:
    _, key = facility
    before = kross_store.stats.requests_total
    codes = await mcp_error_codes(gateway, key, ("get-reservation-status", arguments))
    assert codes == [code]
    assert kross_store.stats.requests_total == before


# --- strict inputs: what the schema states, no more (docs/gateway.md, Inputs and their bounds) --

STRICT_TOOL_REFUSALS = [
    ("get-in-house-guests", {"date": None}),
    ("get-incomplete-portals", {"date_from": None}),
    ("get-reservation-status", {"reservation_id": True}),
    ("get-reservation-status", {"reservation_id": 0}),
    ("get-reservation-status", {"reservation_id": -1}),
    ("get-reservation-status", {"reservation_id": -(2**63)}),
    ("get-reservation-status", {"reservation_id": 2**53}),
    ("get-reservation-status", {"reservation_id": "12"}),
    ("get-reservation-status", {"reservation_id": 12.0}),
    ("get-reservation-status", {"reservation_id": None}),
    (
        "check-availability",
        {"arrival": "2026-12-01", "departure": "2026-12-03", "apartment_id": -1},
    ),
    ("check-availability", {"arrival": "2026-12-01", "departure": "2026-12-03", "apartment_id": 0}),
    (
        "check-availability",
        {"arrival": "2026-12-01", "departure": "2026-12-03", "apartment_id": True},
    ),
    ("get-checkin-instructions", {"apartment_id": -(2**63)}),
]


@pytest.mark.parametrize(("tool", "arguments"), STRICT_TOOL_REFUSALS)
async def test_a_null_a_boolean_or_a_non_positive_identifier_is_refused_before_the_limiter(
    gateway, facility, kross_store, tool: str, arguments: dict[str, Any]
) -> None:
    _, key = facility
    before = kross_store.stats.requests_total
    answer = await gateway.http.post(f"/v1/tools/{tool}", json=arguments, headers=_auth(key))
    assert_error(answer, 422, "invalid_arguments")
    assert kross_store.stats.requests_total == before


@pytest.mark.parametrize(
    ("operation", "payload"),
    [
        ("reservations/get-list", {"offset": False}),
        ("reservations/get-list", {"limit": True}),
        ("reservations/get-list", {"id_reservation": 0}),
        ("reservations/get-list", {"id_reservation": "5"}),
        ("reservations/get-list", {"with_rooms": 1}),
        ("calendar/get-availability", {"date_from": "2026-12-01", "date_to": None}),
        ("get-check-in-instructions", {"id_room_type": -(2**63)}),
        ("get-check-in-instructions", {"id_room_type": True}),
    ],
)
async def test_operation_payloads_are_read_strictly(
    gateway, facility, kross_store, operation: str, payload: dict[str, Any]
) -> None:
    _, key = facility
    before = kross_store.stats.requests_total
    answer = await gateway.http.post(
        f"/v1/operations/{operation}", json=payload, headers=_auth(key)
    )
    assert_error(answer, 422, "invalid_payload")
    assert kross_store.stats.requests_total == before


async def test_null_is_a_value_where_the_schema_says_nullable(gateway, facility) -> None:
    _, key = facility
    answer = await gateway.http.post(
        "/v1/operations/reservations/get-list", json={"id_reservation": None}, headers=_auth(key)
    )
    assert answer.status_code == 200, answer.text


async def test_the_openapi_states_the_bounds_the_gateway_enforces(gateway, clock) -> None:
    document = (await gateway.http.get("/openapi.json")).json()
    body = "requestBody"
    tool = document["paths"]["/v1/tools/get-in-house-guests"]["post"][body]["content"]
    date = tool["application/json"]["schema"]["properties"]["date"]
    year = clock.now().year
    assert "format" not in date and str(year + 2) in date["pattern"]
    assert str(year + 3) not in date["pattern"] and str(year - 2) not in date["pattern"]
    status = document["paths"]["/v1/tools/get-reservation-status"]["post"][body]
    identifier = status["content"]["application/json"]["schema"]["properties"]["reservation_id"]
    assert (identifier["minimum"], identifier["maximum"]) == (1, 2**53 - 1)
    assert status["required"] is True
    guest = document["components"]["schemas"]["GuestDetails"]["properties"]["birth_date"]
    assert str(year - 119) in guest["pattern"] and str(year) not in guest["pattern"]


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"reservation_id": True}, "invalid_arguments"),
        ({"reservation_id": 0}, "invalid_arguments"),
        ({"reservation_id": None}, "invalid_arguments"),
    ],
)
async def test_mcp_refuses_the_same_inputs(
    gateway, facility, kross_store, arguments: dict[str, Any], code: str
) -> None:
    _, key = facility
    before = kross_store.stats.requests_total
    codes = await mcp_error_codes(
        gateway,
        key,
        ("get-reservation-status", arguments),
        ("get-in-house-guests", {"date": None}),
    )
    assert codes == [code, "invalid_arguments"]
    assert kross_store.stats.requests_total == before
