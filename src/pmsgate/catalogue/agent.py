"""The guest agent's configuration (``agent.yaml``), its platform body, and its check."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pmsgate.catalogue.guardrails import ESCALATION_LANGUAGE_ID, MIN_GUARDRAILS, Guardrail

# docs/requirements.md R15.2: the guest's own language. The escalation language (Italian)
# is a guardrail; setting it here would make the agent answer guests in Italian.
ORIGINAL_LANGUAGE = "Original"


class TriggerConfig(BaseModel):
    """Which inbox and channels start the agent."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    inboxTypeId: Literal["guest"]  # the platform's own field name
    channels: list[str] = Field(default_factory=list)


class Trigger(BaseModel):
    """What makes the agent run: guest inbox messages."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=3)
    type: Literal["message"]
    config: TriggerConfig
    enabled: bool = True


class AgentDefinition(BaseModel):
    """The guest agent as the catalogue defines it (docs/requirements.md R15.2)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=3, max_length=64)
    description: str = Field(min_length=20)
    instructions: str = Field(min_length=200)
    operation_mode: Literal["copilot"]
    enabled: Literal[True]
    response_language: Literal["Original"]
    triggers: list[Trigger] = Field(min_length=1)

    @field_validator("triggers")
    @classmethod
    def _guest_inbox(cls, triggers: list[Trigger]) -> list[Trigger]:
        if not any(t.enabled and t.config.inboxTypeId == "guest" for t in triggers):
            raise ValueError("the agent needs an enabled trigger on guest inbox messages")
        return triggers

    def assistant_body(
        self, workspace_id: str, skill_ids: Sequence[str], guardrails: Sequence[Guardrail]
    ) -> dict[str, Any]:
        """The assistant platform's ``POST /v1/agents`` body."""
        return {
            "workspace_id": workspace_id,
            "name": self.name,
            "description": self.description,
            "instructions": self.instructions,
            "guardrails": [g.assistant_body() for g in guardrails],
            "skill_ids": list(skill_ids),
            "operation_mode": self.operation_mode,
            "response_language": self.response_language,
            "triggers": [t.model_dump() for t in self.triggers],
            "enabled": self.enabled,
        }


def agent_problems(
    agent: Mapping[str, Any],
    guardrails: Sequence[Guardrail],
    required_skill_ids: Sequence[str] = (),
) -> list[str]:
    """What an agent record read from the platform lacks against docs/requirements.md R15.2."""
    problems: list[str] = []
    if agent.get("operation_mode") != "copilot":
        problems.append(f"operation_mode is {agent.get('operation_mode')!r}, not 'copilot'")
    if agent.get("enabled") is not True:
        problems.append("the agent is not enabled")
    if agent.get("response_language") != ORIGINAL_LANGUAGE:
        # Typically someone "fixed" the Italian escalations by changing the reply language.
        problems.append(
            f"response_language is {agent.get('response_language')!r}, not 'Original': the "
            "escalation language is set by the escalation-language guardrail, never here"
        )
    present = agent.get("guardrails") or []
    if len(present) < MIN_GUARDRAILS:
        problems.append(f"{len(present)} guardrails, at least {MIN_GUARDRAILS} required")
    escalation = next(g for g in guardrails if g.id == ESCALATION_LANGUAGE_ID)
    if not any(
        isinstance(g, Mapping) and g.get("knowledge") == escalation.knowledge for g in present
    ):
        problems.append(f"the {ESCALATION_LANGUAGE_ID!r} guardrail is missing or was changed")
    missing_skills = [s for s in required_skill_ids if s not in (agent.get("skill_ids") or [])]
    if missing_skills:
        problems.append(f"skills not attached: {', '.join(missing_skills)}")
    triggers = agent.get("triggers") or []
    if not any(
        isinstance(t, Mapping)
        and t.get("type") == "message"
        and t.get("enabled", True)
        and (t.get("config") or {}).get("inboxTypeId") == "guest"
        for t in triggers
    ):
        problems.append("no enabled trigger on guest inbox messages")
    return problems
