"""As a new user would: sandbox and gateway running, a facility added with the CLI, tools called."""

from __future__ import annotations

import datetime as dt
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.tools import documented_tool_calls


def tool(
    running: dict[str, Any], name: str, key: str | None = None, **arguments: Any
) -> httpx.Response:
    return httpx.post(
        f"{running['gateway']}/v1/tools/{name}",
        json=arguments,
        headers={"Authorization": f"Bearer {key or running['key']}"},
    )


def test_all_six_tools_answer_over_http(running):
    in_house = tool(running, "get-in-house-guests")
    assert in_house.status_code == 200, in_house.text
    reservations = (
        in_house.json()["data"]["reservations"]
        or tool(running, "get-incomplete-portals").json()["data"]["reservations"]
    )
    reservation_id = reservations[0]["reservation_id"]
    today = dt.date.today()
    arrival = today + dt.timedelta(days=2)
    calls = documented_tool_calls(reservation_id, arrival, listing="get-incomplete-portals")
    for name, arguments in calls.items():
        answer = tool(running, name, **arguments)
        assert answer.status_code == 200, (name, answer.text)


def test_two_hundred_rapid_calls_stay_within_the_limits_without_errors(running):
    before = httpx.get(f"{running['kross']}/_sandbox/stats").json()
    answers = [tool(running, "get-incomplete-portals") for _ in range(200)]
    after = httpx.get(f"{running['kross']}/_sandbox/stats").json()
    assert {a.status_code for a in answers} == {200}
    hotel = running["facility"]["hotel_id"]
    sent = after["requests"]["by_hotel"].get(hotel, 0) - before["requests"]["by_hotel"].get(
        hotel, 0
    )
    assert sent <= 10
    assert after["rate_limited"]["total"] == 0


def test_a_wrong_key_gets_401(running):
    answer = tool(running, "get-in-house-guests", key="pgw_wrong")
    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "invalid_gateway_key"


def test_metrics_and_health_are_served(running):
    assert httpx.get(f"{running['gateway']}/readyz").json()["status"] == "ready"
    metrics = httpx.get(f"{running['gateway']}/metrics").text
    assert "pmsgate_tool_calls_total" in metrics
    assert "pmsgate_budget_remaining" in metrics


@pytest.mark.anyio
async def test_the_same_tools_answer_over_mcp(running):
    headers = {"Authorization": f"Bearer {running['key']}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(f"{running['gateway']}/mcp", http_client=http)) as client,
    ):
        listed = await client.list_tools()
        assert len(listed.tools) == 6
        result = await client.call_tool("get-incomplete-portals", {})
    assert not result.is_error
    assert "reservations" in result.content[0].text
