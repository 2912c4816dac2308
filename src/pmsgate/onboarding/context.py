"""The services an onboarding run stands on: ``container.onboarding``, one per process.

:class:`OnboardingServices` is built by :func:`pmsgate.container.open_container` from
the process's customer services, knowledge sync and gateway
(:class:`~pmsgate.gateway.service.Gateway`: its limiter and token manager carry every
booking-system request of the onboarding, see :mod:`pmsgate.onboarding.booking`); it is
never opened on its own. :meth:`OnboardingServices.context` makes the
:class:`~pmsgate.onboarding.steps.OnboardingContext` of one run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pmsgate.audit.trail import AuditTrail
from pmsgate.clock import Clock
from pmsgate.config import Settings
from pmsgate.customers.context import CustomerServices
from pmsgate.gateway.facility_service import FacilityService
from pmsgate.gateway.service import Gateway
from pmsgate.knowledge.sync import KnowledgeSync
from pmsgate.onboarding.accounts import ConsoleAccounts
from pmsgate.onboarding.customer_file import CustomerFile
from pmsgate.onboarding.records import OnboardingRecords
from pmsgate.onboarding.registry import STEPS
from pmsgate.onboarding.steps import OnboardingContext

# The services a run's context takes from the process's, as they are.
_SHARED_WITH_CONTEXT = (
    "customers",
    "facilities",
    "gateway",
    "knowledge",
    "settings",
    "clock",
    "accounts",
)


@dataclass(frozen=True)
class OnboardingServices:
    """Everything a run needs except the customer file: one per process."""

    settings: Settings
    clock: Clock
    customers: CustomerServices
    facilities: FacilityService
    gateway: Gateway
    knowledge: KnowledgeSync
    repository: OnboardingRecords
    # Where each step's side effects are recorded (onboarding.side_effect); None: nowhere.
    audit: AuditTrail | None = None
    # The customers' console accounts (step 16 creates and invites one); None: not checked.
    accounts: ConsoleAccounts | None = None

    def context(
        self,
        file: CustomerFile,
        *,
        dry_run: bool = False,
        run_id: str | None = None,
        manual_evidence: dict[str, dict[str, Any]] | None = None,
        previous: dict[str, dict[str, Any]] | None = None,
    ) -> OnboardingContext:
        """The context of one run for the customer of ``file``, taking the whole runbook (the
        runner puts the steps of its run in ``ctx.run.steps``)."""
        shared = {name: getattr(self, name) for name in _SHARED_WITH_CONTEXT}
        run: dict[str, Any] = {
            "dry_run": dry_run,
            "run_id": run_id,
            "manual_evidence": manual_evidence,
            "previous": previous,
        }
        ctx = OnboardingContext(file=file, **shared, **run)
        ctx.run.steps = STEPS
        return ctx
