"""Skills, agents (guardrails, skills, triggers) and an agent's test conversations.

Test conversations are EMULATOR-ONLY: the real platform's API for them is not
public (docs/assistant-api.md); against the real platform they answer 404.
"""

from __future__ import annotations

from typing import Unpack

from pmsgate.integrations.assistant.models import (
    Agent,
    AgentConversation,
    AgentUpdate,
    NewAgent,
    NewSkill,
    Skill,
)
from pmsgate.integrations.assistant.transport import OnObject, Transport

SKILLS = "/v1/skills"
AGENTS = "/v1/agents"
CONVERSATIONS = "/v1/agents/{id}/test-conversations"


class AgentsMixin(Transport):
    """Skills and agents; an agent's test conversations (emulator-only)."""

    async def list_skills(self, workspace_id: str) -> list[Skill]:
        """Every skill of a workspace (all pages)."""
        return await self._in_workspace(Skill, SKILLS, workspace_id)

    async def create_skill(self, skill: NewSkill, *, idempotency_key: str | None = None) -> Skill:
        """Create a skill."""
        return await self._create(Skill, SKILLS, skill, idempotency_key)

    async def list_agents(self, workspace_id: str) -> list[Agent]:
        """Every agent of a workspace (all pages)."""
        return await self._in_workspace(Agent, AGENTS, workspace_id)

    async def create_agent(self, agent: NewAgent, *, idempotency_key: str | None = None) -> Agent:
        """Create an agent."""
        return await self._create(Agent, AGENTS, agent, idempotency_key)

    async def get_agent(self, agent_id: str, *, workspace_id: str | None = None) -> Agent:
        """One agent."""
        return await self._get_object(Agent, AGENTS, agent_id, workspace_id)

    async def update_agent(
        self, agent_id: str, changes: AgentUpdate, **on: Unpack[OnObject]
    ) -> Agent:
        """Change the fields set in ``changes``."""
        return await self._update_object(Agent, AGENTS, agent_id, changes, **on)

    async def run_test_conversation(
        self,
        agent_id: str,
        message: str,
        **on: Unpack[OnObject],
    ) -> AgentConversation:
        """Send one test message to an agent and get its reply and tool calls (emulator-only)."""
        # This project's assumption, served by the platform emulator only; against the real
        # platform it answers 404 (platform_endpoint_unavailable).
        scope, body = self._scope_of(agent_id, on.get("workspace_id")), {"message": message}
        return await self._ask(
            AgentConversation,
            f"POST {CONVERSATIONS}",
            agent_id,
            scope=scope,
            assumed=True,
            body=body,
            key=on.get("idempotency_key"),
        )

    async def list_test_conversations(
        self, agent_id: str, *, workspace_id: str | None = None
    ) -> list[AgentConversation]:
        """Every recorded test conversation of an agent, oldest first (emulator-only)."""
        scope = self._scope_of(agent_id, workspace_id)
        return await self._listed(
            AgentConversation, CONVERSATIONS, agent_id, scope=scope, assumed=True
        )
