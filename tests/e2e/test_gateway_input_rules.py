"""The input rules of every route (pmsgate.boundary): control characters, integers beyond
64 bits and non-finite numbers are a 422 with a clear code, never stored, never sent upstream."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

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
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == code
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
    transport = httpx2.ASGITransport(app=gateway.app)
    async with (
        httpx2.AsyncClient(
            transport=transport,
            base_url="http://gateway.test",
            headers={"Authorization": f"Bearer {key}"},
        ) as http,
        Client(streamable_http_client("http://gateway.test/mcp", http_client=http)) as client,
    ):
        result = await client.call_tool("get-reservation-status", arguments)
    assert result.is_error
    assert result.structured_content["error"]["code"] == code
    assert kross_store.stats.requests_total == before
