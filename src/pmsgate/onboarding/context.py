"""The services an onboarding run stands on, opened once per process.

:func:`open_onboarding` opens the customer services (database migrated, vault,
platform client), a booking-system client and the knowledge sync on them, and the
onboarding repository; :meth:`OnboardingServices.context` makes the
:class:`~pmsgate.onboarding.steps.OnboardingContext` of one run. Every httpx client
comes from the one injected ``http_factory`` (real clients in production, the
emulators' ASGI app in tests and the demo).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio

from pmsgate.clock import Clock, SystemClock
from pmsgate.config import Settings
from pmsgate.customers.context import (
    CustomerServices,
    HttpFactory,
    Sleep,
    default_http_factory,
    open_customer_services,
)
from pmsgate.gateway.facilities import FacilityService
from pmsgate.knowledge.sync import KnowledgeSync
from pmsgate.onboarding.customer_file import CustomerFile
from pmsgate.onboarding.steps import OnboardingContext
from pmsgate.pms.client import PmsClient
from pmsgate.storage.knowledge import KnowledgeSyncRepository
from pmsgate.storage.onboarding import OnboardingRepository


@dataclass
class OnboardingServices:
    """Everything a run needs except the customer file: one per process."""

    settings: Settings
    clock: Clock
    customers: CustomerServices
    facilities: FacilityService
    pms: PmsClient
    knowledge: KnowledgeSync
    repository: OnboardingRepository

    def context(
        self,
        file: CustomerFile,
        *,
        dry_run: bool = False,
        run_id: str | None = None,
        manual_evidence: dict[str, dict[str, Any]] | None = None,
        previous: dict[str, dict[str, Any]] | None = None,
    ) -> OnboardingContext:
        """The context of one run for the customer of ``file``."""
        return OnboardingContext(
            file=file,
            customers=self.customers,
            facilities=self.facilities,
            pms=self.pms,
            knowledge=self.knowledge,
            settings=self.settings,
            clock=self.clock,
            dry_run=dry_run,
            run_id=run_id,
            manual_evidence=manual_evidence,
            previous=previous,
        )


@asynccontextmanager
async def open_onboarding(
    settings: Settings,
    *,
    clock: Clock | None = None,
    http_factory: HttpFactory | None = None,
    sleep: Sleep = anyio.sleep,
) -> AsyncIterator[OnboardingServices]:
    """Onboarding services on the configured database and upstreams."""
    clock = clock or SystemClock()
    factory = http_factory or default_http_factory
    async with open_customer_services(
        settings, clock=clock, http_factory=factory, sleep=sleep
    ) as customers:
        pms_http = factory()
        try:
            yield OnboardingServices(
                settings=settings,
                clock=clock,
                customers=customers,
                # The customers' facility service: same database, vault and clock.
                facilities=customers.facilities,
                pms=PmsClient.from_settings(settings, pms_http, clock),
                knowledge=KnowledgeSync(
                    customers,
                    KnowledgeSyncRepository(customers.sessions, clock),
                    clock=clock,
                    sleep=sleep,
                ),
                repository=OnboardingRepository(customers.sessions, clock),
            )
        finally:
            await pms_http.aclose()
