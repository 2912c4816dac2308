"""The platform emulator's state and semantics, one tenant per workspace.

The store knows nothing about HTTP: it takes typed arguments, changes state and
raises :class:`~pmsgate.sandbox.assistant.errors.AssistantApiError` for every refusal.
All time comes from the injected clock, so the 120/min window moves only when a
test advances a :class:`~pmsgate.clock.ManualClock`. Ids are 32 lowercase letters and
digits, like the public reference's examples, drawn from a generator seeded with the
seed number, so a run is reproducible. Where public sources disagree (knowledge-node
ids: 32 characters in most examples, 24 hex in the node-search example) the store has
a switch (:class:`SandboxConfig`), and so do the endpoints the reference does not
document at all (``undocumented_endpoints``: "present", or "absent" = 404).

One module per part, each a mixin on :class:`~.core.StoreCore` (the state, ids and
request accounting): ``workspaces`` (members, secrets, usage, the booking-system
connection and the listings derived from it), ``tools`` (custom tools and their
runs), ``agents`` (skills, agents, test conversations), ``knowledge`` (nodes);
``records``, ``checks`` and ``paging`` are what they share.
"""

from __future__ import annotations

from pmsgate.clock import Clock, SystemClock
from pmsgate.sandbox.assistant import seed
from pmsgate.sandbox.assistant.store.agents import AgentsMixin
from pmsgate.sandbox.assistant.store.checks import choice
from pmsgate.sandbox.assistant.store.core import ID_FORMATS, UNDOCUMENTED_MODES
from pmsgate.sandbox.assistant.store.knowledge import KnowledgeMixin
from pmsgate.sandbox.assistant.store.paging import Page, paginate
from pmsgate.sandbox.assistant.store.records import (
    DEFAULT_REQUESTS_PER_MINUTE,
    DEFAULT_TOOL_TIMEOUT_S,
    Agent,
    AgentConversation,
    AgentToolCall,
    ApiToken,
    CustomTool,
    Faults,
    KbNode,
    KrossConnection,
    Listing,
    Member,
    SandboxConfig,
    Secret,
    Skill,
    Stats,
    ToolRun,
    Workspace,
    WorkspaceUsage,
)
from pmsgate.sandbox.assistant.store.tools import RUNTIMES
from pmsgate.sandbox.assistant.store.workspaces import (
    USD_PER_MESSAGE,
    USD_PER_TOOL_RUN,
    WorkspacesMixin,
)
from pmsgate.sandbox.kross.store import KrossStore

__all__ = [
    "RUNTIMES",
    "USD_PER_MESSAGE",
    "USD_PER_TOOL_RUN",
    "Agent",
    "AgentConversation",
    "AgentToolCall",
    "ApiToken",
    "AssistantStore",
    "CustomTool",
    "Faults",
    "KbNode",
    "KrossConnection",
    "Listing",
    "Member",
    "Page",
    "SandboxConfig",
    "Secret",
    "Skill",
    "Stats",
    "ToolRun",
    "Workspace",
    "WorkspaceUsage",
    "paginate",
]


class AssistantStore(WorkspacesMixin, AgentsMixin, KnowledgeMixin):
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
        self.clock = clock or SystemClock()
        self.kross = kross
        self._defaults = SandboxConfig(
            requests_per_minute,
            tool_timeout_s,
            choice("undocumented_endpoints", undocumented_endpoints, UNDOCUMENTED_MODES),
            choice("kb_node_id_format", kb_node_id_format, ID_FORMATS),
        )
        self.reset()

    def reset(self) -> None:
        """Back to the seed data: no extra tokens, workspaces, runs, faults or stats."""
        self._clear()
        self.add_token(
            seed.SANDBOX_ASSISTANT_TOKEN, name="sandbox account token", workspace_ids=None
        )
        existing = self.create_workspace(seed.EXISTING_WORKSPACE_NAME, seed.EXISTING_WORKSPACE_SLUG)
        self.create_tool(existing.id, **seed.EXISTING_TOOL)
        self.create_skill(existing.id, **seed.EXISTING_SKILL)
        # The seed's own calls are not traffic.
        self.stats = Stats()
