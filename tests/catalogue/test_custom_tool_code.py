"""The custom-tool code: one template, rendered per tool, calling a live gateway over loopback.

The code runs as the platform runs it: ``main(**params)`` in a separate bare
interpreter (no site-packages, so only the standard library), with the workspace
secrets as its whole environment; the gateway is a real uvicorn server on
127.0.0.1 in front of the booking-system emulator.
"""

from __future__ import annotations

import ast
import datetime as dt
import re
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx
import pytest

from pmsgate.catalogue import SPEC_TOOL_NAMES, load_catalogue
from tests.e2e.processes import free_port

from .support import KEY_SECRET, URL_SECRET, live_gateway, run_tool_code


@pytest.mark.parametrize("name", SPEC_TOOL_NAMES)
def test_rendered_code_compiles_defines_main_and_holds_no_key(name):
    code = load_catalogue().tools[name].custom_tool_code()
    tree = ast.parse(code)
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert functions["main"].args.kwarg is not None  # main(**params)
    assert f'TOOL_NAME = "{name}"' in code
    assert f'URL_SECRET = "{URL_SECRET}"' in code
    assert f'KEY_SECRET = "{KEY_SECRET}"' in code
    assert "pgw_" not in code
    assert not re.search(r"Bearer [A-Za-z0-9_-]{8,}", code)
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module)])
    }
    assert imported <= {"__future__", "json", "os", "urllib", "typing"}


@pytest.mark.parametrize("name", SPEC_TOOL_NAMES)
def test_rendered_code_imports_only_what_the_python_runtime_lists(name):
    # GET /v1/custom-tools/runtimes is the documented code contract (standard library
    # always importable, a curated package list); the emulator answers it the same way.
    from pmsgate.integrations.assistant.client import CustomToolRuntime
    from pmsgate.sandbox.assistant.store import RUNTIMES

    python = next(
        CustomToolRuntime.model_validate(r) for r in RUNTIMES if r["language"] == "python"
    )
    tree = ast.parse(load_catalogue().tools[name].custom_tool_code())
    modules = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module)])
    }
    assert all(python.allows_import(module) for module in modules), modules
    assert python.entrypoint == "def main(**params):"


def test_every_tool_shares_one_template_differing_only_by_name():
    catalogue = load_catalogue()
    codes = {
        re.sub(r"^TOOL_NAME = .*$", "", tool.custom_tool_code(), flags=re.MULTILINE)
        for tool in catalogue.tools.values()
    }
    assert len(codes) == 1


def test_missing_secrets_give_an_answer_naming_them_not_an_exception(tmp_path):
    code = load_catalogue().tools["check-availability"].custom_tool_code()

    result = run_tool_code(code, {"arrival": "2026-12-01", "departure": "2026-12-03"}, {}, tmp_path)

    assert result["rawData"]["error"]["code"] == "missing_secret"
    assert URL_SECRET in result["message"] and KEY_SECRET in result["message"]


def test_an_unreachable_gateway_gives_an_answer_with_a_hint(tmp_path):
    code = load_catalogue().tools["get-in-house-guests"].custom_tool_code()
    env = {URL_SECRET: f"http://127.0.0.1:{free_port()}", KEY_SECRET: "not-a-real-key"}

    result = run_tool_code(code, {}, env, tmp_path)

    assert result["rawData"]["error"]["code"] == "gateway_unreachable"
    assert "Hint:" in result["message"]
    assert "not-a-real-key" not in result["message"]


async def _run(code: str, params: dict[str, Any], env: dict[str, str], workdir: Path) -> Any:
    # A thread, so the event loop keeps serving the gateway while the child process calls it.
    return await anyio.to_thread.run_sync(partial(run_tool_code, code, params, env, workdir))


@pytest.mark.anyio
async def test_check_availability_code_returns_availability_from_a_live_gateway(
    database_url, kross_http, kross_store, clock, tmp_path
):
    catalogue = load_catalogue()
    today = clock.now().date()
    params = {
        "arrival": (today + dt.timedelta(days=10)).isoformat(),
        "departure": (today + dt.timedelta(days=13)).isoformat(),
        "apartment_id": None,  # the assistant often sends empty optionals
    }
    async with live_gateway(database_url, kross_http, kross_store, clock) as (url, key, record):
        env = {URL_SECRET: url + "/", KEY_SECRET: key}
        result = await _run(
            catalogue.tools["check-availability"].custom_tool_code(), params, env, tmp_path
        )
        async with httpx.AsyncClient(base_url=url) as http:
            direct = await http.post(
                "/v1/tools/check-availability",
                json={"arrival": params["arrival"], "departure": params["departure"]},
                headers={"Authorization": f"Bearer {key}"},
            )

    data = result["rawData"]["data"]
    assert data == direct.json()["data"]
    apartments = kross_store.facility(record["hotel_id"]).apartments
    assert {a["apartment_id"] for a in data["apartments"]} == set(apartments)
    assert data["nights"] == 3
    assert result["message"].startswith(
        f"{data['available_count']} of {len(apartments)} apartments free from {params['arrival']}"
    )


@pytest.mark.anyio
async def test_every_tool_answers_through_its_code_and_gateway_errors_carry_code_and_hint(
    database_url, kross_http, kross_store, clock, tmp_path
):
    catalogue = load_catalogue()
    async with live_gateway(database_url, kross_http, kross_store, clock) as (url, key, _):
        env = {URL_SECRET: url, KEY_SECRET: key}

        async def run(name: str, **params: Any) -> Any:
            return await _run(catalogue.tools[name].custom_tool_code(), params, env, tmp_path)

        in_house = await run("get-in-house-guests")
        reservation_id = in_house["rawData"]["data"]["reservations"][0]["reservation_id"]
        answers = {
            "get-in-house-guests": in_house,
            "get-reservation-status": await run(
                "get-reservation-status", reservation_id=reservation_id
            ),
            "check-portal-status": await run("check-portal-status", reservation_id=reservation_id),
            "get-incomplete-portals": await run("get-incomplete-portals"),
            "get-checkin-instructions": await run(
                "get-checkin-instructions", reservation_id=reservation_id
            ),
        }
        wrong_key = await _run(
            catalogue.tools["get-in-house-guests"].custom_tool_code(),
            {},
            {**env, KEY_SECRET: "pgw_" + "x" * 43},
            tmp_path,
        )
        bad_dates = await run("check-availability", arrival="2026-12-05", departure="2026-12-01")

    for name, answer in answers.items():
        assert "data" in answer["rawData"], (name, answer)
        assert "failed" not in answer["message"], (name, answer["message"])
    assert f"Reservation {reservation_id}:" in answers["get-reservation-status"]["message"]
    assert answers["get-checkin-instructions"]["message"].startswith("Check-in instructions")
    assert wrong_key["rawData"]["error"]["code"] in wrong_key["message"]
    assert "Hint:" in wrong_key["message"]
    assert bad_dates["rawData"]["error"]["code"] == "invalid_date_range"
    assert "invalid_date_range" in bad_dates["message"]
