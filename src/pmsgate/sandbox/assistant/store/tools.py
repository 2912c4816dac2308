"""Custom tools: their code and parameters, validated as the platform does, and their runs.

A run executes the tool's Python ``main(**params)`` in a child interpreter
(:mod:`~pmsgate.sandbox.assistant.runner`) with the workspace secrets as its
environment, and is recorded so tests can see what was called.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from pmsgate.sandbox.assistant.runner import RunOutcome, run_python_tool
from pmsgate.sandbox.assistant.store.checks import (
    check_arguments,
    check_language,
    check_name,
    check_parameters,
    required_text,
)
from pmsgate.sandbox.assistant.store.core import (
    FieldCheck,
    StoreCore,
    as_given,
    found_on,
    listed_on,
)
from pmsgate.sandbox.assistant.store.records import CustomTool, Tenant, ToolRun

MAX_DESCRIPTION = 2000
MAX_CODE = 200_000

# GET /v1/custom-tools/runtimes: the documented contract; field names are this project's.
PYTHON_BUILTIN_MODULES = (
    "asyncio",
    "base64",
    "collections",
    "dataclasses",
    "datetime",
    "decimal",
    "enum",
    "functools",
    "hashlib",
    "hmac",
    "itertools",
    "json",
    "math",
    "os",
    "re",
    "statistics",
    "string",
    "time",
    "typing",
    "urllib",
    "uuid",
    "zoneinfo",
    "__future__",
)
RUNTIMES: tuple[dict[str, Any], ...] = (
    {
        "language": "python",
        "entrypoint": "def main(**params):",
        "return_contract": {"message": "string, required", "rawData": "any JSON, optional"},
        "template": 'def main(**params):\n    return {"message": "ok", "rawData": params}\n',
        "builtin_modules": list(PYTHON_BUILTIN_MODULES),
        # The emulator runs tools in its own interpreter: these are importable there.
        "packages": ["httpx"],
    },
    {
        "language": "javascript",
        "entrypoint": "async function main(params) {",
        "return_contract": {"message": "string, required", "rawData": "any JSON, optional"},
        "template": "async function main(params) {\n  return { message: 'ok' }\n}\n",
        "builtin_modules": ["crypto", "url", "util"],
        "packages": [],
    },
)


def _tools(tenant: Tenant) -> dict[str, CustomTool]:
    return tenant.tools


def _kebab(value: Any) -> str:
    return check_name("name", value)


class ToolsMixin(StoreCore):
    """Custom tools: create, read, change, delete, run; the runtimes they may target."""

    def create_tool(
        self,
        workspace_id: str,
        *,
        name: str,
        description: str,
        language: str,
        code: str,
        parameters: Mapping[str, Any],
        execution_message_description: str | None = None,
        enable_globally: bool = False,
    ) -> CustomTool:
        """A new custom tool, validated as the platform does (docs/assistant-api.md)."""
        tenant = self._tenant(workspace_id)
        self._unique_name(tenant.tools, "a custom tool", _kebab)(name)
        tool = CustomTool(
            **self._fresh(workspace_id),
            name=name,
            description=required_text("description", description, MAX_DESCRIPTION),
            language=check_language(language),
            code=required_text("code", code, MAX_CODE),
            parameters=check_parameters(parameters),
            execution_message_description=execution_message_description,
            enable_globally=enable_globally,
        )
        return self._keep(tenant.tools, tool)

    tools = listed_on(_tools)
    tool = found_on(_tools, "custom tool")

    def update_tool(self, tool_id: str, changes: Mapping[str, Any]) -> CustomTool:
        """Change some fields of a tool; the same validation as on creation."""
        tool = self.tool(tool_id)
        shelf = self._tenant(tool.workspace_id).tools
        checks: dict[str, FieldCheck] = {
            "name": self._unique_name(shelf, "a custom tool", _kebab, renamed=tool_id),
            "description": lambda v: required_text("description", v, MAX_DESCRIPTION),
            "language": check_language,
            "code": lambda v: required_text("code", v, MAX_CODE),
            "parameters": check_parameters,
            "execution_message_description": as_given,
            "enable_globally": as_given,
        }
        checked = self._checked(changes, checks)
        if "code" in checked and checked["code"] != tool.code:
            tool.version += 1
        self._apply(tool, checked)
        return tool

    def delete_tool(self, tool_id: str) -> None:
        """Remove a tool (its recorded runs stay)."""
        tool = self.tool(tool_id)
        self._forget(self._tenant(tool.workspace_id).tools, tool_id)

    async def run_tool(self, tool_id: str, parameters: Mapping[str, Any]) -> ToolRun:
        """Execute a tool with the workspace secrets as environment, and record the run."""
        tool = self.tool(tool_id)
        tenant = self._tenant(tool.workspace_id)
        check_arguments(tool.parameters, parameters)
        if tool.language != "python":
            outcome = RunOutcome(False, "this sandbox runs python tools only", None, 0)
        else:
            outcome = await run_python_tool(
                tool.code,
                parameters,
                {s.name: s.value for s in tenant.secrets.values()},
                timeout_s=self.config.tool_timeout_s,
            )
        run = ToolRun(
            output_message=outcome.message if outcome.success else "",
            seq=self._next_seq(),
            id=self._new_id(),
            workspace_id=tool.workspace_id,
            tool_id=tool.id,
            tool_name=tool.name,
            parameters=copy.deepcopy(dict(parameters)),
            at=self.now(),
            success=outcome.success,
            message=outcome.message,
            raw_data=outcome.raw_data,
            duration_ms=outcome.duration_ms,
        )
        tenant.runs.append(run)
        self.stats.tool_runs += 1
        return run

    def tool_runs(self, workspace_id: str) -> list[ToolRun]:
        """Every recorded run of the workspace's tools, oldest first."""
        return list(self._tenant(workspace_id).runs)

    def runtimes(self) -> list[dict[str, Any]]:
        """The custom-tool runtimes: entrypoint, return contract, importable modules."""
        return copy.deepcopy(list(RUNTIMES))
