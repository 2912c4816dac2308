"""Loads the tool catalogue (``tools.yaml``) into typed definitions."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator


class ToolParameter(BaseModel):
    """One parameter of a tool; the description explains the format in words."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["string", "integer", "number", "boolean"]
    required: bool = False
    description: str = Field(min_length=20)
    format: str | None = None

    def json_schema(self) -> dict[str, Any]:
        """This parameter as a JSON Schema property."""
        schema: dict[str, Any] = {"type": self.type, "description": self.description}
        if self.format:
            schema["format"] = self.format
        return schema


class ToolDefinition(BaseModel):
    """A named gateway tool over one booking-system operation."""

    model_config = ConfigDict(extra="forbid")

    name: str
    operation: str
    kind: Literal["read", "write"]
    description: str
    parameters: dict[str, ToolParameter]

    @field_validator("name")
    @classmethod
    def _kebab_case(cls, name: str) -> str:
        if len(name) > 64 or not all(part.isalnum() and part.islower() for part in name.split("-")):
            raise ValueError(f"tool name {name!r} must be kebab-case, at most 64 characters")
        return name

    def input_schema(self) -> dict[str, Any]:
        """The parameters as one JSON Schema object (for HTTP listings and MCP)."""
        return {
            "type": "object",
            "properties": {name: p.json_schema() for name, p in self.parameters.items()},
            "required": [name for name, p in self.parameters.items() if p.required],
            "additionalProperties": False,
        }


@lru_cache(maxsize=1)
def load_tools() -> dict[str, ToolDefinition]:
    """The six tools of the catalogue, by name."""
    text = resources.files("pmsgate.catalogue").joinpath("tools.yaml").read_text("utf-8")
    raw = yaml.safe_load(text)
    return {
        name: ToolDefinition(name=name, **definition) for name, definition in raw["tools"].items()
    }
