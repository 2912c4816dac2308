"""The assistant platform's ``/v1`` API client: typed resources, its own throttle, safe retries.

Wire contract: ``docs/assistant-api.md`` (the public reference's shapes, plus this
project's written-down assumptions, all listed in its section "Assumed endpoints").

- **Envelopes.** The reference wraps every single object as ``{"data": {...}}`` and
  every list as ``{"data": [...], "next_cursor", "has_more"}``. The client reads
  both, and also a bare object (``transport._unwrap``): tolerance that costs nothing, so a
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
  :class:`~pmsgate.integrations.assistant.errors.AssistantWriteOutcomeUnknown`. **Worst case:** a
  replay-safe request is attempted ``max_attempts`` times (default 4) within the
  policy's deadline; a write without a key exactly once; a ``list_*`` call makes
  that many attempts *per page*. A ``Retry-After`` longer than ``max_retry_after_s``
  (60 s) is not waited: the failure goes back to the caller at once.
- **Assumed endpoints.** When an endpoint the public reference does not document
  answers 403/404/405/501, the client raises
  :class:`~pmsgate.integrations.assistant.errors.AssistantEndpointUnavailable`, which onboarding
  turns into a person's task.
- **Secrets.** The bearer token and secret values are never logged, never in a
  ``repr`` and are scrubbed from every error message (:class:`~pmsgate.integrations.kit.Scrubber`).

The client is composed of one part per resource (each a mixin on
:class:`~pmsgate.integrations.assistant.transport.Transport`, which sends one
request): ``workspaces.py`` (workspaces, usage, members, roles, secrets),
``listings.py`` (listings and the PMS connection), ``tools.py`` (custom tools and
their runtimes), ``agents.py`` (skills, agents, test conversations) and
``knowledge.py`` (knowledge nodes); the wire models are in ``models.py``.
"""

from __future__ import annotations

import anyio
import httpx

from pmsgate.clock import Clock, Sleep
from pmsgate.config import Settings
from pmsgate.integrations.assistant.agents import AgentsMixin
from pmsgate.integrations.assistant.knowledge import KnowledgeMixin
from pmsgate.integrations.assistant.listings import ListingsMixin
from pmsgate.integrations.assistant.models import (
    Agent,
    AgentConversation,
    AgentToolCall,
    AgentUpdate,
    CustomTool,
    CustomToolRuntime,
    CustomToolUpdate,
    Guardrail,
    KbNode,
    KbNodeUpdate,
    KrossConnection,
    Listing,
    Member,
    NewAgent,
    NewCustomTool,
    NewKbNode,
    NewSkill,
    OperationMode,
    Page,
    Role,
    SecretInfo,
    Skill,
    ToolOutput,
    ToolParameter,
    ToolRunResult,
    Trigger,
    TriggerConfig,
    Workspace,
    WorkspaceUsage,
)
from pmsgate.integrations.assistant.tools import ToolsMixin
from pmsgate.integrations.assistant.transport import (
    ACCOUNT_SCOPE,
    DEFAULT_REQUESTS_PER_MINUTE,
    PAGE_SIZE_MAX,
    WorkspaceThrottle,
)
from pmsgate.integrations.assistant.workspaces import WorkspacesMixin

__all__ = [
    "ACCOUNT_SCOPE",
    "DEFAULT_REQUESTS_PER_MINUTE",
    "PAGE_SIZE_MAX",
    "Agent",
    "AgentConversation",
    "AgentToolCall",
    "AgentUpdate",
    "AssistantClient",
    "CustomTool",
    "CustomToolRuntime",
    "CustomToolUpdate",
    "Guardrail",
    "KbNode",
    "KbNodeUpdate",
    "KrossConnection",
    "Listing",
    "Member",
    "NewAgent",
    "NewCustomTool",
    "NewKbNode",
    "NewSkill",
    "OperationMode",
    "Page",
    "Role",
    "SecretInfo",
    "Skill",
    "ToolOutput",
    "ToolParameter",
    "ToolRunResult",
    "Trigger",
    "TriggerConfig",
    "Workspace",
    "WorkspaceThrottle",
    "WorkspaceUsage",
]


class AssistantClient(WorkspacesMixin, ListingsMixin, ToolsMixin, AgentsMixin, KnowledgeMixin):
    """Speaks the assistant platform's ``/v1`` API over the given ``httpx.AsyncClient``."""

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
        """A client configured from PMSGATE_ASSISTANT_API_URL and PMSGATE_ASSISTANT_API_TOKEN."""
        if settings.assistant_api_token is None:
            raise ValueError("PMSGATE_ASSISTANT_API_TOKEN is not set")
        return cls(
            http,
            base_url=settings.assistant_api_url,
            token=settings.assistant_api_token,
            clock=clock,
            sleep=sleep,
        )
