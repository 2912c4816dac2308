"""What the web application runs on: ``container.web``, one attribute of the process container.

:class:`WebServices` is built once per process by :func:`pmsgate.container.open_container`
next to the gateway's services (the same engine, vault, booking-system client, token
manager and cache): the customer services (platform and notes clients), the
knowledge-sync jobs of this process and the accounts. It is never opened on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from pmsgate.clock import Clock
from pmsgate.config import Settings
from pmsgate.customers.context import CustomerServices
from pmsgate.gateway.context import GatewayServices
from pmsgate.knowledge.jobs import SyncJobs
from pmsgate.web.users import UserService


@dataclass(frozen=True)
class WebServices:
    """Everything the web app's routes use (``container.web``)."""

    gateway: GatewayServices
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
