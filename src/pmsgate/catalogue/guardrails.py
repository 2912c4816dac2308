"""The guest agent's standard guardrails (``guardrails.yaml``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

MIN_GUARDRAILS = 21  # docs/requirements.md R15.3
ESCALATION_LANGUAGE_ID = "escalation-language"  # docs/requirements.md R15.3


class Guardrail(BaseModel):
    """One rule of the guest agent: a title and the knowledge the model follows."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")
    title: str = Field(min_length=5, max_length=120)
    knowledge: str = Field(min_length=40)

    def assistant_body(self) -> dict[str, str]:
        """The ``{title, knowledge}`` the assistant platform stores (the id stays ours)."""
        return {"title": self.title, "knowledge": self.knowledge}


class GuardrailsFile(BaseModel):
    """The shape of ``guardrails.yaml``."""

    model_config = ConfigDict(extra="forbid")

    guardrails: list[Guardrail]

    @field_validator("guardrails")
    @classmethod
    def _spec_guardrails(cls, guardrails: list[Guardrail]) -> list[Guardrail]:
        if len(guardrails) < MIN_GUARDRAILS:
            raise ValueError(
                f"at least {MIN_GUARDRAILS} guardrails are required, found {len(guardrails)}"
            )
        ids = [g.id for g in guardrails]
        duplicated = sorted({i for i in ids if ids.count(i) > 1})
        if duplicated:
            raise ValueError(f"duplicate guardrail ids: {', '.join(duplicated)}")
        titles = [g.title.casefold() for g in guardrails]
        if len(set(titles)) != len(titles):
            raise ValueError("two guardrails have the same title")
        if ESCALATION_LANGUAGE_ID not in ids:
            raise ValueError(f"the guardrail {ESCALATION_LANGUAGE_ID!r} is required")
        escalation = next(g for g in guardrails if g.id == ESCALATION_LANGUAGE_ID)
        if "italian" not in escalation.knowledge.casefold():
            raise ValueError(f"the guardrail {ESCALATION_LANGUAGE_ID!r} must require Italian")
        return guardrails
