"""What the web application runs on, built once per process next to the gateway's services.

:func:`open_web_services` takes the gateway's :class:`~pmsgate.app.Services` (the same
database, vault, booking-system client, token manager and cache) and adds the customer
services (platform and notes clients), the knowledge-sync jobs of this process and the
accounts. Tests and the demo pass an ``http_factory`` whose clients reach the emulators.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import anyio

from pmsgate.app import Services
from pmsgate.clock import Clock
from pmsgate.config import Settings
from pmsgate.customers.context import CustomerServices, HttpFactory, Sleep, open_customer_services
from pmsgate.knowledge.jobs import SyncJobs
from pmsgate.knowledge.sync import KnowledgeSync
from pmsgate.storage.db import session_factory
from pmsgate.storage.knowledge import KnowledgeSyncRepository
from pmsgate.web.users import UserService


@dataclass
class WebServices:
    """Everything the web app's routes use (``request.app.state.web``)."""

    gateway: Services
    customers: CustomerServices
    sync_jobs: SyncJobs
    users: UserService

    @property
    def settings(self) -> Settings:
        """The process settings."""
        return self.gateway.settings

    @property
    def clock(self) -> Clock:
        """The process clock."""
        return self.gateway.clock


@asynccontextmanager
async def open_web_services(
    gateway: Services,
    *,
    http_factory: HttpFactory | None = None,
    sleep: Sleep = anyio.sleep,
) -> AsyncIterator[WebServices]:
    """Customer services, sync jobs and accounts on the gateway's database and clock."""
    settings, clock = gateway.settings, gateway.clock
    async with AsyncExitStack() as stack:
        customers = await stack.enter_async_context(
            open_customer_services(settings, clock=clock, http_factory=http_factory, sleep=sleep)
        )
        repo = KnowledgeSyncRepository(customers.sessions, clock)
        sync = KnowledgeSync(customers, repo, clock=clock, sleep=sleep)
        jobs = await stack.enter_async_context(SyncJobs(sync, repo, clock=clock))
        users = UserService(
            session_factory(gateway.engine),
            clock=clock,
            settings=settings,
            redis=gateway.redis,
            health=gateway.redis_health,
        )
        yield WebServices(gateway=gateway, customers=customers, sync_jobs=jobs, users=users)
