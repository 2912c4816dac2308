"""Skills, agents with their guardrails and triggers, and the agent's test conversations.

The test conversation is the emulator's own (the real platform's API for it is not
public, docs/assistant-api.md): a minimal deterministic "agent" that recognises one
intent, availability between two ISO dates, and calls the workspace's
``check-availability`` tool when the agent may use it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any

from pmsgate.sandbox.assistant import errors
from pmsgate.sandbox.assistant.errors import AssistantApiError
from pmsgate.sandbox.assistant.store.checks import (
    MAX_BODY,
    check_guardrails,
    check_name,
    check_operation_mode,
    check_triggers,
    required_text,
)
from pmsgate.sandbox.assistant.store.core import FieldCheck, as_given, found_on, listed_on
from pmsgate.sandbox.assistant.store.records import (
    Agent,
    AgentConversation,
    AgentToolCall,
    CustomTool,
    Skill,
    Tenant,
)
from pmsgate.sandbox.assistant.store.tools import MAX_DESCRIPTION, ToolsMixin

MAX_AGENT_NAME = 200
MAX_RESPONSE_LANGUAGE = 64


def _skills(tenant: Tenant) -> dict[str, Skill]:
    return tenant.skills


def _agents(tenant: Tenant) -> dict[str, Agent]:
    return tenant.agents


def _kebab(value: Any) -> str:
    return check_name("name", value)


def _agent_name(value: Any) -> str:
    return required_text("name", value, MAX_AGENT_NAME)


class AgentsMixin(ToolsMixin):
    """Skills and agents; an agent's test conversation may run the workspace's tools."""

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
        self._unique_name(tenant.skills, "a skill", _kebab)(name)
        skill = Skill(
            **self._fresh(workspace_id),
            name=name,
            display_name=required_text("display_name", display_name, 200),
            description=required_text("description", description, MAX_DESCRIPTION),
            body=required_text("body", body, MAX_BODY),
            allowed_tools=list(allowed_tools),
            tags=list(tags),
            enabled=enabled,
        )
        return self._keep(tenant.skills, skill)

    skills = listed_on(_skills)
    skill = found_on(_skills, "skill")

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
        name = self._unique_name(tenant.agents, "an agent", _agent_name)(name)
        agent = Agent(
            **self._fresh(workspace_id),
            name=name,
            description=description,
            instructions=instructions,
            guardrails=check_guardrails(guardrails),
            skill_ids=_check_skill_ids(tenant, skill_ids),
            operation_mode=check_operation_mode(operation_mode),
            response_language=required_text(
                "response_language", response_language, MAX_RESPONSE_LANGUAGE
            ),
            triggers=check_triggers(triggers),
            enabled=enabled,
        )
        return self._keep(tenant.agents, agent)

    agents = listed_on(_agents)
    agent = found_on(_agents, "agent")

    def update_agent(self, agent_id: str, changes: Mapping[str, Any]) -> Agent:
        """Change some fields of an agent; the same validation as on creation."""
        agent = self.agent(agent_id)
        tenant = self._tenant(agent.workspace_id)
        checks: dict[str, FieldCheck] = {
            "name": self._unique_name(tenant.agents, "an agent", _agent_name, renamed=agent_id),
            "guardrails": check_guardrails,
            "skill_ids": lambda v: _check_skill_ids(tenant, v),
            "operation_mode": check_operation_mode,
            "response_language": lambda v: required_text(
                "response_language", v, MAX_RESPONSE_LANGUAGE
            ),
            "triggers": check_triggers,
            "description": as_given,
            "instructions": as_given,
            "enabled": as_given,
        }
        self._apply(agent, self._checked(changes, checks))
        return agent

    # --- test conversations (emulator-only) -------------------------------------------------

    async def run_test_conversation(self, agent_id: str, message: str) -> AgentConversation:
        """Play one guest message to a minimal deterministic "agent" that may call a tool.

        The "agent" calls the workspace's ``check-availability`` tool when the agent may
        use it (enabled globally, or allowed by one of its enabled skills) and records
        every tool call. Each tool call counts against the workspace's request budget.
        """
        agent = self.agent(agent_id)
        tenant = self._tenant(agent.workspace_id)
        text = required_text("message", message, MAX_MESSAGE)
        if not agent.enabled:
            raise AssistantApiError(errors.CONFLICT, "the agent is disabled")
        calls: list[AgentToolCall] = []
        stay = _availability_request(text)
        if stay is None:
            reply = (
                "I can help with availability: tell me the arrival and departure dates "
                "(YYYY-MM-DD)."
            )
        else:
            reply = await self._check_availability(tenant, agent, stay, calls)
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

    async def _check_availability(
        self, tenant: Tenant, agent: Agent, stay: tuple[str, str], calls: list[AgentToolCall]
    ) -> str:
        """The reply to an availability question; the tool call made is added to ``calls``."""
        arrival, departure = stay
        tool = _agent_tool(tenant, agent, AVAILABILITY_TOOL)
        arguments = _stay_arguments(tool.parameters, stay) if tool is not None else None
        if tool is None or arguments is None:
            return (
                f"I cannot check availability from {arrival} to {departure}: no "
                f"{AVAILABILITY_TOOL} tool is available to this agent. An operator will "
                "answer."
            )
        self.admit(tenant.workspace.id, f"AGENT tool call {tool.name}")
        try:
            run = await self.run_tool(tool.id, arguments)
            call = AgentToolCall(tool.name, arguments, run.success, run.message)
        except AssistantApiError as refused:
            call = AgentToolCall(tool.name, arguments, False, refused.message)
        calls.append(call)
        if call.success:
            return f"I checked availability from {arrival} to {departure}: {call.message}"
        return (
            f"I could not check availability right now ({call.message}); an operator will confirm."
        )

    def test_conversations(
        self, workspace_id: str, agent_id: str | None = None
    ) -> list[AgentConversation]:
        """The recorded test conversations of a workspace (of one agent when given)."""
        return [
            c
            for c in self._tenant(workspace_id).conversations
            if agent_id is None or c.agent_id == agent_id
        ]


def _check_skill_ids(tenant: Tenant, skill_ids: Sequence[str]) -> list[str]:
    unknown = [s for s in skill_ids if s not in tenant.skills]
    if unknown:
        raise AssistantApiError(
            errors.VALIDATION, f"skill_ids: unknown skill {unknown[0]} in this workspace"
        )
    return list(dict.fromkeys(skill_ids))


def _agent_tool(tenant: Tenant, agent: Agent, name: str) -> CustomTool | None:
    """The workspace tool ``name`` if the agent may use it (global, or via a skill)."""
    allowed = {
        tool_name
        for skill_id in agent.skill_ids
        if (skill := tenant.skills.get(skill_id)) is not None and skill.enabled
        for tool_name in skill.allowed_tools
    }
    usable = (t for t in tenant.tools.values() if t.enable_globally or t.name in allowed)
    return next((t for t in usable if t.name == name), None)


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
