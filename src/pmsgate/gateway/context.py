"""The gateway's view of the process container: what the gateway's routes, jobs and probes use.

:class:`GatewayServices` is one attribute of the process's
:class:`~pmsgate.container.Container` (``container.gateway``), built by
:func:`~pmsgate.container.open_container` and never opened on its own. Code below the
composition root takes it (or one of its pieces) as an argument and never imports the
module that builds it.

Routes take it as a typed dependency, :data:`GatewayServicesDep`, whose function reads
``app.state.container`` — the one place an app keeps its container.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine

from pmsgate.clock import Clock
from pmsgate.config import Settings
from pmsgate.gateway.cache import ReadCache
from pmsgate.gateway.facility_service import FacilityService
from pmsgate.gateway.limiter import FacilityLimiter
from pmsgate.gateway.metrics import GatewayMetrics
from pmsgate.gateway.oauth_tokens import BearerAuth
from pmsgate.gateway.operations import Operations
from pmsgate.gateway.service import Gateway
from pmsgate.gateway.shared_state import RedisHealth
from pmsgate.gateway.tokens import TokenManager
from pmsgate.gateway.tools import Tools
from pmsgate.gateway.tracing import Tracing
from pmsgate.gateway.usage import UsageCounter
from pmsgate.integrations.kross.client import KrossClient


@dataclass(frozen=True)
class GatewayServices:
    """Everything the gateway runs on in one process (``container.gateway``)."""

    settings: Settings
    clock: Clock
    engine: AsyncEngine
    redis: Redis | None
    redis_health: RedisHealth
    facilities: FacilityService
    kross: KrossClient
    limiter: FacilityLimiter
    cache: ReadCache
    tokens: TokenManager
    gateway: Gateway
    tools: Tools
    operations: Operations
    metrics: GatewayMetrics
    usage: UsageCounter
    # The bearer check of /v1 and /mcp: gateway keys and OAuth tokens (docs/oauth.md).
    bearer: BearerAuth
    tracing: Tracing | None = None  # traces, when configured (pmsgate.gateway.tracing)


def gateway_services(request: Request) -> GatewayServices:
    """The gateway's services of the app's container (a route dependency)."""
    services: GatewayServices = request.app.state.container.gateway
    return services


async def _gateway_services_dependency(request: Request) -> GatewayServices:
    # ``async``: FastAPI runs a plain ``def`` dependency in its thread pool, a hand-off to a
    # worker thread and back on every call (bench/README.md, production speed).
    return gateway_services(request)


GatewayServicesDep = Annotated[GatewayServices, Depends(_gateway_services_dependency)]
