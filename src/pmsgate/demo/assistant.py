"""Demo chapter 3: the catalogue provisioned on the assistant platform, run through the gateway."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import uvicorn
from pydantic import SecretStr
from rich.markup import escape

from pmsgate.catalogue import load_catalogue
from pmsgate.demo.story import Story
from pmsgate.integrations.assistant.client import AssistantClient, NewCustomTool
from pmsgate.integrations.assistant.errors import AssistantError
from pmsgate.sandbox.assistant.seed import SANDBOX_ASSISTANT_TOKEN


@asynccontextmanager
async def served_on_loopback(app: Any) -> AsyncIterator[str]:
    """Serve an ASGI app (its lifespan already entered) on a free 127.0.0.1 port."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="off", log_config=None)
    )
    task = asyncio.create_task(server.serve())
    while not server.started:  # the platform's tool runs are separate processes: real HTTP
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


async def assistant_chapter(
    story: Story,
    sandbox_http: httpx.AsyncClient,
    assistant_url: str,
    gateway_app: Any,
    gateway_key: str,
    today: dt.date,
) -> None:
    """Create a workspace, provision the six catalogue tools, run each on the platform
    (stay dates relative to ``today``, the gateway's clock: the gateway refuses absurd dates)."""
    story.chapter(3, "The catalogue on the assistant platform, run through the gateway")
    catalogue = load_catalogue()
    story.say(f"Catalogue v{catalogue.version} passes its lint: {catalogue.counts()}.")
    assistant = AssistantClient(
        sandbox_http,
        base_url=assistant_url,
        token=SecretStr(SANDBOX_ASSISTANT_TOKEN),
    )
    workspace = await assistant.ensure_workspace("Casa Demo", "casa-demo")
    async with served_on_loopback(gateway_app) as gateway_url:
        # The key lives in the workspace secrets, never in the tools' code.
        await assistant.set_secret(workspace.id, "PMSGATE_GATEWAY_URL", SecretStr(gateway_url))
        await assistant.set_secret(workspace.id, "PMSGATE_GATEWAY_KEY", SecretStr(gateway_key))
        tools = {}
        for name, tool in catalogue.tools.items():
            body = NewCustomTool.model_validate(tool.custom_tool_body(workspace.id))
            tools[name] = await assistant.create_custom_tool(body)
        portals = await assistant.run_custom_tool(tools["get-incomplete-portals"].id, {})
        rows = portals.raw_data["data"]["reservations"] if portals.success else []
        reservation = rows[0]["reservation_id"] if rows else 1
        runs: dict[str, dict[str, Any]] = {
            "check-availability": {
                "arrival": (today + dt.timedelta(days=45)).isoformat(),
                "departure": (today + dt.timedelta(days=48)).isoformat(),
            },
            "get-reservation-status": {"reservation_id": reservation},
            "get-in-house-guests": {},
            "get-incomplete-portals": {},
            "check-portal-status": {"reservation_id": reservation},
            "get-checkin-instructions": {"reservation_id": reservation},
        }
        rows = []
        for name, parameters in runs.items():
            run = await assistant.run_custom_tool(tools[name].id, parameters)
            rows.append([name, "yes" if run.success else "no", run.message])
        story.table(
            f"The custom tools of workspace {workspace.id}, each run on the assistant platform",
            ["tool", "success", "what the guest assistant reads"],
            rows,
            wrap="what the guest assistant reads",
        )
        succeeded = sum(row[1] == "yes" for row in rows)
        story.measured(
            "Catalogue",
            f"v{catalogue.version} provisioned: {len(tools)} custom tools in a workspace, "
            f"{succeeded} of {len(rows)} runs on the assistant platform answered "
            "through the gateway",
        )

    undocumented = {
        "workspace_id": workspace.id,
        "name": "undocumented-tool",
        "description": "A tool whose parameter has no description.",
        "code": "def main(**params):\n    return {'message': 'ok', 'rawData': None}\n",
        "parameters": {"day": {"type": "string", "required": True}},
    }
    try:
        await assistant.create_custom_tool(NewCustomTool.model_validate(undocumented))
    except AssistantError as error:
        story.say(
            "A tool with an undescribed parameter is refused by the platform: "
            f"[bold]{escape(str(error.upstream_message))}[/]."
        )
        story.measured("Catalogue", "a tool with an undescribed parameter refused")
