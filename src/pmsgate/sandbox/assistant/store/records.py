"""The emulator's records: what it keeps per workspace, and its switches, faults and stats."""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from math import ceil
from typing import Any

DEFAULT_REQUESTS_PER_MINUTE = 120
DEFAULT_TOOL_TIMEOUT_S = 10.0
WINDOW_S = 60.0

# --- records ---------------------------------------------------------------------------------


@dataclass
class ApiToken:
    """A bearer token: account-wide (``workspace_ids`` None) or scoped to some workspaces."""

    value: str
    name: str
    workspace_ids: frozenset[str] | None

    @property
    def key(self) -> str:
        """A non-secret name for the token, used to count its account-level requests."""
        return "token:" + hashlib.sha256(self.value.encode()).hexdigest()[:12]


@dataclass
class Workspace:
    """A customer's workspace."""

    seq: int
    id: str
    name: str
    slug: str
    created_at: datetime


@dataclass
class Member:
    """A person with a role in a workspace."""

    seq: int
    id: str
    workspace_id: str
    email: str
    name: str
    role: str
    created_at: datetime


@dataclass
class Secret:
    """A workspace secret: readable by tool code as an environment variable, never over the API."""

    seq: int
    name: str
    value: str
    created_at: datetime
    updated_at: datetime


@dataclass
class CustomTool:
    """A custom tool: Python (or JavaScript) code with a ``main(**params)``."""

    seq: int
    id: str
    workspace_id: str
    name: str
    description: str
    language: str
    code: str
    parameters: dict[str, dict[str, Any]]
    execution_message_description: str | None
    enable_globally: bool
    created_at: datetime
    updated_at: datetime
    version: int = 1  # documented: changing the code bumps it


@dataclass
class Skill:
    """A skill the agent can use."""

    seq: int
    id: str
    workspace_id: str
    name: str
    display_name: str
    description: str
    body: str
    allowed_tools: list[str]
    tags: list[str]
    enabled: bool
    created_at: datetime
    updated_at: datetime


@dataclass
class Agent:
    """An agent (the guest agent) with its guardrails, skills and triggers."""

    seq: int
    id: str
    workspace_id: str
    name: str
    description: str
    instructions: str
    guardrails: list[dict[str, str]]
    skill_ids: list[str]
    operation_mode: str
    response_language: str
    triggers: list[dict[str, Any]]
    enabled: bool
    created_at: datetime
    updated_at: datetime


@dataclass
class KbNode:
    """A knowledge-base node: a directory, or a document re-indexed when its body changes."""

    seq: int
    id: str
    workspace_id: str
    title: str
    body: str
    parent_id: str | None
    entity_ids: list[str]
    is_directory: bool
    metadata: dict[str, Any]
    enabled: bool
    created_at: datetime
    updated_at: datetime
    indexed_at: datetime
    index_version: int = 1


@dataclass(frozen=True)
class Listing:
    """A listing, derived from one booking-system apartment while the connection is healthy."""

    seq: int
    id: str
    workspace_id: str
    name: str
    external_id: str
    hotel_id: str
    id_room_type: int


@dataclass
class KrossConnection:
    """The workspace's booking-system credentials, as the platform holds them."""

    hotel_id: str
    username: str
    password: str


@dataclass(frozen=True)
class ToolRun:
    """One execution of a custom tool, recorded so tests can see what was called."""

    seq: int
    id: str
    workspace_id: str
    tool_id: str
    tool_name: str
    parameters: dict[str, Any]
    at: datetime
    success: bool
    message: str
    raw_data: Any
    duration_ms: int
    output_message: str = ""  # what main() returned as its message (success only)


@dataclass(frozen=True)
class AgentToolCall:
    """One tool the emulated agent called during a test conversation, and how it went."""

    name: str
    parameters: dict[str, Any]
    success: bool
    message: str


@dataclass(frozen=True)
class AgentConversation:
    """A test conversation with an agent (emulator-only, see docs/assistant-api.md)."""

    seq: int
    id: str
    workspace_id: str
    agent_id: str
    message: str
    reply: str
    tool_calls: tuple[AgentToolCall, ...]
    at: datetime


@dataclass(frozen=True)
class StoredAnswer:
    """The answer of a write sent with an Idempotency-Key, replayed for the same key."""

    fingerprint: str
    status: int
    body: Any


class SlidingWindow:
    """Timestamps of admitted requests over the last minute (a true sliding window)."""

    def __init__(self) -> None:
        self._times: list[float] = []

    def wait_seconds(self, now: float, limit: int) -> int | None:
        """Seconds until one more request fits, or None if it fits now."""
        self._times = self._times[bisect_right(self._times, now - WINDOW_S) :]
        if len(self._times) < limit:
            return None
        # One more fits once the limit-th most recent request has left the window.
        return max(1, ceil(self._times[-limit] + WINDOW_S - now))

    def record(self, now: float) -> None:
        """Count one admitted request."""
        self._times.append(now)


@dataclass
class Tenant:
    """Everything the emulator keeps for one workspace."""

    workspace: Workspace
    members: dict[str, Member] = field(default_factory=dict)
    secrets: dict[str, Secret] = field(default_factory=dict)
    tools: dict[str, CustomTool] = field(default_factory=dict)
    skills: dict[str, Skill] = field(default_factory=dict)
    agents: dict[str, Agent] = field(default_factory=dict)
    nodes: dict[str, KbNode] = field(default_factory=dict)
    runs: list[ToolRun] = field(default_factory=list)
    conversations: list[AgentConversation] = field(default_factory=list)
    connection: KrossConnection | None = None
    # Guest traffic the emulator does not model message by message (a sandbox control adds it).
    traffic_messages: int = 0
    traffic_tool_calls: int = 0


@dataclass(frozen=True)
class WorkspaceUsage:
    """A workspace's cumulative consumption as the usage read reports it."""

    workspace_id: str
    usd_spent: Decimal
    messages: int
    tool_calls: int
    as_of: datetime


@dataclass
class SandboxConfig:
    """Switches a test may turn."""

    requests_per_minute: int = DEFAULT_REQUESTS_PER_MINUTE
    tool_timeout_s: float = DEFAULT_TOOL_TIMEOUT_S
    # "absent": every endpoint the public reference does not document answers 404.
    undocumented_endpoints: str = "present"
    # Knowledge-node ids: "convex32" (most examples) or "hex24" (the node-search example).
    kb_node_id_format: str = "convex32"


@dataclass
class Faults:
    """Injected misbehaviour; off by default."""

    fail_next: int = 0  # how many of the next attributed /v1 requests answer fail_status
    fail_status: int = 503


@dataclass
class Stats:
    """What the emulator has seen since the last reset."""

    requests_by_scope: Counter[str] = field(default_factory=Counter)
    requests_by_route: Counter[str] = field(default_factory=Counter)
    rate_limited: Counter[str] = field(default_factory=Counter)
    unauthorized: int = 0
    injected_errors: int = 0
    idempotent_replays: int = 0
    tool_runs: int = 0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view (scopes are workspace ids, or ``token:…`` for account calls)."""
        return {
            "requests": {
                "total": self.requests_by_scope.total(),
                "by_workspace": dict(self.requests_by_scope),
                "by_route": dict(self.requests_by_route),
            },
            "rate_limited": {
                "total": self.rate_limited.total(),
                "by_workspace": dict(self.rate_limited),
            },
            "unauthorized": self.unauthorized,
            "injected_errors": self.injected_errors,
            "idempotent_replays": self.idempotent_replays,
            "tool_runs": self.tool_runs,
        }
