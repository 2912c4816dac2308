"""The runbook: the 17 steps of spec §4.3, in order, each imported from where it is declared.

This tuple is the only list of steps: the runner, the checklist, ``pmsgate onboard
confirm`` and the CLI's live view all read it. Each step is declared once, as a
:class:`~pmsgate.onboarding.steps.Step` next to its check and apply; a misspelt name
fails the import, and :func:`~pmsgate.onboarding.steps.runbook` refuses (at import) a
repeated id or a step out of its place. Adding a step: declare it in its module and
name it here, in its place (see docs/onboarding.md).
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
    steps_setup.PREREQUISITES,  # 1
    steps_setup.ALLOWLIST,  # 2
    steps_setup.WORKSPACE_CONFIGURATION,  # 3
    steps_setup.NOTES_INTEGRATION,  # 4
    steps_setup.WORKSPACE,  # 5
    steps_provisioning.CUSTOM_TOOLS,  # 6
    steps_provisioning.GUEST_AGENT,  # 7
    steps_setup.PLATFORM_ADMIN,  # 8
    steps_knowledge.ROUTE_CHOICE,  # 9
    steps_knowledge.LISTINGS_COUNT,  # 10
    steps_knowledge.APARTMENT_REGISTRY,  # 11
    steps_knowledge.KNOWLEDGE_DRY_RUN,  # 12
    steps_knowledge.TEMPLATES,  # 13
    steps_knowledge.KNOWLEDGE_COMMIT,  # 14
    steps_channels.CHANNELS,  # 15
    steps_channels.ONBOARDING_MESSAGE,  # 16
    steps_route_b.ROUTE_B_QUICK_SETUP,  # 17
)
