"""The runbook: the 17 steps (docs/requirements.md R21) in order, each from where it is declared.

This tuple is the only list of steps: the runner, the checklist, ``pmsgate onboard
confirm`` and the CLI's live view all read it. Each step is declared once, as a
:class:`~pmsgate.onboarding.steps.Step` next to its check and apply; a misspelt name
fails the import, and :func:`~pmsgate.onboarding.steps.runbook` orders them by their
``number`` (written once, at the step's declaration) and refuses (at import) a repeated
id, a number used twice or a gap. Adding a step: declare it with its number in its module
and name it here (see docs/onboarding.md).
"""

from __future__ import annotations

from pmsgate.onboarding import (
    steps_channels,
    steps_knowledge,
    steps_provisioning,
    steps_route_b,
    steps_setup,
)
from pmsgate.onboarding.steps import Step, runbook

STEPS: tuple[Step, ...] = runbook(
    steps_setup.PREREQUISITES,
    steps_setup.ALLOWLIST,
    steps_setup.WORKSPACE_CONFIGURATION,
    steps_setup.NOTION_INTEGRATION,
    steps_setup.WORKSPACE,
    steps_provisioning.CUSTOM_TOOLS,
    steps_provisioning.GUEST_AGENT,
    steps_setup.PLATFORM_ADMIN,
    steps_knowledge.ROUTE_CHOICE,
    steps_knowledge.LISTINGS_COUNT,
    steps_knowledge.APARTMENT_REGISTRY,
    steps_knowledge.KNOWLEDGE_DRY_RUN,
    steps_knowledge.TEMPLATES,
    steps_knowledge.KNOWLEDGE_COMMIT,
    steps_channels.CHANNELS,
    steps_channels.ONBOARDING_MESSAGE,
    steps_route_b.ROUTE_B_QUICK_SETUP,
)
