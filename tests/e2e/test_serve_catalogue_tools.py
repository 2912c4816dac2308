"""As a new user would: the six catalogue tools created on the platform emulator and run there."""

from __future__ import annotations

import datetime as dt
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from pmsgate.catalogue import load_catalogue
from pmsgate.integrations.assistant.client import AssistantClient, NewCustomTool
from pmsgate.integrations.assistant.errors import AssistantValidationError
from pmsgate.sandbox.assistant.seed import SANDBOX_ASSISTANT_TOKEN
from tests.support.tools import documented_tool_calls

pytestmark = pytest.mark.anyio


@pytest.fixture
async def assistant(running) -> Any:
    async with httpx.AsyncClient(timeout=60) as http:
        yield AssistantClient(
            http,
            base_url=f"{running['sandbox']}/assistant",
            token=SecretStr(SANDBOX_ASSISTANT_TOKEN),
        )


async def test_each_catalogue_tool_created_on_the_assistant_runs_through_the_gateway(
    running, assistant
):
    workspace = await assistant.ensure_workspace("Casa Demo", "casa-demo-e2e")
    await assistant.set_secret(workspace.id, "PMSGATE_GATEWAY_URL", SecretStr(running["gateway"]))
    await assistant.set_secret(workspace.id, "PMSGATE_GATEWAY_KEY", SecretStr(running["key"]))
    catalogue = load_catalogue()
    created = {}
    for name, tool in catalogue.tools.items():
        body = NewCustomTool.model_validate(tool.custom_tool_body(workspace.id))
        created[name] = await assistant.create_custom_tool(body)

    portals = await assistant.run_custom_tool(created["get-incomplete-portals"].id, {})
    assert portals.success, portals.message
    reservation_id = portals.raw_data["data"]["reservations"][0]["reservation_id"]
    # `pmsgate serve` runs on the real clock; stays are refused beyond 3 years from today.
    today = dt.datetime.now(dt.UTC).date()
    arrival = today + dt.timedelta(days=30)
    arguments = documented_tool_calls(reservation_id, arrival, listing="get-in-house-guests")
    for name, parameters in arguments.items():
        run = await assistant.run_custom_tool(created[name].id, parameters)
        assert run.success, (name, run.message)
        assert run.raw_data["meta"]["count"] >= 0


async def test_a_tool_with_an_undescribed_parameter_is_refused_with_the_spec_message(assistant):
    workspace = await assistant.ensure_workspace("Casa Demo", "casa-demo-e2e")
    body = {
        "workspace_id": workspace.id,
        "name": "undocumented-tool",
        "description": "A tool whose parameter has no description.",
        "code": "def main(**params):\n    return {'message': 'ok', 'rawData': None}\n",
        "parameters": {"day": {"type": "string", "required": True}},
        "enable_globally": True,
    }
    with pytest.raises(AssistantValidationError) as refused:
        await assistant.create_custom_tool(NewCustomTool.model_validate(body))
    assert "parameters[].description required" in str(refused.value.upstream_message)
