"""Versioned data every customer is provisioned from: tools, skills, guardrails, templates.

The data is the YAML in this directory (plus the custom-tool code template);
:func:`load_catalogue` reads, validates and lints it once per process. See
``catalogue.yaml`` for how to change it and ``pmsgate catalogue check`` to check it.
"""

from pmsgate.catalogue.agent import AgentDefinition, Trigger, agent_problems
from pmsgate.catalogue.guardrails import ESCALATION_LANGUAGE_ID, MIN_GUARDRAILS, Guardrail
from pmsgate.catalogue.knowledge_template import (
    BLOCK_COUNT,
    SECTION_COUNT,
    Block,
    KnowledgeTemplate,
    Section,
    normalise_title,
)
from pmsgate.catalogue.lint import LintProblem, LintRules, lint_catalogue, lint_text
from pmsgate.catalogue.loader import (
    Catalogue,
    CatalogueError,
    CatalogueReport,
    inspect_catalogue,
    load_catalogue,
    load_tools,
    read_catalogue,
    skills_for,
)
from pmsgate.catalogue.skills import (
    PAYMENT_SKILL_NAME,
    STANDARD_SKILL_NAMES,
    CustomerProfile,
    SkillDefinition,
)
from pmsgate.catalogue.tools import SPEC_TOOL_NAMES, ToolDefinition, ToolParameter

__all__ = [
    "BLOCK_COUNT",
    "ESCALATION_LANGUAGE_ID",
    "MIN_GUARDRAILS",
    "PAYMENT_SKILL_NAME",
    "SECTION_COUNT",
    "SPEC_TOOL_NAMES",
    "STANDARD_SKILL_NAMES",
    "AgentDefinition",
    "Block",
    "Catalogue",
    "CatalogueError",
    "CatalogueReport",
    "CustomerProfile",
    "Guardrail",
    "KnowledgeTemplate",
    "LintProblem",
    "LintRules",
    "Section",
    "SkillDefinition",
    "ToolDefinition",
    "ToolParameter",
    "Trigger",
    "agent_problems",
    "inspect_catalogue",
    "lint_catalogue",
    "lint_text",
    "load_catalogue",
    "load_tools",
    "normalise_title",
    "read_catalogue",
    "skills_for",
]
