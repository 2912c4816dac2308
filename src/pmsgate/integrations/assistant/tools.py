"""Custom tools: their code and parameters, their runs, and the runtimes they may target."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Unpack

from pydantic import ValidationError

from pmsgate.integrations.assistant.errors import AssistantUnexpectedResponse
from pmsgate.integrations.assistant.models import (
    CustomTool,
    CustomToolRuntime,
    CustomToolUpdate,
    NewCustomTool,
    ToolRunResult,
)
from pmsgate.integrations.assistant.transport import OnObject, Transport, shape_error

TOOLS = "/v1/custom-tools"
RUNTIMES = "/v1/custom-tools/runtimes"


class ToolsMixin(Transport):
    """Custom tools: create, list, read, change, delete, run; the runtimes' contract."""

    async def create_custom_tool(
        self, tool: NewCustomTool, *, idempotency_key: str | None = None
    ) -> CustomTool:
        """Create one custom tool."""
        return await self._create(CustomTool, TOOLS, tool, idempotency_key)

    async def list_custom_tools(self, workspace_id: str) -> list[CustomTool]:
        """Every custom tool of a workspace (all pages)."""
        return await self._in_workspace(CustomTool, TOOLS, workspace_id)

    async def get_custom_tool(self, tool_id: str, *, workspace_id: str | None = None) -> CustomTool:
        """One custom tool."""
        return await self._get_object(CustomTool, TOOLS, tool_id, workspace_id)

    async def update_custom_tool(
        self, tool_id: str, changes: CustomToolUpdate, **on: Unpack[OnObject]
    ) -> CustomTool:
        """Change the fields set in ``changes``."""
        return await self._update_object(CustomTool, TOOLS, tool_id, changes, **on)

    async def delete_custom_tool(self, tool_id: str, **on: Unpack[OnObject]) -> None:
        """Delete a custom tool."""
        await self._delete_object(TOOLS, tool_id, **on)

    async def run_custom_tool(
        self,
        tool_id: str,
        parameters: Mapping[str, Any] | None = None,
        **on: Unpack[OnObject],
    ) -> ToolRunResult:
        """Run a tool; a tool that fails answers ``success=False``, not an error."""
        scope = self._scope_of(tool_id, on.get("workspace_id"))
        body = {"parameters": dict(parameters or {})}
        route = f"POST {TOOLS}/{{id}}/run"
        return await self._ask(
            ToolRunResult, route, tool_id, scope=scope, body=body, key=on.get("idempotency_key")
        )

    async def custom_tool_runtimes(self) -> list[CustomToolRuntime]:
        """The runtimes tool code may target (``GET /v1/custom-tools/runtimes``): the contract."""
        answer = await self._call("GET", RUNTIMES, None)
        data = answer.get("data", answer) if isinstance(answer, dict) else answer
        if isinstance(data, dict):
            # Tolerance: a mapping keyed by language reads like the list.
            data = [
                {"language": lang, **(v if isinstance(v, dict) else {})} for lang, v in data.items()
            ]
        try:
            return [CustomToolRuntime.model_validate(item) for item in data or []]
        except ValidationError as exc:
            raise shape_error(CustomToolRuntime, exc, "GET", RUNTIMES) from None
        except TypeError:
            raise AssistantUnexpectedResponse(
                "The runtimes answer is not a list.", method="GET", path=RUNTIMES
            ) from None
