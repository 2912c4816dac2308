"""The platform emulator's state and semantics, one tenant per workspace.

The store knows nothing about HTTP: it takes typed arguments, changes state and
raises :class:`~pmsgate.sandbox.assistant.errors.PlatformApiError` for every refusal.
All time comes from the injected clock, so the 120/min window moves only when a
test advances a :class:`~pmsgate.clock.ManualClock`. Ids are 32 lowercase letters and
digits, like the public reference's examples, drawn from a generator seeded with the
seed number, so a run is reproducible. Where public sources disagree (knowledge-node
ids: 32 characters in most examples, 24 hex in the node-search example) the store has
a switch (:class:`SandboxConfig`), and so do the endpoints the reference does not
document at all (``undocumented_endpoints``: "present", or "absent" = 404).

Listings are not stored: they are derived, on every read, from the booking-system
emulator (:class:`~pmsgate.sandbox.kross.store.KrossStore`) through the
workspace's PMS connection, so changing a facility's password there makes the
workspace's listings drop to none at once (spec §3, §7).
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import random
import re
import secrets
from bisect import bisect_right
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from math import ceil
from typing import Any, Generic, Protocol, TypeVar

from pmsgate.clock import Clock, ManualClock, SystemClock
from pmsgate.sandbox.assistant import errors, seed
from pmsgate.sandbox.assistant.errors import PlatformApiError
from pmsgate.sandbox.assistant.runner import run_python_tool
from pmsgate.sandbox.kross.store import KrossStore

DEFAULT_REQUESTS_PER_MINUTE = 120
DEFAULT_TOOL_TIMEOUT_S = 10.0
PAGE_DEFAULT = 20
PAGE_MAX = 100
WINDOW_S = 60.0

ID_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
ID_LENGTH = 32
ID_FORMATS = ("convex32", "hex24")
UNDOCUMENTED_MODES = ("present", "absent")

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

MAX_NAME = 64
KEBAB_CASE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
PARAMETER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SECRET_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
LANGUAGES = ("python", "javascript")
PARAMETER_TYPES = ("string", "number", "integer", "boolean", "array", "object")
PARAMETER_KEYS = frozenset({"type", "required", "description", "format", "enum"})
OPERATION_MODES = ("copilot", "autopilot")
ROLES: dict[str, str] = {
    "Owner": "Everything, including billing and deleting the workspace.",
    "Admin": "Manages members, tools, skills, agents, knowledge and secrets.",
    "Editor": "Edits tools, skills, agents and knowledge.",
    "Viewer": "Reads everything, changes nothing.",
}
MAX_SECRET_VALUE = 4096
MAX_TITLE = 255
MAX_BODY = 100_000

# The exact validation message of spec §7.
PARAMETER_DESCRIPTION_REQUIRED = "parameters[].description required"

# ASSUMED prices of the usage read (docs/platform-api.md): the platform's are not public.
USD_PER_MESSAGE = Decimal("0.0200")
USD_PER_TOOL_RUN = Decimal("0.0050")


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
class PmsConnection:
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
    """A test conversation with an agent (emulator-only, see docs/platform-api.md)."""

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
    connection: PmsConnection | None = None
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


class _Sequenced(Protocol):
    @property
    def seq(self) -> int: ...


T = TypeVar("T", bound=_Sequenced)


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list and the cursor of the next one."""

    items: list[T]
    next_cursor: str | None
    has_more: bool


def paginate(items: Sequence[T], limit: int | None, cursor: str | None) -> Page[T]:
    """One page of ``items`` (in ``seq`` order) after ``cursor``; limit 1-100, default 20."""
    size = PAGE_DEFAULT if limit is None else limit
    if not 1 <= size <= PAGE_MAX:
        raise PlatformApiError(errors.BAD_REQUEST, f"limit must be between 1 and {PAGE_MAX}")
    after = _decode_cursor(cursor) if cursor else -1
    # Keyset on seq: a deletion or insertion between pages never repeats or skips an item.
    remaining = [item for item in sorted(items, key=lambda i: i.seq) if item.seq > after]
    page = remaining[:size]
    has_more = len(remaining) > size
    next_cursor = _encode_cursor(page[-1].seq) if has_more and page else None
    return Page(page, next_cursor, has_more)


def _encode_cursor(seq: int) -> str:
    return base64.urlsafe_b64encode(f"after:{seq}".encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> int:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        prefix, _, value = raw.partition(":")
        if prefix != "after":
            raise ValueError(prefix)
        return int(value)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise PlatformApiError(errors.BAD_REQUEST, "invalid cursor") from None


# --- the store -------------------------------------------------------------------------------


class PlatformStore:
    """State and semantics of the assistant-platform emulator."""

    def __init__(
        self,
        seed: int = 1,
        clock: Clock | None = None,
        kross: KrossStore | None = None,
        *,
        requests_per_minute: int = DEFAULT_REQUESTS_PER_MINUTE,
        tool_timeout_s: float = DEFAULT_TOOL_TIMEOUT_S,
        undocumented_endpoints: str = "present",
        kb_node_id_format: str = "convex32",
    ) -> None:
        self.seed = seed
        self.clock: Clock = clock or SystemClock()
        self.kross = kross
        self._defaults = SandboxConfig(
            requests_per_minute,
            tool_timeout_s,
            _choice("undocumented_endpoints", undocumented_endpoints, UNDOCUMENTED_MODES),
            _choice("kb_node_id_format", kb_node_id_format, ID_FORMATS),
        )
        self.reset()

    def reset(self) -> None:
        """Back to the seed data: no extra tokens, workspaces, runs, faults or stats."""
        self._rng = random.Random(self.seed)
        self._seq = 0
        self._tokens: dict[str, ApiToken] = {}
        self._tenants: dict[str, Tenant] = {}
        self._owners: dict[str, str] = {}  # resource id -> workspace id
        self._windows: dict[str, SlidingWindow] = {}
        self._answers: dict[tuple[str, str], StoredAnswer] = {}
        self.config = copy.copy(self._defaults)
        self.faults = Faults()
        self.stats = Stats()
        seed.populate(self)
        # The seed's own calls are not traffic.
        self.stats = Stats()

    def now(self) -> datetime:
        """The emulator's current time."""
        return self.clock.now()

    # --- tokens and accounting -------------------------------------------------------------

    def add_token(self, value: str, *, name: str, workspace_ids: Sequence[str] | None) -> ApiToken:
        """Register a bearer token (the seed's account token, or one made by a control)."""
        if workspace_ids is not None:
            for workspace_id in workspace_ids:
                self._tenant(workspace_id)
        token = ApiToken(
            value, name, frozenset(workspace_ids) if workspace_ids is not None else None
        )
        self._tokens[value] = token
        return token

    def issue_token(self, name: str, workspace_ids: Sequence[str] | None) -> ApiToken:
        """A new random token, account-wide or scoped to the given workspaces."""
        return self.add_token(
            "sbx-" + secrets.token_hex(16), name=name, workspace_ids=workspace_ids
        )

    def authenticate(self, value: str | None) -> ApiToken:
        """The token a bearer value names, or 401."""
        token = self._tokens.get(value or "")
        if token is None:
            self.stats.unauthorized += 1
            raise PlatformApiError(errors.UNAUTHORIZED)
        return token

    def authorize(self, token: ApiToken, workspace_id: str) -> None:
        """Refuse (403) a scoped token outside its workspaces."""
        if token.workspace_ids is not None and workspace_id not in token.workspace_ids:
            raise PlatformApiError(errors.FORBIDDEN)

    def admit(self, scope: str, route: str) -> None:
        """Count one request against ``scope`` (a workspace id or a token key), or refuse 429."""
        window = self._windows.setdefault(scope, SlidingWindow())
        now = self.now().timestamp()
        wait = window.wait_seconds(now, self.config.requests_per_minute)
        if wait is not None:
            # Refused requests are not counted: otherwise Retry-After would never come true.
            self.stats.rate_limited[scope] += 1
            raise PlatformApiError(
                errors.RATE_LIMITED,
                f"rate limit exceeded: {self.config.requests_per_minute} requests per minute "
                "per workspace",
                headers={"Retry-After": str(wait)},
            )
        window.record(now)
        self.stats.requests_by_scope[scope] += 1
        self.stats.requests_by_route[route] += 1

    def draw_fault(self) -> None:
        """Answer the injected failure if one is armed."""
        if self.faults.fail_next > 0:
            self.faults.fail_next -= 1
            self.stats.injected_errors += 1
            spec = errors.ErrorSpec(
                errors.UNAVAILABLE.name, self.faults.fail_status, errors.UNAVAILABLE.message
            )
            raise PlatformApiError(spec)

    def replay(self, scope: str, key: str, fingerprint: str) -> StoredAnswer | None:
        """The stored answer of an earlier write with this Idempotency-Key, if any."""
        stored = self._answers.get((scope, key))
        if stored is None:
            return None
        if stored.fingerprint != fingerprint:
            raise PlatformApiError(
                errors.VALIDATION, "Idempotency-Key was already used with a different request"
            )
        self.stats.idempotent_replays += 1
        return stored

    def remember(self, scope: str, key: str, fingerprint: str, status: int, body: Any) -> None:
        """Keep a successful write's answer for replays of the same Idempotency-Key."""
        self._answers[(scope, key)] = StoredAnswer(fingerprint, status, copy.deepcopy(body))

    # --- workspaces ------------------------------------------------------------------------

    def create_workspace(
        self,
        name: str,
        slug: str,
        *,
        owner_email: str = seed.ACCOUNT_OWNER_EMAIL,
        owner_name: str = seed.ACCOUNT_OWNER_NAME,
    ) -> Workspace:
        """A new workspace (unique slug) whose first member is the account owner."""
        name = _required_text("name", name, 200)
        _check_name("slug", slug)
        if any(t.workspace.slug == slug for t in self._tenants.values()):
            raise PlatformApiError(
                errors.CONFLICT, f"a workspace with slug '{slug}' already exists"
            )
        now = self.now()
        workspace = Workspace(self._next_seq(), self._new_id(), name, slug, now)
        self._tenants[workspace.id] = Tenant(workspace)
        self.add_member(workspace.id, owner_email, "Owner", owner_name)
        return workspace

    def workspaces(self, token: ApiToken | None = None) -> list[Workspace]:
        """Workspaces the token can see (all of them without a token)."""
        return [
            t.workspace
            for t in self._tenants.values()
            if token is None or token.workspace_ids is None or t.workspace.id in token.workspace_ids
        ]

    def workspace(self, workspace_id: str) -> Workspace:
        """One workspace, or 404."""
        return self._tenant(workspace_id).workspace

    def owner_of(self, resource_id: str) -> str:
        """The workspace a tool, skill, agent or node belongs to, or 404."""
        workspace_id = self._owners.get(resource_id)
        if workspace_id is None:
            raise PlatformApiError(errors.NOT_FOUND, f"no object with id {resource_id}")
        return workspace_id

    # --- members and roles -----------------------------------------------------------------

    def roles(self) -> list[tuple[str, str]]:
        """Every role and what it allows."""
        return list(ROLES.items())

    def members(self, workspace_id: str) -> list[Member]:
        """A workspace's members."""
        return list(self._tenant(workspace_id).members.values())

    def add_member(self, workspace_id: str, email: str, role: str, name: str = "") -> Member:
        """Add a person with a role; an e-mail already in the workspace is a conflict."""
        tenant = self._tenant(workspace_id)
        if not EMAIL.match(email or ""):
            raise PlatformApiError(errors.VALIDATION, "email must be an e-mail address")
        _check_role(role)
        if any(m.email.lower() == email.lower() for m in tenant.members.values()):
            raise PlatformApiError(
                errors.CONFLICT, f"{email} is already a member of this workspace"
            )
        member = Member(
            self._next_seq(), self._new_id(), workspace_id, email, name, role, self.now()
        )
        tenant.members[member.id] = member
        return member

    def set_member_role(self, workspace_id: str, member_id: str, role: str) -> Member:
        """Change a member's role."""
        member = self._tenant(workspace_id).members.get(member_id)
        if member is None:
            raise PlatformApiError(errors.NOT_FOUND, f"no member {member_id} in this workspace")
        _check_role(role)
        member.role = role
        return member

    # --- secrets ---------------------------------------------------------------------------

    def secrets(self, workspace_id: str) -> list[Secret]:
        """A workspace's secrets (callers show names only)."""
        return list(self._tenant(workspace_id).secrets.values())

    def set_secret(self, workspace_id: str, name: str, value: str) -> tuple[Secret, bool]:
        """Create or replace a secret; True when it is new."""
        tenant = self._tenant(workspace_id)
        if not SECRET_NAME.match(name):
            raise PlatformApiError(
                errors.VALIDATION,
                "secret names are letters, digits and underscores, not starting with a digit "
                "(at most 128)",
            )
        if not isinstance(value, str) or not value or len(value) > MAX_SECRET_VALUE:
            raise PlatformApiError(
                errors.VALIDATION, f"value must be 1 to {MAX_SECRET_VALUE} characters"
            )
        now = self.now()
        existing = tenant.secrets.get(name)
        if existing is not None:
            existing.value, existing.updated_at = value, now
            return existing, False
        secret = Secret(self._next_seq(), name, value, now, now)
        tenant.secrets[name] = secret
        return secret, True

    def delete_secret(self, workspace_id: str, name: str) -> None:
        """Remove a secret, or 404."""
        if self._tenant(workspace_id).secrets.pop(name, None) is None:
            raise PlatformApiError(errors.NOT_FOUND, f"no secret {name}")

    # --- custom tools ----------------------------------------------------------------------

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
        """A new custom tool, validated as the platform does (spec §7)."""
        tenant = self._tenant(workspace_id)
        _check_name("name", name)
        self._refuse_duplicate(tenant.tools.values(), name, "custom tool")
        now = self.now()
        tool = CustomTool(
            seq=self._next_seq(),
            id=self._new_id(),
            workspace_id=workspace_id,
            name=name,
            description=_required_text("description", description, 2000),
            language=_check_language(language),
            code=_required_text("code", code, 200_000),
            parameters=_check_parameters(parameters),
            execution_message_description=execution_message_description,
            enable_globally=enable_globally,
            created_at=now,
            updated_at=now,
        )
        tenant.tools[tool.id] = tool
        self._owners[tool.id] = workspace_id
        return tool

    def tools(self, workspace_id: str) -> list[CustomTool]:
        """A workspace's custom tools."""
        return list(self._tenant(workspace_id).tools.values())

    def tool(self, tool_id: str) -> CustomTool:
        """One custom tool, or 404."""
        tool = self._tenant(self.owner_of(tool_id)).tools.get(tool_id)
        if tool is None:
            raise PlatformApiError(errors.NOT_FOUND, f"no custom tool {tool_id}")
        return tool

    def update_tool(self, tool_id: str, changes: Mapping[str, Any]) -> CustomTool:
        """Change some fields of a tool; the same validation as on creation."""
        tool = self.tool(tool_id)
        tenant = self._tenant(tool.workspace_id)
        checked: dict[str, Any] = {}
        for key, value in changes.items():
            if key == "name":
                _check_name("name", value)
                others = (t for t in tenant.tools.values() if t.id != tool_id)
                self._refuse_duplicate(others, value, "custom tool")
                checked[key] = value
            elif key == "description":
                checked[key] = _required_text("description", value, 2000)
            elif key == "language":
                checked[key] = _check_language(value)
            elif key == "code":
                checked[key] = _required_text("code", value, 200_000)
                if value != tool.code:
                    tool.version += 1
            elif key == "parameters":
                checked[key] = _check_parameters(value)
            elif key in ("execution_message_description", "enable_globally"):
                checked[key] = value
            else:
                raise PlatformApiError(errors.VALIDATION, f"{key} cannot be changed")
        for key, value in checked.items():
            setattr(tool, key, value)
        tool.updated_at = self.now()
        return tool

    def delete_tool(self, tool_id: str) -> None:
        """Remove a tool (its recorded runs stay)."""
        tool = self.tool(tool_id)
        del self._tenant(tool.workspace_id).tools[tool_id]
        del self._owners[tool_id]

    async def run_tool(self, tool_id: str, parameters: Mapping[str, Any]) -> ToolRun:
        """Execute a tool with the workspace secrets as environment, and record the run."""
        tool = self.tool(tool_id)
        tenant = self._tenant(tool.workspace_id)
        _check_arguments(tool.parameters, parameters)
        if tool.language != "python":
            success, message, raw, duration = (
                False,
                "this sandbox runs python tools only",
                None,
                0,
            )
        else:
            outcome = await run_python_tool(
                tool.code,
                parameters,
                {s.name: s.value for s in tenant.secrets.values()},
                timeout_s=self.config.tool_timeout_s,
            )
            success, message, raw, duration = (
                outcome.success,
                outcome.message,
                outcome.raw_data,
                outcome.duration_ms,
            )
        output_message = message if success else ""
        run = ToolRun(
            output_message=output_message,
            seq=self._next_seq(),
            id=self._new_id(),
            workspace_id=tool.workspace_id,
            tool_id=tool.id,
            tool_name=tool.name,
            parameters=copy.deepcopy(dict(parameters)),
            at=self.now(),
            success=success,
            message=message,
            raw_data=raw,
            duration_ms=duration,
        )
        tenant.runs.append(run)
        self.stats.tool_runs += 1
        return run

    def tool_runs(self, workspace_id: str) -> list[ToolRun]:
        """Every recorded run of the workspace's tools, oldest first."""
        return list(self._tenant(workspace_id).runs)

    # --- skills ----------------------------------------------------------------------------

    def create_skill(
        self,
        workspace_id: str,
        *,
        name: str,
        display_name: str,
        description: str,
        body: str,
        allowed_tools: Sequence[str] = (),
        tags: Sequence[str] = (),
        enabled: bool = True,
    ) -> Skill:
        """A new skill (kebab-case name, unique per workspace)."""
        tenant = self._tenant(workspace_id)
        _check_name("name", name)
        self._refuse_duplicate(tenant.skills.values(), name, "skill")
        now = self.now()
        skill = Skill(
            seq=self._next_seq(),
            id=self._new_id(),
            workspace_id=workspace_id,
            name=name,
            display_name=_required_text("display_name", display_name, 200),
            description=_required_text("description", description, 2000),
            body=_required_text("body", body, MAX_BODY),
            allowed_tools=list(allowed_tools),
            tags=list(tags),
            enabled=enabled,
            created_at=now,
            updated_at=now,
        )
        tenant.skills[skill.id] = skill
        self._owners[skill.id] = workspace_id
        return skill

    def skills(self, workspace_id: str) -> list[Skill]:
        """A workspace's skills."""
        return list(self._tenant(workspace_id).skills.values())

    def skill(self, skill_id: str) -> Skill:
        """One skill, or 404."""
        skill = self._tenant(self.owner_of(skill_id)).skills.get(skill_id)
        if skill is None:
            raise PlatformApiError(errors.NOT_FOUND, f"no skill {skill_id}")
        return skill

    # --- agents ----------------------------------------------------------------------------

    def create_agent(
        self,
        workspace_id: str,
        *,
        name: str,
        description: str = "",
        instructions: str = "",
        guardrails: Sequence[Mapping[str, Any]] = (),
        skill_ids: Sequence[str] = (),
        operation_mode: str = "copilot",
        response_language: str = "Original",
        triggers: Sequence[Mapping[str, Any]] = (),
        enabled: bool = True,
    ) -> Agent:
        """A new agent; its skills must exist in the same workspace."""
        tenant = self._tenant(workspace_id)
        name = _required_text("name", name, 200)
        if any(a.name == name for a in tenant.agents.values()):
            raise PlatformApiError(
                errors.CONFLICT, f"an agent named '{name}' already exists in this workspace"
            )
        now = self.now()
        agent = Agent(
            seq=self._next_seq(),
            id=self._new_id(),
            workspace_id=workspace_id,
            name=name,
            description=description,
            instructions=instructions,
            guardrails=_check_guardrails(guardrails),
            skill_ids=self._check_skill_ids(tenant, skill_ids),
            operation_mode=_check_operation_mode(operation_mode),
            response_language=_required_text("response_language", response_language, 64),
            triggers=_check_triggers(triggers),
            enabled=enabled,
            created_at=now,
            updated_at=now,
        )
        tenant.agents[agent.id] = agent
        self._owners[agent.id] = workspace_id
        return agent

    def agents(self, workspace_id: str) -> list[Agent]:
        """A workspace's agents."""
        return list(self._tenant(workspace_id).agents.values())

    def agent(self, agent_id: str) -> Agent:
        """One agent, or 404."""
        agent = self._tenant(self.owner_of(agent_id)).agents.get(agent_id)
        if agent is None:
            raise PlatformApiError(errors.NOT_FOUND, f"no agent {agent_id}")
        return agent

    def update_agent(self, agent_id: str, changes: Mapping[str, Any]) -> Agent:
        """Change some fields of an agent; the same validation as on creation."""
        agent = self.agent(agent_id)
        tenant = self._tenant(agent.workspace_id)
        checked: dict[str, Any] = {}
        for key, value in changes.items():
            if key == "name":
                value = _required_text("name", value, 200)
                if any(a.name == value and a.id != agent_id for a in tenant.agents.values()):
                    raise PlatformApiError(
                        errors.CONFLICT, f"an agent named '{value}' already exists"
                    )
                checked[key] = value
            elif key == "guardrails":
                checked[key] = _check_guardrails(value)
            elif key == "skill_ids":
                checked[key] = self._check_skill_ids(tenant, value)
            elif key == "operation_mode":
                checked[key] = _check_operation_mode(value)
            elif key == "response_language":
                checked[key] = _required_text("response_language", value, 64)
            elif key == "triggers":
                checked[key] = _check_triggers(value)
            elif key in ("description", "instructions", "enabled"):
                checked[key] = value
            else:
                raise PlatformApiError(errors.VALIDATION, f"{key} cannot be changed")
        for key, value in checked.items():
            setattr(agent, key, value)
        agent.updated_at = self.now()
        return agent

    # --- test conversations (emulator-only) -------------------------------------------------

    async def run_test_conversation(self, agent_id: str, message: str) -> AgentConversation:
        """Play one guest message to a minimal deterministic "agent" that may call a tool.

        The real platform's test-conversation API is not public; this stands in for it
        (docs/platform-api.md). The "agent" recognises one intent, availability over two
        ISO dates, calls the workspace's ``check-availability`` tool when the agent may
        use it (enabled globally, or allowed by one of its enabled skills) and records
        every tool call. Each tool call counts against the workspace's request budget.
        """
        agent = self.agent(agent_id)
        tenant = self._tenant(agent.workspace_id)
        text = _required_text("message", message, MAX_MESSAGE)
        if not agent.enabled:
            raise PlatformApiError(errors.CONFLICT, "the agent is disabled")
        calls: list[AgentToolCall] = []
        stay = _availability_request(text)
        if stay is None:
            reply = (
                "I can help with availability: tell me the arrival and departure dates "
                "(YYYY-MM-DD)."
            )
        else:
            arrival, departure = stay
            tool = self._agent_tool(tenant, agent, AVAILABILITY_TOOL)
            arguments = _stay_arguments(tool.parameters, stay) if tool is not None else None
            if tool is None or arguments is None:
                reply = (
                    f"I cannot check availability from {arrival} to {departure}: no "
                    f"{AVAILABILITY_TOOL} tool is available to this agent. An operator will "
                    "answer."
                )
            else:
                self.admit(tenant.workspace.id, f"AGENT tool call {tool.name}")
                try:
                    run = await self.run_tool(tool.id, arguments)
                    call = AgentToolCall(tool.name, arguments, run.success, run.message)
                except PlatformApiError as refused:
                    call = AgentToolCall(tool.name, arguments, False, refused.message)
                calls.append(call)
                reply = (
                    f"I checked availability from {arrival} to {departure}: {call.message}"
                    if call.success
                    else f"I could not check availability right now ({call.message}); an "
                    "operator will confirm."
                )
        conversation = AgentConversation(
            seq=self._next_seq(),
            id=self._new_id(),
            workspace_id=tenant.workspace.id,
            agent_id=agent.id,
            message=text,
            reply=reply,
            tool_calls=tuple(calls),
            at=self.now(),
        )
        tenant.conversations.append(conversation)
        return conversation

    def test_conversations(
        self, workspace_id: str, agent_id: str | None = None
    ) -> list[AgentConversation]:
        """The recorded test conversations of a workspace (of one agent when given)."""
        return [
            c
            for c in self._tenant(workspace_id).conversations
            if agent_id is None or c.agent_id == agent_id
        ]

    def _agent_tool(self, tenant: Tenant, agent: Agent, name: str) -> CustomTool | None:
        """The workspace tool ``name`` if the agent may use it (global, or via a skill)."""
        allowed = {
            tool_name
            for skill_id in agent.skill_ids
            if (skill := tenant.skills.get(skill_id)) is not None and skill.enabled
            for tool_name in skill.allowed_tools
        }
        usable = (t for t in tenant.tools.values() if t.enable_globally or t.name in allowed)
        return next((t for t in usable if t.name == name), None)

    # --- usage (assumed API, docs/platform-api.md) -----------------------------------------

    def usage(self, workspace_id: str) -> WorkspaceUsage:
        """Cumulative usage: one message per test conversation, tool runs, added traffic."""
        tenant = self._tenant(workspace_id)
        messages = len(tenant.conversations) + tenant.traffic_messages
        tool_calls = len(tenant.runs) + tenant.traffic_tool_calls
        return WorkspaceUsage(
            workspace_id=workspace_id,
            usd_spent=messages * USD_PER_MESSAGE + tool_calls * USD_PER_TOOL_RUN,
            messages=messages,
            tool_calls=tool_calls,
            as_of=self.now(),
        )

    def add_traffic(self, workspace_id: str, messages: int = 0, tool_calls: int = 0) -> None:
        """Count guest messages and tool calls the workspace handled (a sandbox control)."""
        if messages < 0 or tool_calls < 0:
            raise PlatformApiError(errors.VALIDATION, "traffic counts cannot be negative")
        tenant = self._tenant(workspace_id)
        tenant.traffic_messages += messages
        tenant.traffic_tool_calls += tool_calls

    # --- booking-system connection and listings --------------------------------------------

    def set_pms_connection(
        self, workspace_id: str, hotel_id: str, username: str, password: str
    ) -> PmsConnection:
        """Store the workspace's booking-system credentials (a sandbox control)."""
        connection = PmsConnection(hotel_id, username, password)
        self._tenant(workspace_id).connection = connection
        return connection

    def clear_pms_connection(self, workspace_id: str) -> None:
        """Forget the workspace's booking-system credentials."""
        self._tenant(workspace_id).connection = None

    def pms_connection(self, workspace_id: str) -> tuple[PmsConnection | None, bool]:
        """The stored credentials and whether they work against the booking-system emulator now."""
        connection = self._tenant(workspace_id).connection
        return connection, self._healthy(connection)

    def listings(self, workspace_id: str) -> list[Listing]:
        """One listing per apartment of the connected facility; none while the connection fails."""
        connection = self._tenant(workspace_id).connection
        if connection is None or self.kross is None or not self._healthy(connection):
            return []
        facility = self.kross.facility(connection.hotel_id)
        apartments = sorted(facility.apartments.values(), key=lambda a: a.id_room_type)
        return [
            Listing(
                seq=index,
                # Stable across connection failures, so registry rows stay valid.
                id=hashlib.sha256(
                    f"{workspace_id}:{facility.hotel_id}:{a.id_room_type}".encode()
                ).hexdigest()[:ID_LENGTH],
                workspace_id=workspace_id,
                name=a.name,
                external_id=str(a.id_room_type),
                hotel_id=facility.hotel_id,
                id_room_type=a.id_room_type,
            )
            for index, a in enumerate(apartments)
        ]

    # --- knowledge nodes -------------------------------------------------------------------

    def create_node(
        self,
        workspace_id: str,
        *,
        title: str,
        body: str = "",
        parent_id: str | None = None,
        entity_ids: Sequence[str] = (),
        is_directory: bool = False,
        metadata: Mapping[str, Any] | None = None,
        enabled: bool = True,
    ) -> KbNode:
        """A new node (a directory, or a document); its parent must be a directory here."""
        tenant = self._tenant(workspace_id)
        if parent_id is not None:
            self._check_parent(tenant, parent_id)
        now = self.now()
        node = KbNode(
            seq=self._next_seq(),
            id=self._new_id(self.config.kb_node_id_format),
            workspace_id=workspace_id,
            title=_required_text("title", title, MAX_TITLE),
            body=_check_body(body),
            parent_id=parent_id,
            entity_ids=_check_entity_ids(entity_ids),
            is_directory=is_directory,
            metadata=dict(metadata or {}),
            enabled=enabled,
            created_at=now,
            updated_at=now,
            indexed_at=now,
        )
        tenant.nodes[node.id] = node
        self._owners[node.id] = workspace_id
        return node

    def nodes(
        self,
        workspace_id: str,
        *,
        listing_id: str | None = None,
        parent_id: str | None = None,
        is_directory: bool | None = None,
    ) -> list[KbNode]:
        """Nodes of a workspace, optionally of one listing (entity_ids) and under one parent."""
        return [
            n
            for n in self._tenant(workspace_id).nodes.values()
            if (listing_id is None or listing_id in n.entity_ids)
            and (parent_id is None or n.parent_id == parent_id)
            and (is_directory is None or n.is_directory == is_directory)
        ]

    def node(self, node_id: str) -> KbNode:
        """One node, or 404."""
        node = self._tenant(self.owner_of(node_id)).nodes.get(node_id)
        if node is None:
            raise PlatformApiError(errors.NOT_FOUND, f"no node {node_id}")
        return node

    def update_node(self, node_id: str, changes: Mapping[str, Any]) -> KbNode:
        """Change some fields of a node; a new body is re-indexed."""
        node = self.node(node_id)
        tenant = self._tenant(node.workspace_id)
        checked: dict[str, Any] = {}
        for key, value in changes.items():
            if key == "title":
                checked[key] = _required_text("title", value, MAX_TITLE)
            elif key == "body":
                checked[key] = _check_body(value)
            elif key == "parent_id":
                if value is not None:
                    self._check_parent(tenant, value, moving=node)
                checked[key] = value
            elif key == "entity_ids":
                checked[key] = _check_entity_ids(value)
            elif key == "metadata":
                checked[key] = dict(value or {})
            elif key == "enabled":
                checked[key] = value
            else:
                raise PlatformApiError(errors.VALIDATION, f"{key} cannot be changed")
        now = self.now()
        if "body" in checked and checked["body"] != node.body:
            node.index_version += 1
            node.indexed_at = now
        for key, value in checked.items():
            setattr(node, key, value)
        node.updated_at = now
        return node

    def delete_node(self, node_id: str) -> None:
        """Remove a node; a directory that still has children is refused (409)."""
        node = self.node(node_id)
        tenant = self._tenant(node.workspace_id)
        if any(n.parent_id == node_id for n in tenant.nodes.values()):
            raise PlatformApiError(
                errors.CONFLICT, "the directory is not empty; delete its children first"
            )
        del tenant.nodes[node_id]
        del self._owners[node_id]

    # --- test controls ---------------------------------------------------------------------

    def configure(
        self,
        requests_per_minute: int | None = None,
        tool_timeout_s: float | None = None,
        *,
        undocumented_endpoints: str | None = None,
        kb_node_id_format: str | None = None,
    ) -> SandboxConfig:
        """Change the switches given (the others stay as they are)."""
        if requests_per_minute is not None:
            self.config.requests_per_minute = requests_per_minute
        if tool_timeout_s is not None:
            self.config.tool_timeout_s = tool_timeout_s
        if undocumented_endpoints is not None:
            self.config.undocumented_endpoints = _choice(
                "undocumented_endpoints", undocumented_endpoints, UNDOCUMENTED_MODES
            )
        if kb_node_id_format is not None:
            self.config.kb_node_id_format = _choice(
                "kb_node_id_format", kb_node_id_format, ID_FORMATS
            )
        return self.config

    def runtimes(self) -> list[dict[str, Any]]:
        """The custom-tool runtimes: entrypoint, return contract, importable modules."""
        return copy.deepcopy(list(RUNTIMES))

    def set_faults(self, fail_next: int | None = None, fail_status: int | None = None) -> Faults:
        """Arm faults (the ones not given stay as they are)."""
        if fail_next is not None:
            self.faults.fail_next = fail_next
        if fail_status is not None:
            self.faults.fail_status = fail_status
        return self.faults

    def clear_faults(self) -> None:
        """Disarm every fault."""
        self.faults = Faults()

    def advance_clock(self, seconds: float) -> datetime:
        """Move a ManualClock forward; any other clock refuses."""
        if not isinstance(self.clock, ManualClock):
            raise PlatformApiError(errors.BAD_REQUEST, "the emulator's clock is not a ManualClock")
        return self.clock.advance(seconds)

    # --- helpers ---------------------------------------------------------------------------

    def _tenant(self, workspace_id: str) -> Tenant:
        tenant = self._tenants.get(workspace_id)
        if tenant is None:
            raise PlatformApiError(errors.NOT_FOUND, f"no workspace {workspace_id}")
        return tenant

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _new_id(self, id_format: str = "convex32") -> str:
        if id_format == "hex24":
            return f"{self._rng.getrandbits(96):024x}"
        return "".join(self._rng.choice(ID_ALPHABET) for _ in range(ID_LENGTH))

    def _healthy(self, connection: PmsConnection | None) -> bool:
        if connection is None or self.kross is None:
            return False
        if not self.kross.has_facility(connection.hotel_id):
            return False
        facility = self.kross.facility(connection.hotel_id)
        return (facility.username, facility.password) == (
            connection.username,
            connection.password,
        )

    @staticmethod
    def _refuse_duplicate(existing: Any, name: str, kind: str) -> None:
        if any(item.name == name for item in existing):
            raise PlatformApiError(
                errors.CONFLICT, f"a {kind} named '{name}' already exists in this workspace"
            )

    @staticmethod
    def _check_skill_ids(tenant: Tenant, skill_ids: Sequence[str]) -> list[str]:
        unknown = [s for s in skill_ids if s not in tenant.skills]
        if unknown:
            raise PlatformApiError(
                errors.VALIDATION, f"skill_ids: unknown skill {unknown[0]} in this workspace"
            )
        return list(dict.fromkeys(skill_ids))

    @staticmethod
    def _check_parent(tenant: Tenant, parent_id: str, moving: KbNode | None = None) -> None:
        parent = tenant.nodes.get(parent_id)
        if parent is None:
            raise PlatformApiError(
                errors.VALIDATION, f"parent_id: no node {parent_id} in this workspace"
            )
        if not parent.is_directory:
            raise PlatformApiError(errors.VALIDATION, "parent_id must be a directory")
        if moving is not None:
            cursor: KbNode | None = parent
            while cursor is not None:
                if cursor.id == moving.id:
                    raise PlatformApiError(
                        errors.VALIDATION, "parent_id would put the node inside itself"
                    )
                cursor = tenant.nodes.get(cursor.parent_id) if cursor.parent_id else None


def _choice(name: str, value: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise PlatformApiError(errors.VALIDATION, f"{name} must be one of {', '.join(allowed)}")
    return value


# --- the test conversation's "agent" -----------------------------------------------------------

AVAILABILITY_TOOL = "check-availability"
MAX_MESSAGE = 4000
_AVAILABILITY_WORDS = re.compile(r"availab|disponib|\bfree\b|\bliber[oaie]\b", re.IGNORECASE)
_ISO_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
_ARRIVAL_NAMES = ("arrival", "check_in", "checkin", "date_from", "start", "from")
_DEPARTURE_NAMES = ("departure", "check_out", "checkout", "date_to", "end", "to")


def _availability_request(text: str) -> tuple[str, str] | None:
    """(arrival, departure) when the message asks for availability between two ISO dates."""
    if not _AVAILABILITY_WORDS.search(text):
        return None
    days: list[date] = []
    for raw in _ISO_DATE.findall(text):
        try:
            day = date.fromisoformat(raw)
        except ValueError:
            continue
        if day not in days:
            days.append(day)
    if len(days) < 2:
        return None
    first, second = sorted(days[:2])
    return first.isoformat(), second.isoformat()


def _stay_arguments(
    parameters: Mapping[str, Mapping[str, Any]], stay: tuple[str, str]
) -> dict[str, Any] | None:
    """The arguments for a stay: arrival/departure-like names, else the first two strings."""
    strings = [name for name, spec in parameters.items() if spec.get("type") == "string"]

    def named(candidates: tuple[str, ...]) -> str | None:
        for candidate in candidates:
            for name in strings:
                if name.lower() == candidate or name.lower().startswith(candidate + "_"):
                    return name
        return None

    arrival, departure = named(_ARRIVAL_NAMES), named(_DEPARTURE_NAMES)
    if arrival is None or departure is None or arrival == departure:
        if len(strings) < 2:
            return None
        arrival, departure = strings[0], strings[1]
    return {arrival: stay[0], departure: stay[1]}


# --- validation ------------------------------------------------------------------------------


def _required_text(field_name: str, value: Any, max_length: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise PlatformApiError(errors.VALIDATION, f"{field_name} required")
    if len(value) > max_length:
        raise PlatformApiError(
            errors.VALIDATION, f"{field_name} must be at most {max_length} characters"
        )
    return value


def _check_name(field_name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise PlatformApiError(errors.VALIDATION, f"{field_name} required")
    if len(value) > MAX_NAME or not KEBAB_CASE.match(value):
        raise PlatformApiError(
            errors.VALIDATION,
            f"{field_name} must be kebab-case (lowercase letters, digits, single hyphens), "
            f"at most {MAX_NAME} characters",
        )
    return value


def _check_language(value: Any) -> str:
    if value not in LANGUAGES:
        raise PlatformApiError(errors.VALIDATION, "language must be python or javascript")
    return str(value)


def _check_parameters(parameters: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(parameters, Mapping):
        raise PlatformApiError(errors.VALIDATION, "parameters must be an object")
    checked: dict[str, dict[str, Any]] = {}
    for name, spec in parameters.items():
        if not PARAMETER_NAME.match(name):
            raise PlatformApiError(
                errors.VALIDATION,
                f"parameters: '{name}' must be letters, digits and underscores",
            )
        if not isinstance(spec, Mapping):
            raise PlatformApiError(errors.VALIDATION, f"parameters.{name} must be an object")
        description = spec.get("description")
        if not isinstance(description, str) or not description.strip():
            raise PlatformApiError(errors.VALIDATION, PARAMETER_DESCRIPTION_REQUIRED)
        if spec.get("type") not in PARAMETER_TYPES:
            raise PlatformApiError(
                errors.VALIDATION,
                f"parameters[].type must be one of {', '.join(PARAMETER_TYPES)}",
            )
        if not isinstance(spec.get("required", False), bool):
            raise PlatformApiError(errors.VALIDATION, "parameters[].required must be a boolean")
        unknown = sorted(set(spec) - PARAMETER_KEYS)
        if unknown:
            raise PlatformApiError(
                errors.VALIDATION, f"parameters.{name}: unknown field '{unknown[0]}'"
            )
        checked[name] = {"required": False, **copy.deepcopy(dict(spec))}
    return checked


def _check_arguments(parameters: Mapping[str, Mapping[str, Any]], given: Mapping[str, Any]) -> None:
    unknown = sorted(set(given) - set(parameters))
    if unknown:
        raise PlatformApiError(errors.VALIDATION, f"parameters: unknown parameter '{unknown[0]}'")
    for name, spec in parameters.items():
        if name not in given:
            if spec.get("required"):
                raise PlatformApiError(errors.VALIDATION, f"parameters.{name} required")
            continue
        if not _fits(spec.get("type"), given[name]):
            raise PlatformApiError(
                errors.VALIDATION, f"parameters.{name} must be of type {spec.get('type')}"
            )


def _fits(kind: Any, value: Any) -> bool:
    if value is None:
        return True
    if kind == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    checks: dict[str, type | tuple[type, ...]] = {
        "string": str,
        "integer": int,
        "number": (int, float),
        "array": list,
        "object": dict,
    }
    expected = checks.get(str(kind))
    return expected is None or isinstance(value, expected)


def _check_role(role: Any) -> None:
    if role not in ROLES:
        raise PlatformApiError(errors.VALIDATION, f"role must be one of {', '.join(ROLES)}")


def _check_operation_mode(value: Any) -> str:
    if value not in OPERATION_MODES:
        raise PlatformApiError(errors.VALIDATION, "operation_mode must be copilot or autopilot")
    return str(value)


def _check_guardrails(guardrails: Any) -> list[dict[str, str]]:
    checked: list[dict[str, str]] = []
    for guardrail in guardrails:
        if not isinstance(guardrail, Mapping):
            raise PlatformApiError(errors.VALIDATION, "guardrails[] must be objects")
        for key in ("title", "knowledge"):
            value = guardrail.get(key)
            if not isinstance(value, str) or not value.strip():
                raise PlatformApiError(errors.VALIDATION, f"guardrails[].{key} required")
        unknown = sorted(set(guardrail) - {"title", "knowledge"})
        if unknown:
            raise PlatformApiError(errors.VALIDATION, f"guardrails[]: unknown field '{unknown[0]}'")
        checked.append({"title": guardrail["title"], "knowledge": guardrail["knowledge"]})
    return checked


def _check_triggers(triggers: Any) -> list[dict[str, Any]]:
    checked: list[dict[str, Any]] = []
    for trigger in triggers:
        if not isinstance(trigger, Mapping):
            raise PlatformApiError(errors.VALIDATION, "triggers[] must be objects")
        _required_text("triggers[].name", trigger.get("name"), 200)
        if trigger.get("type") != "message":
            raise PlatformApiError(errors.VALIDATION, "triggers[].type must be message")
        config = trigger.get("config")
        if not isinstance(config, Mapping) or not isinstance(config.get("inboxTypeId"), str):
            raise PlatformApiError(errors.VALIDATION, "triggers[].config.inboxTypeId required")
        channels = config.get("channels", [])
        if not isinstance(channels, list) or not all(isinstance(c, str) for c in channels):
            raise PlatformApiError(
                errors.VALIDATION, "triggers[].config.channels must be a list of strings"
            )
        enabled = trigger.get("enabled", True)
        if not isinstance(enabled, bool):
            raise PlatformApiError(errors.VALIDATION, "triggers[].enabled must be a boolean")
        checked.append(
            {
                "name": trigger["name"],
                "type": "message",
                "config": copy.deepcopy(dict(config)),
                "enabled": enabled,
            }
        )
    return checked


def _check_body(value: Any) -> str:
    if not isinstance(value, str):
        raise PlatformApiError(errors.VALIDATION, "body must be a string")
    if len(value) > MAX_BODY:
        raise PlatformApiError(errors.VALIDATION, f"body must be at most {MAX_BODY} characters")
    return value


def _check_entity_ids(value: Any) -> list[str]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
        raise PlatformApiError(errors.VALIDATION, "entity_ids must be a list of listing ids")
    return list(dict.fromkeys(value))
