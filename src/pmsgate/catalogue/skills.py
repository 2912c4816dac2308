"""The guest agent's skills (``skills.yaml``) and the rule that attaches each to a customer."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from pmsgate.catalogue.keyed import names_from_keys

# docs/requirements.md R15.4, R15.5: the three minimum skills, the same for every customer,
# and the optional one.
STANDARD_SKILL_NAMES = (
    "booking-extension-assistant",
    "check-in-access-manager",
    "reservation-status-verification-procedure",
)
PAYMENT_SKILL_NAME = "payment-link-generator"


class CustomerProfile(BaseModel):
    """What onboarding knows about how a customer works; decides the optional skills."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    upsell_autonomous: bool = False
    late_checkin_autonomous: bool = False


# A condition holds when every flag it names has the given value in the profile.
Condition = dict[str, bool]


class SkillDefinition(BaseModel):
    """One skill: what the platform stores, and when it is attached."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$", max_length=64)
    display_name: str = Field(min_length=3, max_length=80)
    description: str = Field(min_length=20)
    body: str = Field(min_length=200)
    allowed_tools: list[str] = Field(min_length=1)
    tags: list[str] = Field(default_factory=list)
    enabled: bool = True
    # "always", or a list of conditions of which any one attaches the skill.
    attach_when: Literal["always"] | list[Condition] = Field(min_length=1)

    @field_validator("attach_when")
    @classmethod
    def _known_flags(cls, value: Literal["always"] | list[Condition]) -> Any:
        if value == "always":
            return value
        for condition in value:
            unknown = set(condition) - set(CustomerProfile.model_fields)
            if not condition or unknown:
                raise ValueError(
                    f"a condition names profile flags {sorted(condition)}; known flags: "
                    f"{', '.join(CustomerProfile.model_fields)}"
                )
        return value

    @property
    def standard(self) -> bool:
        """True for a skill every customer gets."""
        return self.attach_when == "always"

    def applies_to(self, profile: CustomerProfile) -> bool:
        """Whether this skill is attached for a customer with this profile."""
        if self.attach_when == "always":
            return True
        return any(
            all(getattr(profile, flag) == wanted for flag, wanted in condition.items())
            for condition in self.attach_when
        )

    def assistant_body(self, workspace_id: str) -> dict[str, Any]:
        """The assistant platform's ``POST /v1/skills`` body for this skill."""
        return {
            "workspace_id": workspace_id,
            "name": self.name,
            "display_name": self.display_name,
            "description": self.description,
            "body": self.body,
            "allowed_tools": list(self.allowed_tools),
            "tags": list(self.tags),
            "enabled": self.enabled,
        }


class SkillsFile(BaseModel):
    """The shape of ``skills.yaml``."""

    model_config = ConfigDict(extra="forbid")

    skills: dict[str, SkillDefinition]

    @model_validator(mode="before")
    @classmethod
    def _names_from_keys(cls, raw: Any) -> Any:
        return names_from_keys(raw, "skills")

    @field_validator("skills")
    @classmethod
    def _spec_skills(cls, skills: dict[str, SkillDefinition]) -> dict[str, SkillDefinition]:
        missing = [n for n in (*STANDARD_SKILL_NAMES, PAYMENT_SKILL_NAME) if n not in skills]
        if missing:
            raise ValueError(f"standard skills missing: {', '.join(missing)}")
        not_always = [n for n in STANDARD_SKILL_NAMES if not skills[n].standard]
        if not_always:
            raise ValueError(f"standard skills must be attached always: {', '.join(not_always)}")
        if skills[PAYMENT_SKILL_NAME].standard:
            raise ValueError(
                f"{PAYMENT_SKILL_NAME} is attached only for customers who handle upsell or "
                "late check-in autonomously, not always"
            )
        return skills
