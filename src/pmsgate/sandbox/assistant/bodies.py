"""The bodies the emulator accepts: the ``/v1`` requests and the ``/_sandbox/`` controls.

Unknown fields of a ``/v1`` body are refused (a client typo fails loudly); the
controls are the emulator's own and take their defaults.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Body(BaseModel):
    """A /v1 request body."""

    model_config = ConfigDict(extra="forbid", strict=True)

    # Fields that name where the object goes, or that the emulator accepts and does not keep.
    unstored: ClassVar[frozenset[str]] = frozenset({"workspace_id"})

    def fields(self) -> dict[str, Any]:
        """What the store's create call takes: every field but the unstored ones."""
        return self.model_dump(exclude=set(self.unstored))


class WorkspaceBody(Body):
    """POST /v1/workspaces (this project's assumption)."""

    name: str
    slug: str


class MemberBody(Body):
    """POST /v1/workspaces/{id}/members."""

    email: str
    role: str
    name: str = ""


class RoleBody(Body):
    """PATCH /v1/workspaces/{id}/members/{member_id}."""

    role: str


class SecretBody(Body):
    """PUT /v1/workspaces/{id}/secrets/{name}."""

    value: str


class ToolBody(Body):
    """POST /v1/custom-tools."""

    workspace_id: str
    name: str
    description: str
    language: str = "python"
    code: str
    parameters: dict[str, Any] = Field(default_factory=dict)
    execution_message_description: str | None = None
    enable_globally: bool = False


class ToolPatch(Body):
    """PATCH /v1/custom-tools/{id}: only the fields sent change."""

    name: str | None = None
    description: str | None = None
    language: str | None = None
    code: str | None = None
    parameters: dict[str, Any] | None = None
    execution_message_description: str | None = None
    enable_globally: bool | None = None


class RunBody(Body):
    """POST /v1/custom-tools/{id}/run (``workspace_id`` is an optional override)."""

    workspace_id: str | None = None
    parameters: dict[str, Any] = Field(default_factory=dict)


class SkillBody(Body):
    """POST /v1/skills."""

    workspace_id: str
    name: str
    display_name: str | None = None
    description: str
    body: str
    allowed_tools: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    enabled: bool = True
    # Documented; the emulator has no other agents to assign the skill to.
    auto_assign_to_existing_v2_agents: bool = False

    unstored: ClassVar[frozenset[str]] = frozenset(
        {"workspace_id", "auto_assign_to_existing_v2_agents"}
    )

    @model_validator(mode="after")
    def _display_name_defaults_to_name(self) -> SkillBody:
        if not self.display_name:
            self.display_name = self.name
        return self


class AgentBody(Body):
    """POST /v1/agents."""

    workspace_id: str
    name: str
    description: str = ""
    instructions: str = ""
    guardrails: list[dict[str, Any]] = Field(default_factory=list)
    skill_ids: list[str] = Field(default_factory=list)
    operation_mode: str = "copilot"
    response_language: str = "Original"
    triggers: list[dict[str, Any]] = Field(default_factory=list)
    enabled: bool = True
    # Documented agent settings the emulator accepts and does not model (not stored).
    responseflow: bool | None = None
    custom_response_delay_ms: int | None = None
    auto_mark_as_done: bool | None = None
    output_schema: list[dict[str, Any]] | None = None
    autopilot_schedule: dict[str, Any] | None = None

    unstored: ClassVar[frozenset[str]] = frozenset(
        {
            "workspace_id",
            "responseflow",
            "custom_response_delay_ms",
            "auto_mark_as_done",
            "output_schema",
            "autopilot_schedule",
        }
    )


class AgentPatch(Body):
    """PATCH /v1/agents/{id}: only the fields sent change."""

    name: str | None = None
    description: str | None = None
    instructions: str | None = None
    guardrails: list[dict[str, Any]] | None = None
    skill_ids: list[str] | None = None
    operation_mode: str | None = None
    response_language: str | None = None
    triggers: list[dict[str, Any]] | None = None
    enabled: bool | None = None


class KrossConnectionBody(Body):
    """PUT /v1/workspaces/{id}/pms-connection (this project's assumption)."""

    provider: str
    hotel_id: str = Field(min_length=1)
    username: str = Field(min_length=1)
    password: str = Field(min_length=1)
    # Accepted for own facilities; the emulator checks hotel_id, username and password only.
    api_key: str | None = None


class ConversationBody(Body):
    """POST /v1/agents/{id}/test-conversations (emulator-only: the real API is not public)."""

    message: str


class NodeBody(Body):
    """POST /v1/kb/nodes?workspace_id=."""

    title: str
    body: str = ""
    parent_id: str | None = None
    entity_ids: list[str] = Field(default_factory=list)
    is_directory: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)
    enabled: bool = True


class NodePatch(Body):
    """PATCH /v1/kb/nodes/{id}: only the fields sent change."""

    title: str | None = None
    body: str | None = None
    parent_id: str | None = None
    entity_ids: list[str] | None = None
    metadata: dict[str, Any] | None = None
    enabled: bool | None = None


# --- control bodies --------------------------------------------------------------------------


class TokenControl(BaseModel):
    """POST /_sandbox/tokens: workspace_ids None = an account-wide token."""

    name: str = "sandbox token"
    workspace_ids: list[str] | None = None


class ConnectionControl(BaseModel):
    """PUT /_sandbox/workspaces/{id}/pms-connection."""

    hotel_id: str = Field(min_length=1)
    username: str = Field(min_length=1)
    password: str = Field(min_length=1)


class TrafficControl(BaseModel):
    """POST /_sandbox/workspaces/{id}/traffic: guest traffic added to the usage read."""

    messages: int = Field(default=0, ge=0)
    tool_calls: int = Field(default=0, ge=0)


class ConfigControl(BaseModel):
    """PUT /_sandbox/config."""

    requests_per_minute: int | None = Field(default=None, ge=1)
    tool_timeout_s: float | None = Field(default=None, gt=0)
    undocumented_endpoints: str | None = None  # "present" | "absent"
    kb_node_id_format: str | None = None  # "convex32" | "hex24"


class FaultsControl(BaseModel):
    """POST /_sandbox/faults."""

    fail_next: int | None = Field(default=None, ge=0)
    fail_status: int | None = Field(default=None, ge=500, le=599)
