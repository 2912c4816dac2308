"""Reads a catalogue directory, validates it, lints it, and serves the packaged one.

A catalogue directory holds ``catalogue.yaml`` (the version), ``tools.yaml``,
``skills.yaml``, ``guardrails.yaml``, ``agent.yaml``, ``knowledge.yaml`` and the
custom-tool code template named in ``tools.yaml``. The packaged one is
``src/pmsgate/catalogue/``; ``pmsgate catalogue check --path DIR`` checks a copy.
Every problem of every file is collected before anything is refused, so one
check lists them all.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pmsgate.catalogue.agent import AgentDefinition, agent_problems
from pmsgate.catalogue.guardrails import ESCALATION_LANGUAGE_ID, Guardrail, GuardrailsFile
from pmsgate.catalogue.knowledge_template import KnowledgeTemplate
from pmsgate.catalogue.lint import LintKind, LintProblem, lint_catalogue
from pmsgate.catalogue.skills import CustomerProfile, SkillDefinition, SkillsFile
from pmsgate.catalogue.tools import CustomToolRuntime, ToolDefinition, ToolsFile
from pmsgate.errors import PmsgateError

FILES = (
    "catalogue.yaml",
    "tools.yaml",
    "skills.yaml",
    "guardrails.yaml",
    "agent.yaml",
    "knowledge.yaml",
)

_Model = TypeVar("_Model", bound=BaseModel)


class CatalogueError(PmsgateError):
    """The catalogue is invalid or carries personal data; nothing is provisioned from it."""

    code = "catalogue_invalid"
    status = 500
    hint = "Run `pmsgate catalogue check` and fix every problem it lists."

    def __init__(self, problems: Sequence[LintProblem]) -> None:
        self.problems = list(problems)
        listed = "; ".join(f"{p.where} [{p.kind}] {p.excerpt}" for p in self.problems[:10])
        more = f" (and {len(self.problems) - 10} more)" if len(self.problems) > 10 else ""
        super().__init__(f"The catalogue has {len(self.problems)} problem(s): {listed}{more}")


class Manifest(BaseModel):
    """The shape of ``catalogue.yaml``."""

    model_config = ConfigDict(extra="forbid")

    version: str = Field(pattern=r"^[0-9A-Za-z][0-9A-Za-z.\-]*$")


class Catalogue(BaseModel):
    """Everything a customer's workspace is provisioned from, validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str
    digest: str
    tools: dict[str, ToolDefinition]
    skills: dict[str, SkillDefinition]
    guardrails: list[Guardrail]
    agent: AgentDefinition
    knowledge: KnowledgeTemplate

    @property
    def escalation_guardrail(self) -> Guardrail:
        """The escalation-language guardrail (docs/requirements.md R15.3)."""
        return next(g for g in self.guardrails if g.id == ESCALATION_LANGUAGE_ID)

    def skills_for(self, profile: CustomerProfile | Mapping[str, bool]) -> list[SkillDefinition]:
        """The skills to attach for a customer: the standard ones and any its profile calls for."""
        if not isinstance(profile, CustomerProfile):
            profile = CustomerProfile.model_validate(profile)
        return [s for s in self.skills.values() if s.applies_to(profile)]

    def agent_body(self, workspace_id: str, skill_ids: Sequence[str]) -> dict[str, Any]:
        """The ``POST /v1/agents`` body: the agent with every guardrail and these skills."""
        return self.agent.assistant_body(workspace_id, skill_ids, self.guardrails)

    def agent_problems(
        self, agent: Mapping[str, Any], required_skill_ids: Sequence[str] = ()
    ) -> list[str]:
        """What an agent read from the platform lacks against docs/requirements.md R15.2."""
        return agent_problems(agent, self.guardrails, required_skill_ids)

    def counts(self) -> str:
        """The counts docs/requirements.md R15 and R16 fix, in one phrase."""
        return (
            f"{len(self.tools)} tools, {len(self.skills)} skills, "
            f"{len(self.guardrails)} guardrails, {len(self.knowledge.sections)} sections, "
            f"{len(self.knowledge.blocks)} blocks"
        )


@dataclass(frozen=True)
class CatalogueReport:
    """The outcome of checking a catalogue directory: the catalogue if valid, every problem."""

    catalogue: Catalogue | None
    problems: list[LintProblem]

    @property
    def ok(self) -> bool:
        """True when the catalogue loaded and the lint found nothing."""
        return self.catalogue is not None and not self.problems


def _kind_of(error: Mapping[str, Any]) -> LintKind:
    loc = error.get("loc") or ()
    if loc and loc[-1] == "description" and "parameters" in loc:
        return "missing_description"
    return "invalid"


def _validate(
    model: type[_Model], raw: Any, file: str, problems: list[LintProblem]
) -> _Model | None:
    try:
        return model.model_validate(raw)
    except ValidationError as error:
        for item in error.errors():
            loc = ".".join(str(part) for part in item["loc"])
            problems.append(
                LintProblem(
                    f"{file}: {loc}" if loc else file, _kind_of(dict(item)), str(item["msg"])
                )
            )
        return None


def _read(directory: Traversable, name: str, problems: list[LintProblem]) -> str | None:
    entry = directory.joinpath(name)
    if not entry.is_file():
        problems.append(LintProblem(name, "invalid", f"missing file {name}"))
        return None
    return entry.read_text("utf-8")


def _parse(text: str | None, file: str, problems: list[LintProblem]) -> Any:
    if text is None:
        return None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        problems.append(LintProblem(file, "invalid", f"not valid YAML: {error}"))
        return None
    if not isinstance(raw, dict):
        problems.append(LintProblem(file, "invalid", "the file must hold a mapping"))
        return None
    return raw


def inspect_catalogue(path: Path | Traversable | None = None) -> CatalogueReport:
    """Validate and lint a catalogue directory (the packaged one by default); never raises."""
    directory: Traversable = resources.files("pmsgate.catalogue") if path is None else path
    problems: list[LintProblem] = []
    texts = {name: _read(directory, name, problems) for name in FILES}
    raw = {name: _parse(text, name, problems) for name, text in texts.items()}

    manifest = _validate(Manifest, raw["catalogue.yaml"], "catalogue.yaml", problems)
    tools = _validate(ToolsFile, raw["tools.yaml"], "tools.yaml", problems)
    skills = _validate(SkillsFile, raw["skills.yaml"], "skills.yaml", problems)
    guardrails = _validate(GuardrailsFile, raw["guardrails.yaml"], "guardrails.yaml", problems)
    agent = _validate(AgentDefinition, raw["agent.yaml"], "agent.yaml", problems)
    knowledge = _validate(KnowledgeTemplate, raw["knowledge.yaml"], "knowledge.yaml", problems)

    runtime: CustomToolRuntime | None = None
    if tools is not None:
        template = tools.custom_tool.template
        source = _read(directory, template, problems)
        texts[template] = source
        if source is not None:
            runtime = _validate(
                CustomToolRuntime,
                {"settings": tools.custom_tool, "template_source": source},
                template,
                problems,
            )
    if tools is not None and skills is not None:
        for name, skill in skills.skills.items():
            unknown = [t for t in skill.allowed_tools if t not in tools.tools]
            if unknown:
                problems.append(
                    LintProblem(
                        f"skills.yaml: skills.{name}.allowed_tools",
                        "invalid",
                        f"not tools of the catalogue: {', '.join(unknown)}",
                    )
                )
    if (
        problems
        or manifest is None
        or tools is None
        or runtime is None
        or skills is None
        or guardrails is None
        or agent is None
        or knowledge is None
    ):
        return CatalogueReport(None, problems)

    digest = hashlib.sha256()
    for name in sorted(texts):
        digest.update(name.encode() + b"\0" + (texts[name] or "").encode() + b"\0")
    bound = {
        name: tool.model_copy(update={"custom_tool": runtime}) for name, tool in tools.tools.items()
    }
    for name, tool in bound.items():
        try:
            compile(tool.custom_tool_code(), f"{name}.py", "exec")
        except SyntaxError as error:  # a template that only breaks once rendered
            problems.append(LintProblem(f"tools.yaml: tools.{name}", "invalid", str(error)))
    catalogue = Catalogue(
        version=manifest.version,
        digest=digest.hexdigest()[:16],
        tools=bound,
        skills=skills.skills,
        guardrails=guardrails.guardrails,
        agent=agent,
        knowledge=knowledge,
    )
    return CatalogueReport(catalogue, problems + lint_catalogue(catalogue))


def read_catalogue(path: Path | Traversable | None = None) -> Catalogue:
    """The catalogue of a directory (the packaged one by default), or a CatalogueError."""
    report = inspect_catalogue(path)
    if not report.ok or report.catalogue is None:
        raise CatalogueError(report.problems)
    return report.catalogue


@lru_cache(maxsize=1)
def load_catalogue() -> Catalogue:
    """The packaged catalogue, validated and linted once per process."""
    return read_catalogue()


def load_tools() -> dict[str, ToolDefinition]:
    """The tools of the packaged catalogue, by name (checked and linted, cached)."""
    return load_catalogue().tools


def skills_for(
    profile: CustomerProfile | Mapping[str, bool], catalogue: Catalogue | None = None
) -> list[SkillDefinition]:
    """The skills to attach for a customer (the packaged catalogue unless one is given)."""
    return (catalogue or load_catalogue()).skills_for(profile)
