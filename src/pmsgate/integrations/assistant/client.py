"""The assistant platform's ``/v1`` API client: typed resources, its own throttle, safe retries.

Wire contract: ``docs/platform-api.md`` (the public reference's shapes, plus this
project's written-down assumptions, all listed in its section "Assumed endpoints").

- **Envelopes.** The reference wraps every single object as ``{"data": {...}}`` and
  every list as ``{"data": [...], "next_cursor", "has_more"}``. The client reads
  both, and also a bare object (:func:`_unwrap`): tolerance that costs nothing, so a
  variant can never break a call.
- **Throttle.** The platform allows 120 requests/minute per workspace, shared with
  the agent's own tool calls. The client keeps itself below that on its own side
  (default 100/minute, a sliding window per workspace from pyrate-limiter, timed
  by the injected clock and waited through the injected ``sleep``), so a sync never
  *causes* a 429. Requests that name no workspace (listing or creating workspaces)
  share one account-level window. A request on an object id is counted for the
  workspace the object was last seen in (answers carry ``workspace_id``), or for
  the one the caller passes. A 429's ``Retry-After`` is handed to the throttle
  (stamina's ``on_wait`` hook answers 0), so that wait is done once, by the throttle.
- **Retries.** One :class:`~pmsgate.integrations.kit.RetryPolicy` (stamina) per client.
  Reads, and writes sent with an ``Idempotency-Key``, are replay-safe: they are
  retried on 429 and on 5xx/transport failures. A write without a key is never sent
  twice (the platform's docs advise against it), and a lost answer becomes
  :class:`~pmsgate.integrations.assistant.errors.PlatformWriteOutcomeUnknown`. **Worst case:** a
  replay-safe request is attempted ``max_attempts`` times (default 4) within the
  policy's deadline; a write without a key exactly once; a ``list_*`` call makes
  that many attempts *per page*. A ``Retry-After`` longer than ``max_retry_after_s``
  (60 s) is not waited: the failure goes back to the caller at once.
- **Assumed endpoints.** When an endpoint the public reference does not document
  answers 403/404/405/501, the client raises
  :class:`~pmsgate.integrations.assistant.errors.PlatformEndpointUnavailable`, which onboarding
  turns into a person's task.
- **Secrets.** The bearer token and secret values are never logged, never in a
  ``repr`` and are scrubbed from every error message (:class:`~pmsgate.integrations.kit.Scrubber`).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

import anyio
import httpx
import structlog
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    model_validator,
)
from pyrate_limiter import Duration, Rate

from pmsgate.clock import Clock, Sleep, SystemClock
from pmsgate.config import Settings
from pmsgate.integrations.assistant.errors import (
    CLASSIFICATION,
    ENDPOINT_REFUSED_STATUSES,
    PlatformConflict,
    PlatformEndpointUnavailable,
    PlatformError,
    PlatformForbidden,
    PlatformNotFound,
    PlatformRateLimited,
    PlatformUnauthorized,
    PlatformUnavailable,
    PlatformUnexpectedResponse,
    PlatformValidationError,
    PlatformWriteOutcomeUnknown,
)
from pmsgate.integrations.kit import (
    NOT_SENT,
    ErrorKind,
    RetryPolicy,
    Scrubber,
    deadline,
    parse_retry_after,
)
from pmsgate.ratelimit import RateWindows

log = structlog.get_logger(__name__)

# Below the platform's 120/min: the agent's tool calls spend the same per-workspace budget.
DEFAULT_REQUESTS_PER_MINUTE = 100
ACCOUNT_SCOPE = "account"
PAGE_SIZE_MAX = 100
_UPSTREAM_MESSAGE_MAX = 300
_KNOWN_OWNERS_MAX = 50_000
_REQUEST_ID_HEADERS = ("x-request-id", "request-id", "x-conduit-request-id")

_KIND_CLASSES: dict[ErrorKind, type[PlatformError]] = {
    ErrorKind.AUTH_FAILED: PlatformUnauthorized,
    ErrorKind.TOKEN_REJECTED: PlatformUnauthorized,
    ErrorKind.FORBIDDEN: PlatformForbidden,
    ErrorKind.NOT_FOUND: PlatformNotFound,
    ErrorKind.UNKNOWN_OPERATION: PlatformNotFound,
    ErrorKind.CONFLICT: PlatformConflict,
    ErrorKind.INVALID_REQUEST: PlatformValidationError,
    ErrorKind.RATE_LIMITED: PlatformRateLimited,
    ErrorKind.TOO_MANY_SESSIONS: PlatformRateLimited,
    ErrorKind.UNAVAILABLE: PlatformUnavailable,
    ErrorKind.EDGE_BLOCKED: PlatformForbidden,
    ErrorKind.UNEXPECTED: PlatformUnexpectedResponse,
}


# --- wire models -------------------------------------------------------------------------------


class _Answer(BaseModel):
    """An object the platform answered: unknown fields are kept, not refused."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class _Request(BaseModel):
    """A body we send: unknown fields are a bug on our side."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


M = TypeVar("M", bound=_Answer)


class Page(BaseModel, Generic[M]):
    """One page of a list: ``{data, next_cursor, has_more}``."""

    model_config = ConfigDict(extra="allow")

    data: list[M]
    next_cursor: str | None = None
    has_more: bool = False


class Workspace(_Answer):
    """A workspace; the id is read from ``id`` or ``workspace_id`` (spec §4.3 names the latter)."""

    id: str = Field(validation_alias=AliasChoices("id", "workspace_id"))
    name: str = ""
    slug: str | None = None
    created_at: datetime | None = None


class ToolParameter(BaseModel):
    """One custom-tool parameter: ``{type, required, description}`` (extra keys pass through)."""

    model_config = ConfigDict(extra="allow")

    type: str
    required: bool = False
    # Optional here so the platform, not the client, is the one that refuses it (spec §7).
    description: str | None = None


class NewCustomTool(_Request):
    """The body of ``POST /v1/custom-tools``."""

    workspace_id: str
    name: str
    description: str
    language: Literal["python", "javascript"] = "python"
    code: str
    parameters: dict[str, ToolParameter] = Field(default_factory=dict)
    execution_message_description: str | None = None
    enable_globally: bool = False


class CustomToolUpdate(_Request):
    """The body of ``PATCH /v1/custom-tools/{id}``: only the fields set are sent."""

    name: str | None = None
    description: str | None = None
    language: Literal["python", "javascript"] | None = None
    code: str | None = None
    parameters: dict[str, ToolParameter] | None = None
    execution_message_description: str | None = None
    enable_globally: bool | None = None


class CustomTool(_Answer):
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


class ToolOutput(_Answer):
    """What the tool's ``main`` returned: ``{"message", "rawData"}`` (the code contract)."""

    message: str = ""
    raw_data: Any = Field(default=None, alias="rawData")


class ToolRunResult(_Answer):
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


class CustomToolRuntime(_Answer):
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


class NewSkill(_Request):
    """The body of ``POST /v1/skills``."""

    workspace_id: str
    name: str
    display_name: str
    description: str
    body: str
    allowed_tools: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    enabled: bool = True


class Skill(_Answer):
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


class NewAgent(_Request):
    """The body of ``POST /v1/agents``."""

    workspace_id: str
    name: str
    description: str = ""
    instructions: str = ""
    guardrails: list[Guardrail] = Field(default_factory=list)
    skill_ids: list[str] = Field(default_factory=list)
    operation_mode: OperationMode = "copilot"
    response_language: str = "Original"
    triggers: list[Trigger] = Field(default_factory=list)
    enabled: bool = True


class AgentUpdate(_Request):
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


class Agent(_Answer):
    """An agent (the guest agent)."""

    id: str
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


class Listing(_Answer):
    """A listing of the workspace (one per booking-system apartment while connected)."""

    id: str
    workspace_id: str | None = None
    name: str = ""
    external_id: str | None = None


class PmsConnection(_Answer):
    """The workspace's booking-system connection as the platform reports it (never a password).

    ASSUMED SHAPE (docs/platform-api.md "Listings"): the platform's listings sync reads
    the booking system with these credentials.
    """

    provider: str = "kross"
    hotel_id: str
    username: str
    healthy: bool = False


class NewKbNode(_Request):
    """The body of ``POST /v1/kb/nodes?workspace_id=``."""

    title: str
    body: str = ""
    parent_id: str | None = None
    # Listings the node is scoped to; empty = workspace-wide.
    entity_ids: list[str] = Field(default_factory=list)
    is_directory: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)
    enabled: bool = True


class KbNodeUpdate(_Request):
    """The body of ``PATCH /v1/kb/nodes/{id}``: only the fields set are sent."""

    title: str | None = None
    body: str | None = None
    parent_id: str | None = None
    entity_ids: list[str] | None = None
    metadata: dict[str, Any] | None = None
    enabled: bool | None = None


class KbNode(_Answer):
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


class AgentToolCall(_Answer):
    """A tool the agent called during a test conversation (emulator-only, see below)."""

    name: str
    parameters: dict[str, Any] = Field(default_factory=dict)
    success: bool
    message: str = ""


class AgentConversation(_Answer):
    """A test conversation with an agent: the message, the reply, the tools called.

    EMULATOR-ONLY ASSUMPTION: the real platform's test-conversation API is not public
    (docs/platform-api.md); this shape is the platform emulator's.
    """

    id: str
    workspace_id: str | None = None
    agent_id: str
    message: str = ""
    reply: str = ""
    tool_calls: list[AgentToolCall] = Field(default_factory=list)
    created_at: datetime | None = None


class SecretInfo(_Answer):
    """A workspace secret as listed: its name, never its value."""

    name: str
    created_at: datetime | None = None
    updated_at: datetime | None = None


class Member(_Answer):
    """A person with a role in a workspace."""

    id: str
    email: str
    name: str = ""
    role: str


class Role(_Answer):
    """A role members can have."""

    name: str
    description: str = ""


class WorkspaceUsage(_Answer):
    """A workspace's cumulative consumption (ASSUMED shape: the usage API is not public)."""

    workspace_id: str
    usd_spent: Decimal = Field(ge=0)
    messages: int = Field(ge=0)
    tool_calls: int = Field(ge=0)
    as_of: datetime | None = None


# --- the throttle ------------------------------------------------------------------------------


class WorkspaceThrottle:
    """At most ``per_minute`` requests in any sliding minute per workspace, in this process.

    One :class:`~pmsgate.ratelimit.RateWindows` in memory, a key per scope; its waits are
    spent through the injected ``sleep``.
    """

    def __init__(self, per_minute: int, *, clock: Clock, sleep: Sleep) -> None:
        if per_minute < 1:
            raise ValueError("per_minute must be at least 1")
        self.per_minute = per_minute
        self._rates = [Rate(per_minute, Duration.MINUTE)]
        self._sleep = sleep
        self._windows = RateWindows(clock=clock, retention_ms=Duration.MINUTE.value)

    def __repr__(self) -> str:
        return f"WorkspaceThrottle(per_minute={self.per_minute})"

    def hold(self, scope: str, seconds: float) -> None:
        """Let no request of ``scope`` start for ``seconds`` (the upstream's ``Retry-After``)."""
        self._windows.hold(scope, seconds)

    async def acquire(self, scope: str) -> float:
        """Take one permit for ``scope``, waiting until one frees; returns the seconds waited."""
        return await self._windows.acquire(scope, self._rates, self._sleep)


# --- the client --------------------------------------------------------------------------------


class AssistantClient:
    """Speaks the assistant platform's ``/v1`` API over the given ``httpx.AsyncClient``."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        base_url: str,
        token: SecretStr,
        clock: Clock | None = None,
        sleep: Sleep = anyio.sleep,
        requests_per_minute: int = DEFAULT_REQUESTS_PER_MINUTE,
        max_attempts: int = 4,
        max_retry_after_s: float = 60.0,
        timeout_s: float = 30.0,
        page_size: int = PAGE_SIZE_MAX,
        retry: RetryPolicy | None = None,
    ) -> None:
        if not token.get_secret_value():
            raise ValueError("the platform token is empty")
        if not 1 <= page_size <= PAGE_SIZE_MAX:
            raise ValueError(f"page_size must be between 1 and {PAGE_SIZE_MAX}")
        self._http = http
        self.base_url = base_url.rstrip("/")
        self._token = token
        self.clock = clock or SystemClock()
        self._sleep = sleep
        self.throttle = WorkspaceThrottle(requests_per_minute, clock=self.clock, sleep=sleep)
        # One policy for every request; its deadline bounds a request's retries, not a list.
        self.retry = retry or RetryPolicy(
            attempts=max(1, max_attempts),
            deadline_s=None,
            max_retry_after_s=max_retry_after_s,
        )
        self.timeout_s = timeout_s
        self._scrubber = Scrubber(limit=_UPSTREAM_MESSAGE_MAX)
        self.page_size = page_size
        self._owners: dict[str, str] = {}  # object id -> workspace id, learnt from answers

    def __repr__(self) -> str:
        return (
            f"AssistantClient(base_url={self.base_url!r}, "
            f"requests_per_minute={self.throttle.per_minute})"
        )

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        http: httpx.AsyncClient,
        *,
        clock: Clock | None = None,
        sleep: Sleep = anyio.sleep,
    ) -> AssistantClient:
        """A client configured from PMSGATE_PLATFORM_API_URL and PMSGATE_PLATFORM_API_TOKEN."""
        if settings.platform_api_token is None:
            raise ValueError("PMSGATE_PLATFORM_API_TOKEN is not set")
        return cls(
            http,
            base_url=settings.platform_api_url,
            token=settings.platform_api_token,
            clock=clock,
            sleep=sleep,
        )

    # --- workspaces ----------------------------------------------------------------------------

    async def list_workspaces(self) -> list[Workspace]:
        """Every workspace the token can see (all pages)."""
        return [w async for w in self._iterate("/v1/workspaces", Workspace, workspace_id=None)]

    async def get_workspace(self, workspace_id: str) -> Workspace:
        """One workspace."""
        answer = await self._call(
            "GET",
            f"/v1/workspaces/{_seg(workspace_id)}",
            workspace_id,
            assumed="GET /v1/workspaces/{id}",
        )
        return self._one(Workspace, answer)

    async def workspace_usage(self, workspace_id: str) -> WorkspaceUsage:
        """The workspace's cumulative usage (``GET /v1/workspaces/{id}/usage``; assumed shape)."""
        path = f"/v1/workspaces/{_seg(workspace_id)}/usage"
        answer = await self._call(
            "GET", path, workspace_id, assumed="GET /v1/workspaces/{id}/usage"
        )
        return self._one(WorkspaceUsage, answer)

    async def create_workspace(
        self, name: str, slug: str, *, idempotency_key: str | None = None
    ) -> Workspace:
        """Create a workspace (``POST /v1/workspaces``; this project's assumed shape)."""
        answer = await self._call(
            "POST",
            "/v1/workspaces",
            None,
            body={"name": name, "slug": slug},
            idempotency_key=idempotency_key,
            assumed="POST /v1/workspaces",
        )
        return self._one(Workspace, answer)

    async def ensure_workspace(self, name: str, slug: str) -> Workspace:
        """The workspace with this slug, created if absent (spec §4.3 step 5)."""
        found = await self._workspace_by_slug(slug)
        if found is not None:
            return found
        try:
            # A fresh key per call: retries of this one creation are safe, a later call is new.
            return await self.create_workspace(
                name, slug, idempotency_key=f"ensure-workspace:{slug}:{uuid.uuid4().hex}"
            )
        except PlatformConflict:
            # Someone else created it between our list and our create: theirs is ours.
            found = await self._workspace_by_slug(slug)
            if found is None:
                raise
            return found

    async def _workspace_by_slug(self, slug: str) -> Workspace | None:
        return next((w for w in await self.list_workspaces() if w.slug == slug), None)

    # --- custom tools --------------------------------------------------------------------------

    async def create_custom_tool(
        self, tool: NewCustomTool, *, idempotency_key: str | None = None
    ) -> CustomTool:
        """Create one custom tool."""
        answer = await self._call(
            "POST",
            "/v1/custom-tools",
            tool.workspace_id,
            body=_dump(tool),
            idempotency_key=idempotency_key,
        )
        return self._one(CustomTool, answer)

    async def list_custom_tools(self, workspace_id: str) -> list[CustomTool]:
        """Every custom tool of a workspace (all pages)."""
        return await self._collect("/v1/custom-tools", CustomTool, workspace_id)

    async def get_custom_tool(self, tool_id: str, *, workspace_id: str | None = None) -> CustomTool:
        """One custom tool."""
        return await self._get_object(CustomTool, "/v1/custom-tools", tool_id, workspace_id)

    async def update_custom_tool(
        self,
        tool_id: str,
        changes: CustomToolUpdate,
        *,
        workspace_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> CustomTool:
        """Change the fields set in ``changes``."""
        return await self._update_object(
            CustomTool, "/v1/custom-tools", tool_id, changes, workspace_id, idempotency_key
        )

    async def delete_custom_tool(
        self,
        tool_id: str,
        *,
        workspace_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> None:
        """Delete a custom tool."""
        await self._delete_object("/v1/custom-tools", tool_id, workspace_id, idempotency_key)

    async def run_custom_tool(
        self,
        tool_id: str,
        parameters: Mapping[str, Any] | None = None,
        *,
        workspace_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> ToolRunResult:
        """Run a tool; a tool that fails answers ``success=False``, not an error."""
        answer = await self._call(
            "POST",
            f"/v1/custom-tools/{_seg(tool_id)}/run",
            self._scope_of(tool_id, workspace_id),
            body={"parameters": dict(parameters or {})},
            idempotency_key=idempotency_key,
        )
        return self._one(ToolRunResult, answer)

    async def custom_tool_runtimes(self) -> list[CustomToolRuntime]:
        """The runtimes tool code may target (``GET /v1/custom-tools/runtimes``): the contract."""
        answer = await self._call("GET", "/v1/custom-tools/runtimes", None)
        data = answer.get("data", answer) if isinstance(answer, dict) else answer
        if isinstance(data, dict):
            # Tolerance: a mapping keyed by language reads like the list.
            data = [
                {"language": lang, **(v if isinstance(v, dict) else {})} for lang, v in data.items()
            ]
        try:
            return [CustomToolRuntime.model_validate(item) for item in data or []]
        except (ValidationError, TypeError) as exc:
            if isinstance(exc, ValidationError):
                raise _shape_error(
                    CustomToolRuntime, exc, "GET", "/v1/custom-tools/runtimes"
                ) from None
            raise PlatformUnexpectedResponse(
                "The runtimes answer is not a list.", method="GET", path="/v1/custom-tools/runtimes"
            ) from None

    # --- skills --------------------------------------------------------------------------------

    async def list_skills(self, workspace_id: str) -> list[Skill]:
        """Every skill of a workspace (all pages)."""
        return await self._collect("/v1/skills", Skill, workspace_id)

    async def create_skill(self, skill: NewSkill, *, idempotency_key: str | None = None) -> Skill:
        """Create a skill."""
        answer = await self._call(
            "POST",
            "/v1/skills",
            skill.workspace_id,
            body=_dump(skill),
            idempotency_key=idempotency_key,
        )
        return self._one(Skill, answer)

    # --- agents --------------------------------------------------------------------------------

    async def list_agents(self, workspace_id: str) -> list[Agent]:
        """Every agent of a workspace (all pages)."""
        return await self._collect("/v1/agents", Agent, workspace_id)

    async def create_agent(self, agent: NewAgent, *, idempotency_key: str | None = None) -> Agent:
        """Create an agent."""
        answer = await self._call(
            "POST",
            "/v1/agents",
            agent.workspace_id,
            body=_dump(agent),
            idempotency_key=idempotency_key,
        )
        return self._one(Agent, answer)

    async def get_agent(self, agent_id: str, *, workspace_id: str | None = None) -> Agent:
        """One agent."""
        return await self._get_object(Agent, "/v1/agents", agent_id, workspace_id)

    async def update_agent(
        self,
        agent_id: str,
        changes: AgentUpdate,
        *,
        workspace_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> Agent:
        """Change the fields set in ``changes``."""
        return await self._update_object(
            Agent, "/v1/agents", agent_id, changes, workspace_id, idempotency_key
        )

    # --- test conversations (EMULATOR-ONLY: the real platform's API for this is not public) -----

    async def run_test_conversation(
        self,
        agent_id: str,
        message: str,
        *,
        workspace_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> AgentConversation:
        """Send one test message to an agent and get its reply and tool calls (emulator-only)."""
        # POST /v1/agents/{id}/test-conversations is this project's assumption, served by the
        # platform emulator only; against the real platform it answers 404 (platform_not_found).
        answer = await self._call(
            "POST",
            f"/v1/agents/{_seg(agent_id)}/test-conversations",
            self._scope_of(agent_id, workspace_id),
            body={"message": message},
            idempotency_key=idempotency_key,
            assumed="POST /v1/agents/{id}/test-conversations",
        )
        return self._one(AgentConversation, answer)

    async def list_test_conversations(
        self, agent_id: str, *, workspace_id: str | None = None
    ) -> list[AgentConversation]:
        """Every recorded test conversation of an agent, oldest first (emulator-only)."""
        path = f"/v1/agents/{_seg(agent_id)}/test-conversations"
        scope = self._scope_of(agent_id, workspace_id)
        endpoint = "GET /v1/agents/{id}/test-conversations"
        return [
            c
            async for c in self._iterate(
                path, AgentConversation, workspace_id=scope, assumed=endpoint
            )
        ]

    # --- listings ------------------------------------------------------------------------------

    async def list_listings(self, workspace_id: str) -> list[Listing]:
        """Every listing of a workspace (all pages); none while its PMS connection fails."""
        return await self._collect(
            "/v1/listings", Listing, workspace_id, assumed="GET /v1/listings"
        )

    async def get_pms_connection(self, workspace_id: str) -> PmsConnection | None:
        """The workspace's booking-system connection; None when it has none (assumed endpoint)."""
        try:
            answer = await self._call(
                "GET", f"/v1/workspaces/{_seg(workspace_id)}/pms-connection", workspace_id
            )
        except PlatformNotFound:
            # 404 = this workspace has no connection (the assumed shape), or no such endpoint.
            return None
        return self._one(PmsConnection, answer)

    async def set_pms_connection(
        self,
        workspace_id: str,
        *,
        hotel_id: str,
        username: str,
        password: SecretStr,
        api_key: SecretStr | None = None,
        idempotency_key: str | None = None,
    ) -> PmsConnection:
        """Give the platform's listings sync new booking-system credentials (assumed endpoint)."""
        plain = password.get_secret_value()
        body: dict[str, Any] = {
            "provider": "kross",
            "hotel_id": hotel_id,
            "username": username,
            "password": plain,
        }
        secrets: tuple[str, ...] = (plain,)
        if api_key is not None:
            body["api_key"] = api_key.get_secret_value()
            secrets = (plain, body["api_key"])
        answer = await self._call(
            "PUT",
            f"/v1/workspaces/{_seg(workspace_id)}/pms-connection",
            workspace_id,
            body=body,
            # A fresh key per call: this call's retries are safe, a later call is a new write.
            idempotency_key=idempotency_key or f"pms-connection:{uuid.uuid4().hex}",
            secrets=secrets,
            assumed="PUT /v1/workspaces/{id}/pms-connection",
        )
        return self._one(PmsConnection, answer)

    # --- knowledge nodes -----------------------------------------------------------------------

    async def nodes_page(
        self,
        workspace_id: str,
        *,
        listing_id: str | None = None,
        parent_id: str | None = None,
        is_directory: bool | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Page[KbNode]:
        """One page of knowledge nodes (of a listing, under a parent, when given)."""
        params = _node_filters(workspace_id, listing_id, parent_id, is_directory)
        return await self._page(
            "/v1/kb/nodes",
            KbNode,
            workspace_id=workspace_id,
            params=params,
            cursor=cursor,
            limit=limit,
        )

    def iter_nodes(
        self,
        workspace_id: str,
        *,
        listing_id: str | None = None,
        parent_id: str | None = None,
        is_directory: bool | None = None,
    ) -> AsyncIterator[KbNode]:
        """Every matching knowledge node, page after page."""
        params = _node_filters(workspace_id, listing_id, parent_id, is_directory)
        return self._iterate("/v1/kb/nodes", KbNode, workspace_id=workspace_id, params=params)

    async def list_nodes(
        self,
        workspace_id: str,
        *,
        listing_id: str | None = None,
        parent_id: str | None = None,
        is_directory: bool | None = None,
    ) -> list[KbNode]:
        """Every matching knowledge node, collected."""
        return [
            n
            async for n in self.iter_nodes(
                workspace_id, listing_id=listing_id, parent_id=parent_id, is_directory=is_directory
            )
        ]

    async def get_node(self, node_id: str, *, workspace_id: str | None = None) -> KbNode:
        """One knowledge node."""
        return await self._get_object(KbNode, "/v1/kb/nodes", node_id, workspace_id)

    async def create_node(
        self, workspace_id: str, node: NewKbNode, *, idempotency_key: str | None = None
    ) -> KbNode:
        """Create a knowledge node (a document, or a directory with ``is_directory``)."""
        answer = await self._call(
            "POST",
            "/v1/kb/nodes",
            workspace_id,
            params={"workspace_id": workspace_id},
            body=_dump(node),
            idempotency_key=idempotency_key,
        )
        return self._one(KbNode, answer)

    async def create_directory(
        self,
        workspace_id: str,
        title: str,
        *,
        parent_id: str | None = None,
        entity_ids: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> KbNode:
        """Create a directory node (e.g. one per listing)."""
        node = NewKbNode(
            title=title,
            parent_id=parent_id,
            entity_ids=list(entity_ids),
            is_directory=True,
            metadata=dict(metadata or {}),
        )
        return await self.create_node(workspace_id, node, idempotency_key=idempotency_key)

    async def update_node(
        self,
        node_id: str,
        changes: KbNodeUpdate,
        *,
        workspace_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> KbNode:
        """Change the fields set in ``changes`` (``PATCH /v1/kb/nodes/{id}``)."""
        return await self._update_object(
            KbNode, "/v1/kb/nodes", node_id, changes, workspace_id, idempotency_key
        )

    async def delete_node(
        self,
        node_id: str,
        *,
        workspace_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> None:
        """Delete a knowledge node (a directory must be empty)."""
        await self._delete_object("/v1/kb/nodes", node_id, workspace_id, idempotency_key)

    # --- secrets -------------------------------------------------------------------------------

    async def set_secret(
        self,
        workspace_id: str,
        name: str,
        value: SecretStr,
        *,
        idempotency_key: str | None = None,
    ) -> SecretInfo:
        """Create or replace a workspace secret (tool code reads it as an environment variable)."""
        plain = value.get_secret_value()
        answer = await self._call(
            "PUT",
            f"/v1/workspaces/{_seg(workspace_id)}/secrets/{_seg(name)}",
            workspace_id,
            body={"value": plain},
            idempotency_key=idempotency_key,
            secrets=(plain,),
            assumed="PUT /v1/workspaces/{id}/secrets/{name}",
        )
        return self._one(SecretInfo, answer)

    async def list_secrets(self, workspace_id: str) -> list[SecretInfo]:
        """The names of a workspace's secrets (values are never readable)."""
        path = f"/v1/workspaces/{_seg(workspace_id)}/secrets"
        endpoint = "GET /v1/workspaces/{id}/secrets"
        return [
            s
            async for s in self._iterate(
                path, SecretInfo, workspace_id=workspace_id, assumed=endpoint
            )
        ]

    # --- members and roles ---------------------------------------------------------------------

    async def list_members(self, workspace_id: str) -> list[Member]:
        """Every member of a workspace with their role (all pages)."""
        path = f"/v1/workspaces/{_seg(workspace_id)}/members"
        endpoint = "GET /v1/workspaces/{id}/members"
        return [
            m
            async for m in self._iterate(path, Member, workspace_id=workspace_id, assumed=endpoint)
        ]

    async def add_member(
        self,
        workspace_id: str,
        email: str,
        role: str,
        *,
        name: str = "",
        idempotency_key: str | None = None,
    ) -> Member:
        """Add a person to a workspace with a role (e.g. ``Admin``)."""
        answer = await self._call(
            "POST",
            f"/v1/workspaces/{_seg(workspace_id)}/members",
            workspace_id,
            body={"email": email, "role": role, "name": name},
            idempotency_key=idempotency_key,
            assumed="POST /v1/workspaces/{id}/members",
        )
        return self._one(Member, answer)

    async def set_member_role(
        self,
        workspace_id: str,
        member_id: str,
        role: str,
        *,
        idempotency_key: str | None = None,
    ) -> Member:
        """Change a member's role."""
        answer = await self._call(
            "PATCH",
            f"/v1/workspaces/{_seg(workspace_id)}/members/{_seg(member_id)}",
            workspace_id,
            body={"role": role},
            idempotency_key=idempotency_key,
            assumed="PATCH /v1/workspaces/{id}/members/{member_id}",
        )
        return self._one(Member, answer)

    async def list_roles(self, workspace_id: str) -> list[Role]:
        """The roles a workspace member can have."""
        path = f"/v1/workspaces/{_seg(workspace_id)}/roles"
        endpoint = "GET /v1/workspaces/{id}/roles"
        return [
            r async for r in self._iterate(path, Role, workspace_id=workspace_id, assumed=endpoint)
        ]

    # --- pagination ----------------------------------------------------------------------------

    async def _page(
        self,
        path: str,
        model: type[M],
        *,
        workspace_id: str | None,
        params: Mapping[str, str] | None = None,
        cursor: str | None = None,
        limit: int | None = None,
        assumed: str | None = None,
    ) -> Page[M]:
        query = dict(params or {})
        query["limit"] = str(limit or self.page_size)
        if cursor:
            query["cursor"] = cursor
        answer = await self._call("GET", path, workspace_id, params=query, assumed=assumed)
        if isinstance(answer, list):
            # Tolerance: a bare array is one complete page.
            answer = {"data": answer, "next_cursor": None, "has_more": False}
        try:
            page = Page[model].model_validate(answer)  # type: ignore[valid-type]
        except ValidationError as exc:
            raise _shape_error(model, exc, "GET", path) from None
        for item in page.data:
            self._learn(item)
        return page

    async def _collect(
        self, path: str, model: type[M], workspace_id: str, *, assumed: str | None = None
    ) -> list[M]:
        """Every item of a list filtered by ``?workspace_id=``, all pages."""
        params = {"workspace_id": workspace_id}
        return [
            i
            async for i in self._iterate(
                path, model, workspace_id=workspace_id, params=params, assumed=assumed
            )
        ]

    async def _iterate(
        self,
        path: str,
        model: type[M],
        *,
        workspace_id: str | None,
        params: Mapping[str, str] | None = None,
        assumed: str | None = None,
    ) -> AsyncIterator[M]:
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            page = await self._page(
                path,
                model,
                workspace_id=workspace_id,
                params=params,
                cursor=cursor,
                assumed=assumed,
            )
            for item in page.data:
                yield item
            if not page.has_more:
                return
            if not page.next_cursor or page.next_cursor in seen:
                # A server that keeps saying "more" without moving on would loop forever.
                raise PlatformUnexpectedResponse(
                    "The list says has_more but gives no new next_cursor.", method="GET", path=path
                )
            seen.add(page.next_cursor)
            cursor = page.next_cursor

    # --- one request, throttled and (when safe) retried ----------------------------------------

    def _scope_of(self, object_id: str, workspace_id: str | None) -> str | None:
        return workspace_id or self._owners.get(object_id)

    def _learn(self, item: BaseModel) -> None:
        object_id, workspace_id = getattr(item, "id", None), getattr(item, "workspace_id", None)
        if isinstance(object_id, str) and isinstance(workspace_id, str):
            if len(self._owners) >= _KNOWN_OWNERS_MAX:
                self._owners.pop(next(iter(self._owners)))
            self._owners[object_id] = workspace_id

    # One object by id (custom tools, agents, knowledge nodes): read, change, delete.

    async def _get_object(
        self, model: type[M], path: str, object_id: str, workspace_id: str | None
    ) -> M:
        answer = await self._call(
            "GET", f"{path}/{_seg(object_id)}", self._scope_of(object_id, workspace_id)
        )
        return self._one(model, answer)

    async def _update_object(
        self,
        model: type[M],
        path: str,
        object_id: str,
        changes: BaseModel,
        workspace_id: str | None,
        idempotency_key: str | None,
    ) -> M:
        answer = await self._call(
            "PATCH",
            f"{path}/{_seg(object_id)}",
            self._scope_of(object_id, workspace_id),
            body=_dump_changes(changes),
            idempotency_key=idempotency_key,
        )
        return self._one(model, answer)

    async def _delete_object(
        self, path: str, object_id: str, workspace_id: str | None, idempotency_key: str | None
    ) -> None:
        await self._call(
            "DELETE",
            f"{path}/{_seg(object_id)}",
            self._scope_of(object_id, workspace_id),
            idempotency_key=idempotency_key,
        )
        self._owners.pop(object_id, None)

    def _one(self, model: type[M], answer: Any) -> M:
        try:
            item = model.model_validate(_unwrap(answer))
        except ValidationError as exc:
            raise _shape_error(model, exc, None, None) from None
        self._learn(item)
        return item

    async def _call(
        self,
        method: str,
        path: str,
        workspace_id: str | None,
        *,
        params: Mapping[str, str] | None = None,
        body: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
        secrets: tuple[str, ...] = (),
        assumed: str | None = None,
    ) -> Any:
        """Send one request; retry (stamina) only reads and writes that carry an idempotency key.

        ``assumed`` names the route template of an endpoint the public reference does not
        document: its refusal (403/404/405/501) becomes ``PlatformEndpointUnavailable``.
        """
        token = self._token.get_secret_value()
        scrub = self._scrubber.with_secrets(token, *secrets)
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        replay_safe = method == "GET" or bool(idempotency_key)
        scope = workspace_id or ACCOUNT_SCOPE

        def on_wait(error: Exception, wait: float) -> float:
            # The throttle holds the workspace back for the upstream's wait (through the
            # injected sleep); stamina waits nothing more, so the wait is done once.
            self.throttle.hold(scope, wait)
            return 0.0

        attempt = 0
        async for trying in self.retry.retrying(replay_safe=replay_safe, on_wait=on_wait):
            with trying:
                attempt += 1
                await self.throttle.acquire(scope)
                started = time.perf_counter()
                try:
                    response = await self._send(method, path, params, body, headers, replay_safe)
                    answer = self._interpret(method, path, response, scrub, replay_safe, assumed)
                except PlatformError as error:
                    self._log(method, path, started, attempt, error=error)
                    raise
                self._log(method, path, started, attempt, status=response.status_code)
                return answer
        raise AssertionError("stamina ended without an attempt")  # pragma: no cover

    async def _send(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        body: Mapping[str, Any] | None,
        headers: dict[str, str],
        replay_safe: bool,
    ) -> httpx.Response:
        try:
            with deadline(self.timeout_s):
                return await self._http.request(
                    method,
                    self.base_url + path,
                    params=dict(params) if params else None,
                    json=dict(body) if body is not None else None,
                    headers=headers,
                    timeout=httpx.Timeout(self.timeout_s),
                )
        except NOT_SENT as exc:
            raise PlatformUnavailable(
                f"Could not reach the assistant platform ({type(exc).__name__}).",
                method=method,
                path=path,
                may_have_been_sent=False,
            ) from None
        except (httpx.TransportError, TimeoutError) as exc:
            reason = type(exc).__name__
            if replay_safe:
                raise PlatformUnavailable(
                    f"The assistant platform did not answer ({reason}).", method=method, path=path
                ) from None
            raise PlatformWriteOutcomeUnknown(
                f"The write was sent but no answer came ({reason}); it may have been applied.",
                method=method,
                path=path,
            ) from None

    def _interpret(
        self,
        method: str,
        path: str,
        response: httpx.Response,
        scrub: Scrubber,
        replay_safe: bool,
        assumed: str | None,
    ) -> Any:
        status = response.status_code
        try:
            answer = json.loads(response.content) if response.content else None
        except ValueError:
            answer = None
        request_id = next(
            (response.headers[h] for h in _REQUEST_ID_HEADERS if h in response.headers), None
        )
        if 200 <= status < 300:
            if answer is None and status != 204 and method != "DELETE":
                raise PlatformUnexpectedResponse(
                    f"HTTP {status} without a JSON body.",
                    method=method,
                    path=path,
                    status=status,
                    request_id=request_id,
                )
            return answer
        upstream = scrub(answer.get("error") if isinstance(answer, dict) else None)
        context: dict[str, Any] = {
            "method": method,
            "path": path,
            "status": status,
            "upstream_message": upstream,
            "request_id": request_id,
        }
        if assumed is not None and status in ENDPOINT_REFUSED_STATUSES:
            raise PlatformEndpointUnavailable(
                f"The platform refused {assumed} (HTTP {status}): an endpoint this project "
                "assumes and the public reference does not document.",
                endpoint=assumed,
                **context,
            )
        if status == 504 and not replay_safe:
            # A proxy gave up waiting: the origin may still have applied the write.
            raise PlatformWriteOutcomeUnknown(
                "A proxy timed out waiting for the write; it may have been applied.", **context
            )
        raise self._error(CLASSIFICATION.classify(status), upstream, response.headers, context)

    def _error(
        self,
        kind: ErrorKind,
        upstream: str | None,
        headers: httpx.Headers,
        context: dict[str, Any],
    ) -> PlatformError:
        cls = _KIND_CLASSES.get(kind, PlatformUnexpectedResponse)
        status = context["status"]
        if cls is PlatformRateLimited:
            wait = parse_retry_after(headers.get("retry-after"), self.clock.now())
            return PlatformRateLimited(
                "The workspace's request budget is spent.", retry_after=wait, **context
            )
        messages: dict[type[PlatformError], str] = {
            PlatformUnauthorized: "The platform refused the token.",
            PlatformForbidden: "The token may not do this.",
            PlatformNotFound: upstream or "Not found.",
            PlatformConflict: upstream or "Already exists.",
            PlatformValidationError: upstream or "The request was refused.",
            PlatformUnavailable: f"The platform failed (HTTP {status}).",
        }
        return cls(messages.get(cls, f"Unexpected HTTP status {status}."), **context)

    def _log(
        self,
        method: str,
        path: str,
        started: float,
        attempt: int,
        *,
        status: int | None = None,
        error: PlatformError | None = None,
    ) -> None:
        # Method, path and status only: bodies carry secret values and guest-facing text.
        log.debug(
            "platform_request",
            method=method,
            path=path,
            status=error.status if error is not None else status,
            attempt=attempt,
            elapsed_ms=round((time.perf_counter() - started) * 1000, 1),
            error=error.code if error is not None else None,
            request_id=error.request_id if error is not None else None,
        )


# --- helpers -----------------------------------------------------------------------------------


def _seg(value: str) -> str:
    """One path segment, quoted so an id can never change the path."""
    if not value:
        raise ValueError("an id in the path is empty")
    return quote(value, safe="")


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _dump_changes(model: BaseModel) -> dict[str, Any]:
    # Only what the caller set: an explicit None (e.g. parent_id=None) is sent as null.
    return model.model_dump(mode="json", by_alias=True, exclude_unset=True)


def _node_filters(
    workspace_id: str,
    listing_id: str | None,
    parent_id: str | None,
    is_directory: bool | None,
) -> dict[str, str]:
    params = {"workspace_id": workspace_id}
    if listing_id:
        params["listing_id"] = listing_id
    if parent_id:
        params["parent_id"] = parent_id
    if is_directory is not None:
        params["is_directory"] = "true" if is_directory else "false"
    return params


def _shape_error(
    model: type[BaseModel], exc: ValidationError, method: str | None, path: str | None
) -> PlatformUnexpectedResponse:
    # Field locations only: values may be secrets or guest-facing text.
    where = sorted({".".join(str(p) for p in e["loc"]) for e in exc.errors()})[:5]
    return PlatformUnexpectedResponse(
        f"The answer does not match {model.__name__} at {where}.", method=method, path=path
    )


def _unwrap(answer: Any) -> Any:
    """The object of a single-object answer: documented ``{"data": {...}}``, or a bare object."""
    if (
        isinstance(answer, dict)
        and isinstance(answer.get("data"), dict)
        and "id" not in answer
        and "success" not in answer
    ):
        return answer["data"]
    return answer
