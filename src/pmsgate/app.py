"""The service's app factory: `create_app` serves the process container over HTTP and MCP.

The container is built by the composition root, :func:`pmsgate.container.open_container`:
by this app's lifespan for ``pmsgate serve``, or by the caller (tests, the demo, the
benchmarks) who passes it in. The routes read it from ``app.state.container`` only.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import hmac
import ipaddress
import socket
from collections.abc import AsyncIterator, Callable, Generator
from contextlib import AsyncExitStack, asynccontextmanager

import structlog
import uvicorn
from fastapi import Depends, FastAPI, Request, Response
from fastapi.responses import JSONResponse
from pydantic import SecretStr
from sqlalchemy import text
from starlette.types import Scope

from pmsgate.api_docs import install_api_docs
from pmsgate.audit.actions import Actor
from pmsgate.audit.admin_api import admin_action_recorder
from pmsgate.boundary import refuse_control_characters
from pmsgate.config import Settings
from pmsgate.container import Container, open_container
from pmsgate.customers.reconnect import reconnect_facility
from pmsgate.errors import (
    ConfigurationError,
    Forbidden,
    PmsgateError,
    Unauthorized,
    install_error_handlers,
)
from pmsgate.gateway import admin, http
from pmsgate.gateway.context import GatewayServices, GatewayServicesDep
from pmsgate.gateway.facilities import FacilityView
from pmsgate.gateway.http_front import HttpFrontMiddleware
from pmsgate.gateway.mcp import Lifespan, create_mcp_app
from pmsgate.gateway.metrics import GatewayMetrics
from pmsgate.gateway.metrics_scrape import scrape
from pmsgate.gateway.oauth_tokens import MCP_PATH, BearerAuth, Caller
from pmsgate.gateway.scopes import TOOLS_READ
from pmsgate.gateway.tracing import Tracing
from pmsgate.jobs import PER_PROCESS_JOBS, build_scheduler
from pmsgate.oauth.routes import install_oauth
from pmsgate.openapi import install_openapi
from pmsgate.version import build_info
from pmsgate.web.app import install_web
from pmsgate.web.pages import render_console_error

log = structlog.get_logger(__name__)


@asynccontextmanager
async def run_scheduled_jobs(container: Container) -> AsyncIterator[None]:
    """The scheduled jobs of ``pmsgate serve`` on the container, running until exit.

    With ``scheduler_enabled`` off (an external scheduler runs `pmsgate jobs …`), only the
    per-process job runs here: the flush of this process's own usage counts.
    """
    only = None if container.settings.scheduler_enabled else PER_PROCESS_JOBS
    async with build_scheduler(container.web, only=only):
        yield


def create_app(settings: Settings, *, container: Container | None = None) -> FastAPI:
    """The service's app: the gateway, its admin API and the web application.

    Without ``container`` (``pmsgate serve``) the lifespan opens the process's container
    from the settings (:func:`~pmsgate.container.open_container`) and runs the scheduled
    jobs on it. With ``container`` given (tests, the demo, benchmarks) it serves that one
    as it is, without the scheduled jobs. ``app.state.container`` is the one place the
    routes' dependencies read.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with serve_lifespan(app, settings, container, mcp_lifespan):
            yield

    app = FastAPI(
        title="pmsgate",
        version="0.1.0",
        lifespan=lifespan,
        # PMSGATE_API_DOCS=false: no /docs, /redoc, /openapi.json (docs/operations.md);
        # the pages are pmsgate.api_docs' (their assets served here, not from a CDN).
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json" if settings.api_docs else None,
        # No control character in a path or query string reaches a route (pmsgate.boundary).
        dependencies=[Depends(refuse_control_characters)],
    )
    install_handlers(app, settings)
    install_middleware(app, settings)
    if container is not None:
        _serve(app, container)
    app.include_router(http.router)  # /v1/tools and /v1/operations
    install_web(app)  # the console, its JSON API and /static
    install_oauth(app)  # OAuth discovery and /oauth/* (docs/oauth.md)
    mount_admin(app, settings)
    mcp_lifespan = mount_mcp(app, settings)
    mount_probes(app, settings)
    return app


@asynccontextmanager
async def serve_lifespan(
    app: FastAPI, settings: Settings, container: Container | None, mcp_lifespan: Lifespan
) -> AsyncIterator[None]:
    """What the app's lifespan runs: the container (unless given), its jobs, and MCP."""
    async with AsyncExitStack() as stack:
        if container is None:
            opened = await stack.enter_async_context(open_container(settings))
            _serve(app, opened)
            await stack.enter_async_context(run_scheduled_jobs(opened))
            if settings.metrics_address is not None:  # /metrics on a listener of its own
                services = opened.gateway
                await stack.enter_async_context(metrics_listener(settings, lambda: services))
        await stack.enter_async_context(mcp_lifespan())
        if container is None:
            # Last: everything start-up built is in the heap by now (freeze_startup_heap).
            stack.callback(gc.unfreeze)
            freeze_startup_heap()
        app.state.shutting_down = False
        yield
        app.state.shutting_down = True  # /readyz: 503 from here on


def install_handlers(app: FastAPI, settings: Settings) -> None:
    """The error handlers (console pages as pages, the rest as JSON) and the API docs."""
    # The console's pages show their errors as pages; everything else as the JSON body. The
    # last-resort guard is in the one HTTP layer below.
    install_error_handlers(app, render=render_console_error, guard=False)
    install_openapi(app)  # every route's bodies and error statuses, as they really are
    if settings.api_docs:
        install_api_docs(app)  # /docs and /redoc, working without internet access


def install_middleware(app: FastAPI, settings: Settings) -> None:
    """The one HTTP layer every request goes through before the routes."""
    # One pure-ASGI layer (pmsgate.gateway.http_front), outermost first: a trace's server span
    # when traces are configured; every request's latency by route template
    # (docs/operations.md); its id in every log line and audit event (pmsgate.request_context);
    # every body bounded as it arrives (413 before a large body is read whole); the
    # last-resort guard for an unforeseen exception; the documented tool and operation
    # routes answered by exact path ahead of the router (pmsgate.gateway.http.front_routes).
    app.add_middleware(
        HttpFrontMiddleware,
        metrics=lambda: _metrics_of(app),
        tracing=lambda: _tracing_of(app),
        max_body_bytes=settings.max_body_bytes,
        max_upload_body_bytes=settings.max_upload_body_bytes,
        render=render_console_error,
        routes=http.front_routes(app.router.dependencies),
    )


def mount_admin(app: FastAPI, settings: Settings) -> None:
    """The admin API (PMSGATE_ADMIN_TOKEN), audited, over HTTPS or from this machine."""

    async def reconnect(
        hotel_id: str,
        *,
        username: str,
        password: SecretStr,
        api_key: SecretStr | None,
        actor: Actor,
    ) -> FacilityView:
        # The one reconnect path (the CLI's and the web app's too): listings syncs restarted.
        current: Container = app.state.container
        reconnected = await reconnect_facility(
            current.customers,
            current.gateway,
            hotel_id,
            username=username,
            password=password,
            api_key=api_key,
            actor=actor,
        )
        return reconnected.facility

    app.include_router(
        admin.build_admin_router(
            lambda: app.state.container.gateway.facilities, settings.admin_token, reconnect
        ),
        dependencies=[
            # Every call that may change something, in the audit trail (docs/audit.md); first,
            # so that it sees the refusals of the checks after it too.
            Depends(admin_action_recorder(lambda: app.state.container.audit)),
            # HTTPS or this machine only, checked before the token (docs/operations.md).
            Depends(admin_transport(settings)),
        ],
    )


def mount_mcp(app: FastAPI, settings: Settings) -> Lifespan:
    """The tools over MCP at ``/mcp``; the lifespan the app's must enter around it."""

    async def authenticate(authorization: str | None, scope: Scope) -> Caller:
        # A gateway key or an OAuth access token for /mcp (pmsgate.gateway.oauth_tokens).
        bearer: BearerAuth = app.state.container.gateway.bearer
        return await bearer.authenticate(authorization, TOOLS_READ, scope, MCP_PATH)

    def record_call(tool: str, outcome: str) -> None:
        app.state.container.gateway.metrics.tool_calls.labels(tool, outcome).inc()

    mcp_app, mcp_lifespan = create_mcp_app(
        tools_provider=lambda: app.state.container.gateway.tools,
        authenticate=authenticate,
        record_call=record_call,
        call_log_provider=lambda: app.state.container.gateway.gateway.call_log,
        allowed_origins=settings.allowed_origins,
    )
    # A route, not a mount: a mount answers POST /mcp with a redirect to /mcp/.
    app.add_route("/mcp", mcp_app, include_in_schema=False)  # type: ignore[arg-type]  # an ASGI app
    return mcp_lifespan


def mount_probes(app: FastAPI, settings: Settings) -> None:
    """``/healthz``, ``/readyz`` and (without a listener of its own) ``/metrics``."""

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        running = build_info()
        return {"status": "ok", "version": running.version, "revision": running.revision}

    @app.get("/readyz", include_in_schema=False)
    async def readyz(current: GatewayServicesDep) -> Response:
        return await readiness(app, current)

    async def metrics(current: GatewayServicesDep) -> Response:
        return await scrape_metrics(current)

    if settings.metrics_address is None:  # else only on its own listener (metrics_listener)
        app.add_api_route(
            "/metrics",
            metrics,
            methods=["GET"],
            include_in_schema=False,
            # The token, or callers on this machine only (docs/operations.md).
            dependencies=[Depends(metrics_access(settings, loopback_only=True))],
        )


async def readiness(app: FastAPI, current: GatewayServices) -> Response:
    """200 while this replica can serve; 503 only when it cannot (docs/operations.md).

    Not ready: the database does not answer, the vault keys do not read the stored
    secrets (a key id missing: every call of those facilities would fail), or the
    replica is shutting down. Redis away is *degraded* — still 200: the gateway serves
    on its fallbacks (docs/gateway.md, When Redis is away), and a probe that failed on
    it would pull every replica out of the load balancer at once. The degradation is in
    the body, in ``pmsgate_redis_up`` and in the ``redis_unavailable`` log line.
    """
    checks: dict[str, str] = {}
    blocking: list[str] = []
    if getattr(app.state, "shutting_down", False):
        checks["lifecycle"] = "shutting down"
        blocking.append("the replica is shutting down")
    try:
        async with current.engine.connect() as connection:
            await connection.execute(text("SELECT 1"))
        checks["database"] = "ok"
        keys = await app.state.container.vault_keys.cached()
        checks["vault"] = "ok" if keys.ok else keys.problem()
        if not keys.ok:
            blocking.append(keys.problem())
    except Exception as error:  # any failure means not ready; say which kind
        checks["database"] = f"unavailable ({type(error).__name__})"
        blocking.append("the database is unavailable")
    degraded = False
    if current.redis is not None:
        up = await current.redis_health.check(current.redis)
        checks["redis"] = "ok" if up else "unavailable"
        degraded = not up
    if blocking:
        refusal = PmsgateError(
            "Not ready: " + "; ".join(blocking) + ".",
            code="not_ready",
            status=503,
            hint="See `checks`; `pmsgate doctor` says what to fix.",
            headers={"Retry-After": "5"},
        )
        return JSONResponse(
            {**refusal.to_body(), "status": "not_ready", "checks": checks},
            status_code=503,
            headers=refusal.headers,
        )
    return JSONResponse({"status": "degraded" if degraded else "ready", "checks": checks})


def freeze_startup_heap() -> None:
    """Move every object start-up made out of the garbage collector's reach (``gc.freeze()``).

    ``pmsgate serve`` calls it at the end of its lifespan's start-up: the modules, the
    routes, the pydantic and SQLAlchemy models, the catalogue, the OpenAPI schema — about
    230,000 objects that live as long as the process. Left in the collector's oldest
    generation, every full collection walks them all: 150-170 ms measured on the benchmark
    machine (bench/README.md), landing on whichever requests are in flight (the p99 under
    load). Frozen, a full collection walks only what was allocated since. Nothing is lost:
    these objects would never be freed anyway. Collected first, so that no garbage made
    at start-up is frozen with them. The lifespan unfreezes at shutdown (a test process
    that serves many apps keeps a working collector). Apps given a container (tests, the
    demo, benchmarks) are left as they are: their heap is their caller's.
    """
    gc.collect()
    gc.freeze()


def _metrics_of(app: FastAPI) -> GatewayMetrics | None:
    """The metrics of the app's container, None before the lifespan has opened one."""
    container: Container | None = getattr(app.state, "container", None)
    return None if container is None else container.gateway.metrics


def _tracing_of(app: FastAPI) -> Tracing | None:
    """The traces of the app's container, None without a container or without traces."""
    container: Container | None = getattr(app.state, "container", None)
    return None if container is None else container.gateway.tracing


def _serve(app: FastAPI, container: Container) -> None:
    """Make ``container`` the one the app's routes use."""
    app.state.container = container


# --- The operational endpoints (docs/operations.md, Protecting the operational endpoints) ---


def is_loopback_client(request: Request) -> bool:
    """Whether the request comes from this machine.

    Behind a reverse proxy listed in PMSGATE_FORWARDED_ALLOW_IPS, uvicorn has already put the
    proxy's client (X-Forwarded-For) in the scope, so a caller elsewhere is not taken for a
    local one; from any other address those headers are ignored.
    """
    if request.client is None:
        return False
    try:
        address = ipaddress.ip_address(request.client.host)
    except ValueError:  # not an address: a test client's name, a Unix socket
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def _digest(token: str) -> bytes:
    # Compared as digests: equal lengths, so the comparison tells nothing about the length.
    return hashlib.sha256(token.encode()).digest()


def metrics_access(settings: Settings, *, loopback_only: bool) -> Callable[[Request], None]:
    """The check in front of ``/metrics``: the bearer PMSGATE_METRICS_TOKEN when one is set.

    Without a token, ``loopback_only`` (the main address) lets only callers on this machine
    scrape: the metrics name every facility, so they are never public by default. The
    separate listener (PMSGATE_METRICS_ADDRESS) is protected by the address it binds.
    """
    token = settings.metrics_token
    wanted = None if token is None else _digest(token.get_secret_value())

    def check(request: Request) -> None:
        if wanted is None:
            if loopback_only and not is_loopback_client(request):
                raise Forbidden(
                    "/metrics answers only callers on this machine: no metrics token is set.",
                    code="metrics_not_public",
                    hint="Set PMSGATE_METRICS_TOKEN and scrape with `Authorization: Bearer "
                    "<token>`, or serve the metrics on an address of their own with "
                    "PMSGATE_METRICS_ADDRESS (docs/operations.md).",
                )
            return
        scheme, _, presented = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            _digest(presented.strip()), wanted
        ):
            raise Unauthorized(
                "Missing or wrong metrics token.",
                code="invalid_metrics_token",
                hint="Send `Authorization: Bearer <PMSGATE_METRICS_TOKEN>` "
                "(Prometheus: `authorization: {credentials: …}` in the scrape config).",
                headers={"WWW-Authenticate": "Bearer"},
            )

    return check


def admin_transport(settings: Settings) -> Callable[[Request], None]:
    """The check in front of the admin API: HTTPS, or a caller on this machine.

    The admin token crosses the network with every call; over plain HTTP anyone on the way
    can read it. HTTPS is the scope's scheme: behind a reverse proxy, the X-Forwarded-Proto
    of a proxy listed in PMSGATE_FORWARDED_ALLOW_IPS. PMSGATE_ADMIN_ALLOW_PLAIN_HTTP turns the
    check off (a private network the operator trusts).
    """

    def check(request: Request) -> None:
        if settings.admin_allow_plain_http or request.scope.get("scheme") == "https":
            return
        if is_loopback_client(request):
            return
        raise Forbidden(
            "The admin API does not answer plain HTTP from another machine.",
            code="admin_https_required",
            hint="Call it over HTTPS (behind a reverse proxy, list the proxy in "
            "PMSGATE_FORWARDED_ALLOW_IPS so that its X-Forwarded-Proto counts), or from this "
            "machine; on a network you trust, set PMSGATE_ADMIN_ALLOW_PLAIN_HTTP=true. A token "
            "sent with this request crossed the network unencrypted: change it.",
        )

    return check


async def scrape_metrics(current: GatewayServices) -> Response:
    """The Prometheus text exposition; the facility gauges from a snapshot at most 60 s old."""
    return await scrape(current)


def create_metrics_app(settings: Settings, services: Callable[[], GatewayServices]) -> FastAPI:
    """The app of the separate metrics listener (PMSGATE_METRICS_ADDRESS): ``/metrics`` only."""
    metrics_app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    install_error_handlers(metrics_app)
    check = metrics_access(settings, loopback_only=False)

    @metrics_app.get("/metrics", dependencies=[Depends(check)])
    async def metrics() -> Response:
        return await scrape_metrics(services())

    return metrics_app


class _FollowingServer(uvicorn.Server):
    """A uvicorn server that leaves the signals to the main one, which stops it on exit."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


@asynccontextmanager
async def metrics_listener(
    settings: Settings, services: Callable[[], GatewayServices]
) -> AsyncIterator[str]:
    """Serve :func:`create_metrics_app` on PMSGATE_METRICS_ADDRESS until the block ends.

    ``pmsgate serve`` runs it in its lifespan. The socket is bound here, before the block
    starts, so that an address in use stops the start-up instead of failing in the
    background. Yields the address bound (with the port chosen when it was 0).
    """
    listen = settings.metrics_listen
    if listen is None:
        raise ConfigurationError(
            "No metrics address is set.",
            code="metrics_address_missing",
            hint="Set PMSGATE_METRICS_ADDRESS, e.g. 127.0.0.1:9464.",
        )
    host, port = listen
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.create_server((host, port), family=family)
    except OSError as error:
        raise ConfigurationError(
            f"The metrics listener cannot listen on {settings.metrics_address}: "
            f"{error.strerror or error}.",
            code="metrics_address_unavailable",
            hint="Choose a free address of this machine in PMSGATE_METRICS_ADDRESS.",
        ) from None
    bound = sock.getsockname()
    address = f"[{bound[0]}]:{bound[1]}" if family == socket.AF_INET6 else f"{bound[0]}:{bound[1]}"
    config = uvicorn.Config(
        create_metrics_app(settings, services), log_config=None, lifespan="off", access_log=False
    )
    server = _FollowingServer(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    log.info("metrics listener started", address=address)
    try:
        yield address
    finally:
        server.should_exit = True
        await task
        sock.close()
