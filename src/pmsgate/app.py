"""The service's composition root: every gateway service built once from settings.

`open_services` wires the pieces (database, vault, limiter, cache, tokens, the
booking-system client) for one process; `create_app` serves them over HTTP and
MCP. Tests and the demo pass their own ``kross_http`` (an httpx client on the
emulator) and clock; production gets a real httpx client and the system clock.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import httpx
import structlog
from fastapi import Depends, FastAPI, Request, Response
from fastapi.responses import JSONResponse
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pmsgate.boundary import refuse_control_characters
from pmsgate.clock import Clock, SystemClock
from pmsgate.config import Settings
from pmsgate.errors import PmsgateError, install_error_handlers
from pmsgate.gateway import admin, http
from pmsgate.gateway.cache import ReadCache
from pmsgate.gateway.facilities import (
    FacilityService,
    FacilityView,
    pms_verifier,
    vault_from_settings,
)
from pmsgate.gateway.limiter import FacilityLimiter
from pmsgate.gateway.locks import liveness_for, locks_for
from pmsgate.gateway.mcp import create_mcp_app
from pmsgate.gateway.metrics import GatewayMetrics
from pmsgate.gateway.operations import Operations
from pmsgate.gateway.service import Gateway, GatewayPolicy
from pmsgate.gateway.shared_state import RedisHealth
from pmsgate.gateway.tokens import TokenManager
from pmsgate.gateway.tools import Tools
from pmsgate.gateway.usage import UsageCounter, UsageHistory
from pmsgate.gateway.window import WindowPolicy
from pmsgate.http_limits import BodyLimitMiddleware
from pmsgate.openapi import install_openapi
from pmsgate.pms.client import PmsClient, Token
from pmsgate.pms.credentials import Credentials
from pmsgate.storage.db import open_database, session_factory
from pmsgate.storage.idempotency import IdempotencyRepository

if TYPE_CHECKING:
    from pmsgate.web.context import WebServices

log = structlog.get_logger(__name__)


@dataclass
class Services:
    """Everything one gateway process runs on."""

    settings: Settings
    clock: Clock
    engine: AsyncEngine
    redis: Redis | None
    redis_health: RedisHealth
    facilities: FacilityService
    pms: PmsClient
    limiter: FacilityLimiter
    cache: ReadCache
    tokens: TokenManager
    gateway: Gateway
    tools: Tools
    operations: Operations
    metrics: GatewayMetrics
    usage: UsageCounter


class RequestIdMiddleware:
    """Binds a request id to every log line of a request and returns it as X-Request-Id.

    Plain ASGI rather than ``@app.middleware("http")``: it adds no per-request task.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        raw = headers.get(b"x-request-id", b"").decode("latin-1")
        rid = raw if raw.isalnum() and len(raw) <= 64 else uuid.uuid4().hex[:16]

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", []).append((b"x-request-id", rid.encode()))
            await send(message)

        with structlog.contextvars.bound_contextvars(request_id=rid):
            await self.app(scope, receive, send_with_id)


def open_redis(settings: Settings) -> Redis | None:
    """The shared Redis client, or None when no Redis is configured.

    Short timeouts and one quick retry (redis-py's own ``Retry``: a connection dropped by a
    Redis restart is re-opened once, at once), so an outage is noticed within about
    ``redis_timeout_s`` instead of after redis-py's default ten retries with backoff.
    """
    if not settings.redis_url:
        return None
    return Redis.from_url(
        settings.redis_url,
        socket_connect_timeout=settings.redis_timeout_s,
        socket_timeout=settings.redis_timeout_s,
        retry=Retry(ExponentialBackoff(cap=0.05, base=0.01), retries=1),
    )


def upstream_history(
    usage: UsageHistory, facilities: FacilityService
) -> Callable[[str, datetime], Awaitable[list[tuple[datetime, int]]]]:
    """The limiter's memory of a key's upstream requests per hour since a time (the database's).

    A key is a hotel_id, or ``account:<username>`` when the budget is per API account
    (then the hours of every facility of that account add up).
    """

    async def history(key: str, since: datetime) -> list[tuple[datetime, int]]:
        if key.startswith("account:"):
            username = key.removeprefix("account:")
            hotel_ids = [f.hotel_id for f in await facilities.list() if f.username == username]
        else:
            hotel_ids = [key]
        hours: dict[datetime, int] = {}
        for hotel_id in hotel_ids:
            for row in await usage.series(hotel_id, since, since + timedelta(days=2)):
                if row.upstream_calls:
                    hours[row.hour] = hours.get(row.hour, 0) + row.upstream_calls
        return sorted(hours.items())

    return history


@asynccontextmanager
async def open_services(
    settings: Settings,
    *,
    kross_http: httpx.AsyncClient | None = None,
    clock: Clock | None = None,
) -> AsyncIterator[Services]:
    """Build every service for these settings; close them all on exit."""
    clock = clock or SystemClock()
    async with AsyncExitStack() as stack:
        engine = await stack.enter_async_context(open_database(settings.effective_database_url))
        sessions = session_factory(engine)
        metrics = GatewayMetrics()
        health = RedisHealth(
            clock, retry_interval_s=settings.redis_retry_interval_s, gauge=metrics.redis_up
        )
        redis = open_redis(settings)
        if redis is not None:
            stack.push_async_callback(redis.aclose)
        if kross_http is None:
            kross_http = await stack.enter_async_context(
                httpx.AsyncClient(timeout=settings.kross_timeout_s)
            )
        usage = UsageCounter(clock, redis=redis, health=health, namespace=settings.redis_namespace)
        stack.push_async_callback(usage.settle)  # the last tick's counts reach Redis
        vault = vault_from_settings(settings)
        facilities = FacilityService(
            sessions,
            vault,
            clock,
            settings.partner_api_key,
            key_cache_s=settings.gateway_key_cache_s,
        )
        pms_client = PmsClient.from_settings(settings, kross_http, clock)
        limiter = FacilityLimiter(
            clock=clock,
            redis=redis,
            namespace=settings.redis_namespace,
            background_share=settings.limiter_background_share,
            edge_margin_s=settings.limiter_edge_margin_s,
            health=health,
            outage_share=settings.limiter_outage_share,
            history=upstream_history(UsageHistory(sessions), facilities),
        )
        cache = ReadCache(
            clock=clock,
            redis_url=settings.redis_url,
            namespace=settings.redis_namespace,
            keep_s=settings.cache_keep_s,
            lock_ttl_s=settings.cache_lock_ttl_s,
            health=health,
            redis_timeout_s=settings.redis_timeout_s,
        )
        stack.push_async_callback(cache.close)

        tokens = TokenManager(
            pms=pms_client,
            sessions=sessions,
            vault=vault,
            clock=clock,
            credentials=facilities.credentials,
            acquire_permit=lambda hotel_id: gateway.token_permit(hotel_id),
            locks=locks_for(
                redis,
                namespace=settings.redis_namespace,
                timeout_s=settings.token_lock_timeout_s,
                wait_s=settings.token_lock_wait_s,
            ),
            refresh_ahead_s=settings.token_refresh_ahead_s,
            health=health,
        )
        gateway = Gateway(
            facilities=facilities,
            pms_client=pms_client,
            tokens=tokens,
            limiter=limiter,
            cache=cache,
            clock=clock,
            metrics=metrics,
            usage=usage,
            policy=GatewayPolicy(
                limiter_wait_s=settings.limiter_wait_s,
                reauth_interval_s=settings.reauth_interval_s,
                limit_by_account=settings.limiter_scope == "account",
                refresh_ahead_ratio=settings.cache_refresh_ahead_ratio,
            ),
        )
        stack.push_async_callback(gateway.aclose)
        # Which gateway processes run: a write left in flight by a dead one is settled at once.
        liveness = await liveness_for(redis, namespace=settings.redis_namespace)
        stack.push_async_callback(liveness.aclose)
        yield Services(
            settings=settings,
            clock=clock,
            engine=engine,
            redis=redis,
            redis_health=health,
            facilities=facilities,
            pms=pms_client,
            limiter=limiter,
            cache=cache,
            tokens=tokens,
            gateway=gateway,
            tools=Tools(
                gateway,
                settings.cache_max_age_s,
                settings.cache_default_max_age_s,
                window=WindowPolicy.from_settings(settings),
            ),
            operations=Operations(gateway, IdempotencyRepository(sessions), liveness=liveness),
            metrics=metrics,
            usage=usage,
        )


@asynccontextmanager
async def open_web_application(services: Services) -> AsyncIterator[WebServices]:
    """The web services on ``services``, with the scheduled jobs running.

    With ``scheduler_enabled`` off (an external scheduler runs `pmsgate jobs …`), only the
    per-process job runs here: the flush of this process's own usage counts.
    """
    from pmsgate.jobs.scheduler import PER_PROCESS_JOBS, build_scheduler
    from pmsgate.web.context import open_web_services

    async with open_web_services(services) as web:
        only = None if services.settings.scheduler_enabled else PER_PROCESS_JOBS
        async with build_scheduler(web, only=only):
            yield web


def create_app(
    settings: Settings,
    *,
    services: Services | None = None,
    web: WebServices | None = None,
) -> FastAPI:
    """The service's app: the gateway, its admin API and the web application.

    Without ``services`` (``pmsgate serve``) the lifespan opens everything from the
    settings — gateway, web services and, when enabled, the scheduled jobs. With
    ``services`` given (tests, the demo) it serves those as they are, and the web
    application only when ``web`` is given too.
    """
    from pmsgate.web.app import install_web, render_console_error

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            if services is None:
                opened = await stack.enter_async_context(open_services(settings))
                app.state.services = opened
                app.state.web = await stack.enter_async_context(open_web_application(opened))
            await stack.enter_async_context(mcp_lifespan())
            yield

    app = FastAPI(
        title="pmsgate",
        version="0.1.0",
        lifespan=lifespan,
        # No control character in a path or query string reaches a route (pmsgate.boundary).
        dependencies=[Depends(refuse_control_characters)],
    )
    # The console's pages show their errors as pages; everything else as the JSON body.
    install_error_handlers(app, render=render_console_error)
    install_openapi(app)  # every route's bodies and error statuses, as they really are
    # Every route's body is bounded as it arrives (413 before a large body is read whole).
    app.add_middleware(
        BodyLimitMiddleware,
        max_body_bytes=settings.max_body_bytes,
        max_upload_body_bytes=settings.max_upload_body_bytes,
    )
    app.add_middleware(RequestIdMiddleware)  # outermost: every log line has the request id
    if services is not None:
        app.state.services = services
    app.state.web = web
    app.include_router(http.router)
    install_web(app)

    # The token that proved a facility's new credentials, until the reconnect is stored.
    verified: dict[str, tuple[Token, datetime]] = {}

    async def verify(credentials: Credentials) -> None:
        current: Services = app.state.services
        hotel_id, now = credentials.hotel_id, current.clock.now()
        # Trying credentials spends the facility's upstream budget like any token request.
        await pms_verifier(
            current.pms,
            current.gateway.token_permit,
            keep=lambda token: verified.__setitem__(hotel_id, (token, now)),
        )(credentials)

    async def on_reconnected(hotel_id: str) -> None:
        current: Services = app.state.services
        kept = verified.pop(hotel_id, None)
        if kept is not None:
            await current.tokens.adopt(hotel_id, *kept)  # one session upstream, not two
        else:
            await current.tokens.forget(hotel_id)
        await current.cache.invalidate(hotel_id)

    app.include_router(
        admin.build_admin_router(
            lambda: app.state.services.facilities, settings.admin_token, verify, on_reconnected
        )
    )

    async def authenticate(raw_key: str) -> FacilityView:
        facility: FacilityView = await app.state.services.facilities.authenticate(raw_key)
        return facility

    def record_call(tool: str, outcome: str) -> None:
        app.state.services.metrics.tool_calls.labels(tool, outcome).inc()

    mcp_app, mcp_lifespan = create_mcp_app(
        tools_provider=lambda: app.state.services.tools,
        authenticate=authenticate,
        record_call=record_call,
    )
    # A route, not a mount: a mount answers POST /mcp with a redirect to /mcp/.
    app.add_route("/mcp", mcp_app, include_in_schema=False)  # type: ignore[arg-type]  # an ASGI app

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", include_in_schema=False)
    async def readyz(request: Request) -> Response:
        """Ready when the database and (if configured) Redis answer; 503 names what is missing.

        A replica without Redis still answers what it safely can (docs/gateway.md, When Redis
        is away), but it is not fully ready: this is what an orchestrator should see.
        """
        current: Services = request.app.state.services
        checks: dict[str, str] = {}
        try:
            async with current.engine.connect() as connection:
                await connection.execute(text("SELECT 1"))
            checks["database"] = "ok"
        except Exception as error:  # any failure means not ready; say which kind
            checks["database"] = f"unavailable ({type(error).__name__})"
        if current.redis is not None:
            up = await current.redis_health.check(current.redis)
            checks["redis"] = "ok" if up else "unavailable"
        missing = [name for name, value in checks.items() if value != "ok"]
        if missing:
            refusal = PmsgateError(
                "Not ready: " + ", ".join(f"{name} is unavailable" for name in missing) + ".",
                code="not_ready",
                status=503,
                hint="Check the connection to: " + ", ".join(missing) + ".",
                headers={"Retry-After": "5"},
            )
            return JSONResponse(
                {**refusal.to_body(), "status": "not_ready", "checks": checks},
                status_code=503,
                headers=refusal.headers,
            )
        return JSONResponse({"status": "ready", "checks": checks})

    @app.get("/metrics", include_in_schema=False)
    async def metrics(request: Request) -> Response:
        current: Services = request.app.state.services
        for facility in await current.facilities.list():
            key = current.gateway.limit_key(facility)
            for window, left in (await current.limiter.remaining(key, facility.limits)).items():
                current.metrics.budget_remaining.labels(facility.hotel_id, window).set(left)
        return Response(current.metrics.render(), media_type="text/plain; version=0.0.4")

    return app
