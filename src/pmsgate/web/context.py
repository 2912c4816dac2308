"""What the web application runs on: ``container.web``, one attribute of the process container.

:class:`WebServices` is built once per process by :func:`pmsgate.container.open_container`
next to the gateway's services (the same engine, vault, booking-system client, token
manager and cache): the customer services (platform and notes clients), the
knowledge-sync jobs of this process and the accounts. It is never opened on its own.
Routes take it as a typed dependency, :data:`WebDep`, whose function reads
``app.state.container`` — the one place an app keeps its container.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from pmsgate.audit.trail import AuditTrail
from pmsgate.clock import Clock
from pmsgate.config import Settings
from pmsgate.customers.context import CustomerServices
from pmsgate.gateway.context import GatewayServices
from pmsgate.knowledge.sync_jobs import SyncJobs
from pmsgate.web.form_tokens import FormTokens
from pmsgate.web.incidents import IncidentService
from pmsgate.web.invitations import Invitations
from pmsgate.web.users import UserService
from pmsgate.webhooks.delivery import WebhookDeliverer
from pmsgate.webhooks.service import WebhookService


@dataclass(frozen=True)
class WebServices:
    """Everything the web app's routes use (``container.web``)."""

    gateway: GatewayServices
    customers: CustomerServices
    sync_jobs: SyncJobs
    users: UserService
    audit: AuditTrail
    invitations: Invitations
    incidents: IncidentService
    form_tokens: FormTokens
    # Signed event webhooks (docs/webhooks.md): subscriptions, and the deliveries' sender.
    webhooks: WebhookService
    webhook_deliverer: WebhookDeliverer

    @property
    def settings(self) -> Settings:
        """The process settings."""
        return self.gateway.settings

    @property
    def clock(self) -> Clock:
        """The process clock."""
        return self.gateway.clock


def web_services(request: Request) -> WebServices:
    """The web services of the app's container (a route dependency)."""
    web: WebServices = request.app.state.container.web
    return web


async def _web_services_dependency(request: Request) -> WebServices:
    # ``async``: FastAPI runs a plain ``def`` dependency in its thread pool, a hand-off to a
    # worker thread and back on every request (bench/README.md, production speed).
    return web_services(request)


WebDep = Annotated[WebServices, Depends(_web_services_dependency)]
