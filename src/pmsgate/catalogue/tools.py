"""The tools (``tools.yaml``) as typed definitions, and the custom tool each becomes.

A tool's declaration is the one place it is written: the gateway serves every
declared tool (its ``/v1/tools/NAME`` route, its OpenAPI entry and its MCP tool
come from ``input_schema``, ``parameters`` and ``description``), answers it with
the registered answer its ``answer`` names (``pmsgate.gateway.tools.ANSWERS``)
and caches it for its ``cache_max_age_s``; onboarding creates one custom tool per
definition on the assistant platform (``custom_tool_body``), whose code is the
catalogue's one shared template rendered with the tool's name
(``custom_tool_code``). See docs/extending.md, "How to add a tool".
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from pmsgate.boundary import INT64_MAX, INT64_MIN, bounded_schema

# docs/requirements.md R6.2: these six are always there (more may be declared), in the order
# onboarding creates them (docs/requirements.md R21.6).
SPEC_TOOL_NAMES = (
    "check-availability",
    "check-portal-status",
    "get-checkin-instructions",
    "get-reservation-status",
    "get-in-house-guests",
    "get-incomplete-portals",
)

# The years a date parameter may lie in, by the parameter's name.
DateYears = Callable[[str], tuple[int, int]]

# The template's assignments replaced per tool; each must appear exactly once.
_TEMPLATE_CONSTANTS = ("TOOL_NAME", "URL_SECRET", "KEY_SECRET", "TIMEOUT_S")
_SECRET_NAME = r"^[A-Z][A-Z0-9_]{2,63}$"


class ToolParameter(BaseModel):
    """One parameter of a tool; the description explains the format in words.

    The parameter's JSON Schema is what the gateway enforces, no more and no less
    (docs/gateway.md, "Inputs and their bounds"): an integer is a JSON integer (never a
    boolean or a numeric string) within ``minimum`` … ``maximum`` (64 bits when not
    declared), and ``null`` is a value only for a ``nullable`` parameter — leaving an
    optional parameter out is how a caller says "none".
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["string", "integer", "number", "boolean"]
    required: bool = False
    # Required, but its quality ("in words") is the lint's job, so a short one is reported
    # together with every other problem instead of stopping the load at the first.
    description: str
    format: str | None = None
    minimum: int | None = None
    maximum: int | None = None
    max_length: int | None = Field(default=None, ge=1)
    nullable: bool = False

    @model_validator(mode="after")
    def _bounds_fit_the_type(self) -> ToolParameter:
        if (self.minimum is not None or self.maximum is not None) and self.type != "integer":
            raise ValueError("minimum and maximum are for integer parameters")
        if self.max_length is not None and self.type != "string":
            raise ValueError("max_length is for string parameters")
        low = INT64_MIN if self.minimum is None else self.minimum
        high = INT64_MAX if self.maximum is None else self.maximum
        if not INT64_MIN <= low <= high <= INT64_MAX:
            raise ValueError("minimum … maximum must be an interval within 64 bits")
        return self

    def json_schema(self) -> dict[str, Any]:
        """This parameter as a JSON Schema property."""
        schema: dict[str, Any] = {
            "type": [self.type, "null"] if self.nullable else self.type,
            "description": self.description,
        }
        if self.format:
            schema["format"] = self.format
        if self.type == "integer":
            schema["minimum"] = INT64_MIN if self.minimum is None else self.minimum
            schema["maximum"] = INT64_MAX if self.maximum is None else self.maximum
        if self.max_length is not None:
            schema["maxLength"] = self.max_length
        return schema

    def assistant_schema(self) -> dict[str, Any]:
        """This parameter as the assistant platform wants it: {type, required, description}."""
        return {"type": self.type, "required": self.required, "description": self.description}


class CustomToolSettings(BaseModel):
    """How every custom tool reaches the gateway (``custom_tool`` in ``tools.yaml``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    language: Literal["python"]
    # A file name in the catalogue directory, never a path elsewhere.
    template: str = Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
    url_secret: str = Field(pattern=_SECRET_NAME)
    key_secret: str = Field(pattern=_SECRET_NAME)
    timeout_s: float = Field(gt=0, le=120)

    @model_validator(mode="after")
    def _two_secrets(self) -> CustomToolSettings:
        if self.url_secret == self.key_secret:
            raise ValueError("url_secret and key_secret must be two different secrets")
        return self


class CustomToolRuntime(BaseModel):
    """The custom-tool settings with the template's source text, ready to render."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    settings: CustomToolSettings
    template_source: str = Field(repr=False)

    @model_validator(mode="after")
    def _renderable(self) -> CustomToolRuntime:
        for constant in _TEMPLATE_CONSTANTS:
            found = len(re.findall(rf"^{constant} = .*$", self.template_source, re.MULTILINE))
            if found != 1:
                raise ValueError(
                    f"the template {self.settings.template} must assign {constant} exactly "
                    f"once at the start of a line (found {found})"
                )
        if not re.search(r"^def main\(\*\*params", self.template_source, re.MULTILINE):
            raise ValueError(f"the template {self.settings.template} defines no main(**params)")
        compile(self.template_source, self.settings.template, "exec")
        return self

    def render(self, tool_name: str) -> str:
        """The template's source with this tool's name and the configured secrets."""
        values: dict[str, Any] = {
            "TOOL_NAME": tool_name,
            "URL_SECRET": self.settings.url_secret,
            "KEY_SECRET": self.settings.key_secret,
            "TIMEOUT_S": float(self.settings.timeout_s),
        }
        source = self.template_source
        for constant, value in values.items():
            # json.dumps writes a valid Python literal for str and float, quotes escaped.
            found = re.search(rf"^{constant} = .*$", source, re.MULTILINE)
            if found is None:  # refused when the runtime was built; kept for mypy
                raise ValueError(f"the template lost its {constant} assignment")
            line = f"{constant} = {json.dumps(value)}"
            source = source[: found.start()] + line + source[found.end() :]
        return source


class ToolDefinition(BaseModel):
    """A named gateway tool over one booking-system operation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    operation: str
    kind: Literal["read", "write"]
    description: str = Field(min_length=1)
    # What the platform shows while the tool runs.
    execution_message_description: str = Field(min_length=1, max_length=120)
    parameters: dict[str, ToolParameter]
    # At least one of these parameters must be given (none: no such rule). Stated in the
    # OpenAPI body (``anyOf``), not in the MCP input schema: model APIs refuse a tool schema
    # with a top-level anyOf, so there it is said in the descriptions.
    requires_any_of: list[str] = Field(default_factory=list)
    # How the answer is made: the name of a registered answer (pmsgate.gateway.tools.ANSWERS),
    # and the options that answer takes (e.g. which reservations a list selects).
    answer: str = Field(pattern=r"^[a-z][a-z0-9-]*$")
    answer_options: dict[str, str] = Field(default_factory=dict)
    # Freshness bound of the tool's cached reads, in seconds; PMSGATE_CACHE_MAX_AGE_S may
    # override it per tool, and without either PMSGATE_CACHE_DEFAULT_MAX_AGE_S applies.
    cache_max_age_s: float | None = Field(default=None, ge=0)
    # Set by the catalogue loader (not written in tools.yaml): what the code is made from.
    custom_tool: CustomToolRuntime | None = Field(default=None, repr=False, exclude=True)

    @field_validator("name")
    @classmethod
    def _kebab_case(cls, name: str) -> str:
        if len(name) > 64 or not all(part.isalnum() and part.islower() for part in name.split("-")):
            raise ValueError(f"tool name {name!r} must be kebab-case, at most 64 characters")
        return name

    @model_validator(mode="after")
    def _declared_alternatives(self) -> ToolDefinition:
        unknown = [name for name in self.requires_any_of if name not in self.parameters]
        if unknown:
            raise ValueError(f"requires_any_of names no parameter: {', '.join(unknown)}")
        return self

    def input_schema(self, date_years: DateYears | None = None) -> dict[str, Any]:
        """The parameters as one JSON Schema object (for HTTP listings and MCP).

        With ``date_years`` (the years a date parameter may lie in, by parameter name) the
        schema states them (:func:`pmsgate.boundary.bounded_schema`): a ``pattern`` in place
        of ``format: date``. The gateway always passes them: they are what it enforces.
        """
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {name: p.json_schema() for name, p in self.parameters.items()},
            "required": [name for name, p in self.parameters.items() if p.required],
            "additionalProperties": False,
        }
        if date_years is None:
            return schema
        bounded: dict[str, Any] = bounded_schema(schema, date_years)
        return bounded

    def openapi_schema(self, date_years: DateYears | None = None) -> dict[str, Any]:
        """:meth:`input_schema` with what only the HTTP body states (``requires_any_of``)."""
        schema = self.input_schema(date_years)
        if self.requires_any_of:
            schema["anyOf"] = [{"required": [name]} for name in self.requires_any_of]
        return schema

    def custom_tool_code(self) -> str:
        """The Python source of this tool's custom tool (the shared template, rendered)."""
        return self._runtime().render(self.name)

    def custom_tool_body(self, workspace_id: str) -> dict[str, Any]:
        """The assistant platform's ``POST /v1/custom-tools`` body for this tool."""
        runtime = self._runtime()
        return {
            "workspace_id": workspace_id,
            "name": self.name,
            "description": self.description,
            "language": runtime.settings.language,
            "code": runtime.render(self.name),
            "parameters": {name: p.assistant_schema() for name, p in self.parameters.items()},
            "execution_message_description": self.execution_message_description,
            "enable_globally": True,
        }

    def _runtime(self) -> CustomToolRuntime:
        if self.custom_tool is None:
            raise ValueError(
                f"tool {self.name!r} was not loaded through the catalogue; "
                "use load_catalogue().tools"
            )
        return self.custom_tool


class ToolsFile(BaseModel):
    """The shape of ``tools.yaml``."""

    model_config = ConfigDict(extra="forbid")

    custom_tool: CustomToolSettings
    tools: dict[str, ToolDefinition]

    @model_validator(mode="before")
    @classmethod
    def _names_from_keys(cls, raw: Any) -> Any:
        if isinstance(raw, dict) and isinstance(raw.get("tools"), dict):
            raw = {
                **raw,
                "tools": {
                    name: {"name": name, **body} if isinstance(body, dict) else body
                    for name, body in raw["tools"].items()
                },
            }
        return raw

    @field_validator("tools")
    @classmethod
    def _the_six_of_the_spec(cls, tools: dict[str, ToolDefinition]) -> dict[str, ToolDefinition]:
        missing = [n for n in SPEC_TOOL_NAMES if n not in tools]
        if missing:
            raise ValueError(
                f"the catalogue must define the six standard tools (missing: {', '.join(missing)})"
            )
        return tools
