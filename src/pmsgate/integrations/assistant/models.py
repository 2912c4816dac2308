"""The assistant platform's wire models: the bodies the client sends and the objects it reads.

Shapes: ``docs/assistant-api.md`` (the public reference's, plus this project's
written-down assumptions). An answer keeps unknown fields (:class:`Answer`); a body
we send refuses them (:class:`Outgoing`): an unknown field there is a bug on our side.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any, Generic, Literal, TypeVar

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator


class Answer(BaseModel):
    """An object the platform answered: unknown fields are kept, not refused."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Outgoing(BaseModel):
    """A body we send: unknown fields are a bug on our side."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


M = TypeVar("M", bound=Answer)


class Page(BaseModel, Generic[M]):
    """One page of a list: ``{data, next_cursor, has_more}``."""

    model_config = ConfigDict(extra="allow")

    data: list[M]
    next_cursor: str | None = None
    has_more: bool = False


class Workspace(Answer):
    """A workspace; the id is read from ``id`` or ``workspace_id`` (onboarding's name for it)."""

    id: str = Field(validation_alias=AliasChoices("id", "workspace_id"))
    name: str = ""
    slug: str | None = None
    created_at: datetime | None = None


class ToolParameter(BaseModel):
    """One custom-tool parameter: ``{type, required, description}`` (extra keys pass through)."""

    model_config = ConfigDict(extra="allow")

    type: str
    required: bool = False
    # Optional here so the platform, not the client, is the one that refuses it
    # (docs/assistant-api.md).
    description: str | None = None


class NewCustomTool(Outgoing):
    """The body of ``POST /v1/custom-tools``."""

    workspace_id: str
    name: str
    description: str
    language: Literal["python", "javascript"] = "python"
    code: str
    parameters: dict[str, ToolParameter] = Field(default_factory=dict)
    execution_message_description: str | None = None
    enable_globally: bool = False


class CustomToolUpdate(Outgoing):
    """The body of ``PATCH /v1/custom-tools/{id}``: only the fields set are sent."""

    name: str | None = None
    description: str | None = None
    language: Literal["python", "javascript"] | None = None
    code: str | None = None
    parameters: dict[str, ToolParameter] | None = None
    execution_message_description: str | None = None
    enable_globally: bool | None = None


class CustomTool(Answer):
    """A custom tool as the platform holds it."""

    id: str
    workspace_id: str
    name: str
    description: str = ""
    language: str = "python"
    code: str = ""
    parameters: dict[str, ToolParameter] = Field(default_factory=dict)
    execution_message_description: str | None = None
    enable_globally: bool = False
    # Documented: the platform statically validates the code and versions every change.
    validated: bool | None = None
    version: int | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


class ToolOutput(Answer):
    """What the tool's ``main`` returned: ``{"message", "rawData"}`` (the code contract)."""

    message: str = ""
    raw_data: Any = Field(default=None, alias="rawData")


class ToolRunResult(Answer):
    """The documented run result: ``{success, message, result: {message, rawData}, error,
    logs, run_time_ms}`` (``POST /v1/custom-tools/{id}/run``; a failing tool is ``success=False``).
    """

    success: bool
    message: str = ""
    result: ToolOutput | None = None
    error: Any = None
    logs: Any = None
    run_time_ms: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _flat_variant(cls, value: Any) -> Any:
        # Tolerance: an older flat ``{success, message, rawData}`` reads as the documented shape.
        if isinstance(value, dict) and "result" not in value and "rawData" in value:
            value = dict(value)
            value["result"] = {"message": value.get("message", ""), "rawData": value.pop("rawData")}
        return value

    @property
    def raw_data(self) -> Any:
        """The tool's structured data (``result.rawData``), None when it failed or gave none."""
        return self.result.raw_data if self.result is not None else None

    @property
    def output_message(self) -> str:
        """The message the tool's ``main`` returned (what the agent reads)."""
        return self.result.message if self.result is not None else ""


class CustomToolRuntime(Answer):
    """One language's runtime: entrypoint, return contract, template, importable packages.

    ``GET /v1/custom-tools/runtimes`` is documented; its field names are not public in
    full, so every field but ``language`` is optional and unknown ones are kept.
    """

    language: str
    entrypoint: str | None = None
    return_contract: Any = None
    template: str | None = None
    builtin_modules: list[str] = Field(default_factory=list)
    packages: list[str] = Field(default_factory=list)

    def allows_import(self, module: str) -> bool:
        """True when ``module`` (its top-level name) is built in or an installable package."""
        top = module.split(".", 1)[0]
        return top in self.builtin_modules or top in self.packages


class NewSkill(Outgoing):
    """The body of ``POST /v1/skills``."""

    workspace_id: str
    name: str
    display_name: str
    description: str
    body: str
    allowed_tools: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    enabled: bool = True


class Skill(Answer):
    """A skill."""

    id: str
    workspace_id: str
    name: str
    display_name: str | None = ""  # nullable in the reference
    description: str = ""
    body: str = ""
    allowed_tools: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    enabled: bool = True


class Guardrail(BaseModel):
    """One guardrail of an agent: ``{title, knowledge}``."""

    model_config = ConfigDict(extra="allow")

    title: str
    knowledge: str


class TriggerConfig(BaseModel):
    """Which inbox and channels start the agent."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    inbox_type_id: str = Field(default="guest", alias="inboxTypeId")
    channels: list[str] = Field(default_factory=list)


class Trigger(BaseModel):
    """What starts the agent, e.g. a guest-inbox message."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str
    type: Literal["message"] = "message"
    config: TriggerConfig = Field(default_factory=TriggerConfig)
    enabled: bool = True


OperationMode = Literal["copilot", "autopilot"]


class AgentFields(BaseModel):
    """An agent's fields, as created and as answered (the platform may answer another mode)."""

    workspace_id: str
    name: str
    description: str = ""
    instructions: str = ""
    guardrails: list[Guardrail] = Field(default_factory=list)
    skill_ids: list[str] = Field(default_factory=list)
    operation_mode: str = "copilot"
    response_language: str = "Original"
    triggers: list[Trigger] = Field(default_factory=list)
    enabled: bool = True


class NewAgent(Outgoing, AgentFields):
    """The body of ``POST /v1/agents``."""

    operation_mode: OperationMode = "copilot"


class AgentUpdate(Outgoing):
    """The body of ``PATCH /v1/agents/{id}``: only the fields set are sent."""

    name: str | None = None
    description: str | None = None
    instructions: str | None = None
    guardrails: list[Guardrail] | None = None
    skill_ids: list[str] | None = None
    operation_mode: OperationMode | None = None
    response_language: str | None = None
    triggers: list[Trigger] | None = None
    enabled: bool | None = None


class Agent(Answer, AgentFields):
    """An agent (the guest agent)."""

    id: str


class Listing(Answer):
    """A listing of the workspace (one per booking-system apartment while connected)."""

    id: str
    workspace_id: str | None = None
    name: str = ""
    external_id: str | None = None


class KrossConnection(Answer):
    """The workspace's booking-system connection as the platform reports it (never a password).

    ASSUMED SHAPE (docs/assistant-api.md "Listings"): the platform's listings sync reads
    the booking system with these credentials.
    """

    provider: str = "kross"
    hotel_id: str
    username: str
    healthy: bool = False


class NewKbNode(Outgoing):
    """The body of ``POST /v1/kb/nodes?workspace_id=``."""

    title: str
    body: str = ""
    parent_id: str | None = None
    # Listings the node is scoped to; empty = workspace-wide.
    entity_ids: list[str] = Field(default_factory=list)
    is_directory: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)
    enabled: bool = True


class KbNodeUpdate(Outgoing):
    """The body of ``PATCH /v1/kb/nodes/{id}``: only the fields set are sent."""

    title: str | None = None
    body: str | None = None
    parent_id: str | None = None
    entity_ids: list[str] | None = None
    metadata: dict[str, Any] | None = None
    enabled: bool | None = None


class KbNode(Answer):
    """A knowledge-base node: a directory or a document."""

    id: str
    workspace_id: str
    title: str
    body: str = ""
    parent_id: str | None = None
    entity_ids: list[str] = Field(default_factory=list)
    is_directory: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)
    enabled: bool = True
    created_at: datetime | None = None
    updated_at: datetime | None = None


class AgentToolCall(Answer):
    """A tool the agent called during a test conversation (emulator-only, see below)."""

    name: str
    parameters: dict[str, Any] = Field(default_factory=dict)
    success: bool
    message: str = ""


class AgentConversation(Answer):
    """A test conversation with an agent: the message, the reply, the tools called.

    EMULATOR-ONLY ASSUMPTION: the real platform's test-conversation API is not public
    (docs/assistant-api.md); this shape is the platform emulator's.
    """

    id: str
    workspace_id: str | None = None
    agent_id: str
    message: str = ""
    reply: str = ""
    tool_calls: list[AgentToolCall] = Field(default_factory=list)
    created_at: datetime | None = None


class SecretInfo(Answer):
    """A workspace secret as listed: its name, never its value."""

    name: str
    created_at: datetime | None = None
    updated_at: datetime | None = None


class Member(Answer):
    """A person with a role in a workspace."""

    id: str
    email: str
    name: str = ""
    role: str


class Role(Answer):
    """A role members can have."""

    name: str
    description: str = ""


class WorkspaceUsage(Answer):
    """A workspace's cumulative consumption (ASSUMED shape: the usage API is not public)."""

    workspace_id: str
    usd_spent: Decimal = Field(ge=0)
    messages: int = Field(ge=0)
    tool_calls: int = Field(ge=0)
    as_of: datetime | None = None
