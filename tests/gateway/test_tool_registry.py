"""A tool is declared once (catalogue/tools.yaml) and answered by a registered answer.

These pin the recipe of docs/extending.md ("How to add a tool"): a seventh tool written
only as a declaration is served over HTTP and MCP, listed in the OpenAPI-shaped listing,
cached for its declared age and rendered as the platform's custom-tool code; and a
declaration that names no registered answer (or an answer no tool uses) fails at once.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import AsyncIterator
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from pmsgate.catalogue.loader import FILES, Catalogue, load_tools, read_catalogue
from pmsgate.clock import ManualClock
from pmsgate.config import Settings
from pmsgate.container import Container, open_container
from pmsgate.gateway.tools import (
    ANSWERS,
    ToolRegistryError,
    Tools,
    answer,
    check_answers,
    unused_answers,
)
from pmsgate.sandbox.kross.store import KrossStore
from tests.e2e.conftest import gateway_on
from tests.gateway.facility_support import new_facility_from_seed
from tests.support.facilities import emulator_settings

# The whole of "adding a tool" when its answer exists: these lines, appended to tools.yaml.
ARRIVALS_TOOL = """
  get-arrivals:
    operation: reservations/get-list
    kind: read
    answer: reservation-list
    answer_options: {select: arriving}
    cache_max_age_s: 600
    description: >-
      Lists the reservations arriving in the property between two days (cancelled
      reservations excluded).
    execution_message_description: Listing the arrivals
    parameters:
      date_from:
        type: string
        format: date
        required: false
        description: >-
          First arrival day to include, as a year-month-day calendar date; leave it out for today.
      date_to:
        type: string
        format: date
        required: false
        description: >-
          Last arrival day to include, as a year-month-day calendar date; leave it out for
          seven days after the first day.
"""


def catalogue_with(tmp_path: Path, extra_tools: str) -> Catalogue:
    """The packaged catalogue copied to ``tmp_path`` with ``extra_tools`` appended to tools.yaml."""
    packaged = resources.files("pmsgate.catalogue")
    for name in (*FILES, "custom_tool_code.py"):
        (tmp_path / name).write_text(packaged.joinpath(name).read_text("utf-8"), "utf-8")
    with (tmp_path / "tools.yaml").open("a", encoding="utf-8") as tools_yaml:
        tools_yaml.write(extra_tools)
    return read_catalogue(tmp_path)


def test_every_declared_tool_names_a_registered_answer_and_every_answer_is_used() -> None:
    tools = load_tools().values()
    check_answers(tools)
    assert unused_answers(tools) == []
    assert {tool.answer for tool in tools} == set(ANSWERS)


def test_a_tool_naming_an_unregistered_answer_fails_loudly() -> None:
    tool = load_tools()["get-in-house-guests"].model_copy(update={"answer": "guests-tonight"})
    with pytest.raises(ToolRegistryError, match="guests-tonight"):
        check_answers([tool])


def test_an_answer_with_a_wrong_option_or_missing_parameters_fails_loudly() -> None:
    in_house = load_tools()["get-in-house-guests"]
    for wrong in ({}, {"select": "leaving"}, {"select": "staying", "colour": "red"}):
        with pytest.raises(ToolRegistryError, match="reservation-list"):
            check_answers([in_house.model_copy(update={"answer_options": wrong})])
    without_date = in_house.model_copy(update={"parameters": {}})
    with pytest.raises(ToolRegistryError, match="needs the parameters"):
        check_answers([without_date])


def test_a_tool_declaring_an_operation_its_answer_does_not_read_fails_loudly() -> None:
    tool = load_tools()["check-portal-status"].model_copy(
        update={"operation": "calendar/get-availability"}
    )
    with pytest.raises(ToolRegistryError, match="reads reservations/get-list"):
        check_answers([tool])


def test_an_answer_no_tool_uses_is_reported_and_a_name_cannot_be_registered_twice() -> None:
    tools = [t for t in load_tools().values() if t.answer != "availability"]
    assert unused_answers(tools) == ["availability"]
    with pytest.raises(ValueError, match="registered twice"):
        answer("availability", reads=[])(ANSWERS["availability"].make)


def test_a_catalogue_with_an_unregistered_answer_is_refused_by_the_tools(tmp_path: Path) -> None:
    catalogue = catalogue_with(tmp_path, ARRIVALS_TOOL.replace("reservation-list", "arrivals"))
    with pytest.raises(ToolRegistryError, match="'arrivals'"):
        Tools(gateway=None, definitions=catalogue.tools)  # type: ignore[arg-type]


def test_a_seventh_tool_declared_in_yaml_becomes_assistant_custom_tool_code(tmp_path: Path) -> None:
    catalogue = catalogue_with(tmp_path, ARRIVALS_TOOL)
    tool = catalogue.tools["get-arrivals"]
    assert list(catalogue.tools)[-1] == "get-arrivals"
    code = tool.custom_tool_code()
    assert 'TOOL_NAME = "get-arrivals"' in code
    compile(code, "get-arrivals.py", "exec")
    body = tool.custom_tool_body("ws-1")
    assert body["name"] == "get-arrivals"
    assert set(body["parameters"]) == {"date_from", "date_to"}


@dataclasses.dataclass
class Served:
    container: Container
    http: httpx.AsyncClient
    app: Any
    key: str


@pytest.fixture
async def served(
    tmp_path: Path,
    database_url: str,
    kross_http: httpx.AsyncClient,
    kross_store: KrossStore,
    clock: ManualClock,
) -> AsyncIterator[Served]:
    """The real gateway (container, app, emulator) serving the catalogue with get-arrivals."""
    (tmp_path / "catalogue").mkdir()
    catalogue = catalogue_with(tmp_path / "catalogue", ARRIVALS_TOOL)
    settings = emulator_settings(database_url, kross_http)
    async with open_container(settings, kross_http=kross_http, clock=clock) as container:
        packaged = container.gateway.tools
        tools = Tools(
            packaged.gateway,
            settings.cache_max_age_s,
            settings.cache_default_max_age_s,
            window=packaged.window,
            definitions=catalogue.tools,
        )
        container = dataclasses.replace(
            container, gateway=dataclasses.replace(container.gateway, tools=tools)
        )
        record = kross_store.facility_summaries()[0]
        _, key = await container.gateway.facilities.add(new_facility_from_seed(record))
        async with gateway_on(settings, container) as gateway:
            yield Served(container, gateway.http, gateway.app, key)


@pytest.mark.anyio
async def test_a_seventh_tool_declared_in_yaml_is_served_over_http_and_mcp(
    served: Served, clock: ManualClock
) -> None:
    auth = {"Authorization": f"Bearer {served.key}"}
    listed = (await served.http.get("/v1/tools")).json()["tools"]
    assert "get-arrivals" in [t["name"] for t in listed]

    today = clock.now().date()
    last = today + dt.timedelta(days=30)
    arguments = {"date_from": today.isoformat(), "date_to": last.isoformat()}
    answer = await served.http.post("/v1/tools/get-arrivals", json=arguments, headers=auth)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body["data"]) >= {"date_from", "date_to", "count", "reservations"}
    assert body["data"]["count"] == len(body["data"]["reservations"])
    for reservation in body["data"]["reservations"]:
        assert today.isoformat() <= reservation["arrival"] <= last.isoformat()
        assert reservation["status"] != "cancelled"
    # The declared freshness bound, with no setting for the new tool.
    assert served.container.gateway.tools.max_age_s("get-arrivals") == 600

    transport = httpx2.ASGITransport(app=served.app)
    async with (
        httpx2.AsyncClient(transport=transport, base_url="http://gateway.test", headers=auth) as h,
        Client(streamable_http_client("http://gateway.test/mcp", http_client=h)) as client,
    ):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["get-arrivals"].input_schema == (
            served.container.gateway.tools.input_schema("get-arrivals")
        )
        result = await client.call_tool("get-arrivals", arguments)
    assert result.is_error is False
    text = result.content[0].text  # type: ignore[union-attr]
    assert json.loads(text)["data"] == body["data"]


def test_declared_freshness_bounds_and_the_environment_still_overrides_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PMSGATE_CACHE_MAX_AGE_S", '{"check-availability": 60}')
    settings = Settings()
    tools = Tools(None, settings.cache_max_age_s, settings.cache_default_max_age_s)  # type: ignore[arg-type]
    assert tools.max_age_s("check-availability") == 60
    # Not in the setting: the declaration's bound, as the old default map gave.
    assert {name: tools.max_age_s(name) for name in tools.definitions} == {
        "check-availability": 60,
        "get-reservation-status": 120,
        "get-in-house-guests": 300,
        "get-incomplete-portals": 300,
        "check-portal-status": 120,
        "get-checkin-instructions": 3600,
    }
    undeclared = load_tools()["check-availability"].model_copy(
        update={"name": "made-up", "cache_max_age_s": None}
    )
    bare = Tools(None, {}, 45.0, definitions={"made-up": undeclared})  # type: ignore[arg-type]
    assert bare.max_age_s("made-up") == 45.0
