"""The services an onboarding run stands on, opened once per process.

:func:`open_onboarding` opens the customer services (database migrated, vault,
platform client), the knowledge sync on them and the onboarding repository, and
takes the process's gateway (:class:`~pmsgate.gateway.service.Gateway`: its limiter
and token manager carry every booking-system request of the onboarding, see
:mod:`pmsgate.onboarding.booking`) — the one given (``pmsgate serve`` and the demo
pass theirs), else one opened from the settings by the composition root
(:func:`pmsgate.app.open_services`). :meth:`OnboardingServices.context` makes the
:class:`~pmsgate.onboarding.steps.OnboardingContext` of one run. Every httpx client
comes from the one injected ``http_factory`` (real clients in production, the
emulators' ASGI app in tests and the demo).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio

from pmsgate.app import open_services
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
from pmsgate.gateway.service import Gateway
from pmsgate.knowledge.sync import KnowledgeSync
from pmsgate.onboarding.customer_file import CustomerFile
from pmsgate.onboarding.steps import OnboardingContext
from pmsgate.storage.knowledge import KnowledgeSyncRepository
from pmsgate.storage.onboarding import OnboardingRepository


@dataclass
class OnboardingServices:
    """Everything a run needs except the customer file: one per process."""

    settings: Settings
    clock: Clock
    customers: CustomerServices
    facilities: FacilityService
    gateway: Gateway
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
            gateway=self.gateway,
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
    gateway: Gateway | None = None,
) -> AsyncIterator[OnboardingServices]:
    """Onboarding services on the configured database and upstreams, and the gateway's."""
    clock = clock or SystemClock()
    factory = http_factory or default_http_factory
    async with AsyncExitStack() as stack:
        if gateway is None:
            kross_http = await stack.enter_async_context(factory())
            opened = open_services(settings, kross_http=kross_http, clock=clock)
            gateway = (await stack.enter_async_context(opened)).gateway
        customers = await stack.enter_async_context(
            open_customer_services(settings, clock=clock, http_factory=factory, sleep=sleep)
        )
        yield OnboardingServices(
            settings=settings,
            clock=clock,
            customers=customers,
            # The customers' facility service: same database, vault and clock.
            facilities=customers.facilities,
            gateway=gateway,
            knowledge=KnowledgeSync(
                customers,
                KnowledgeSyncRepository(customers.sessions, clock),
                clock=clock,
                sleep=sleep,
            ),
            repository=OnboardingRepository(customers.sessions, clock),
        )
