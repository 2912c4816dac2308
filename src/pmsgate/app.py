"""The service's app factory: `create_app` serves the process container over HTTP and MCP.

The container is built by the composition root, :func:`pmsgate.container.open_container`:
by this app's lifespan for ``pmsgate serve``, or by the caller (tests, the demo, the
benchmarks) who passes it in. The routes read it from ``app.state.container`` only.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import structlog
from fastapi import Depends, FastAPI, Response
from fastapi.responses import JSONResponse
from pydantic import SecretStr
from sqlalchemy import text
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pmsgate.boundary import refuse_control_characters
from pmsgate.config import Settings
from pmsgate.container import Container, open_container
from pmsgate.customers.reconnect import reconnect_facility
from pmsgate.errors import PmsgateError, install_error_handlers
from pmsgate.gateway import admin, http
from pmsgate.gateway.context import GatewayServicesDep
from pmsgate.gateway.facilities import FacilityView
from pmsgate.gateway.mcp import create_mcp_app
from pmsgate.http_limits import BodyLimitMiddleware
from pmsgate.openapi import install_openapi

log = structlog.get_logger(__name__)


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


@asynccontextmanager
async def run_scheduled_jobs(container: Container) -> AsyncIterator[None]:
    """The scheduled jobs of ``pmsgate serve`` on the container, running until exit.

    With ``scheduler_enabled`` off (an external scheduler runs `pmsgate jobs …`), only the
    per-process job runs here: the flush of this process's own usage counts.
    """
    from pmsgate.jobs.scheduler import PER_PROCESS_JOBS, build_scheduler

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
    from pmsgate.web.app import install_web, render_console_error

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            if container is None:
                opened = await stack.enter_async_context(open_container(settings))
                _serve(app, opened)
                await stack.enter_async_context(run_scheduled_jobs(opened))
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
    if container is not None:
        _serve(app, container)
    app.include_router(http.router)
    install_web(app)

    async def reconnect(
        hotel_id: str, *, username: str, password: SecretStr, api_key: SecretStr | None
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
        )
        return reconnected.facility

    app.include_router(
        admin.build_admin_router(
            lambda: app.state.container.gateway.facilities, settings.admin_token, reconnect
        )
    )

    async def authenticate(raw_key: str) -> FacilityView:
        facility: FacilityView = await app.state.container.gateway.facilities.authenticate(raw_key)
        return facility

    def record_call(tool: str, outcome: str) -> None:
        app.state.container.gateway.metrics.tool_calls.labels(tool, outcome).inc()

    mcp_app, mcp_lifespan = create_mcp_app(
        tools_provider=lambda: app.state.container.gateway.tools,
        authenticate=authenticate,
        record_call=record_call,
    )
    # A route, not a mount: a mount answers POST /mcp with a redirect to /mcp/.
    app.add_route("/mcp", mcp_app, include_in_schema=False)  # type: ignore[arg-type]  # an ASGI app

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", include_in_schema=False)
    async def readyz(current: GatewayServicesDep) -> Response:
        """Ready when the database and (if configured) Redis answer; 503 names what is missing.

        A replica without Redis still answers what it safely can (docs/gateway.md, When Redis
        is away), but it is not fully ready: this is what an orchestrator should see.
        """
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
    async def metrics(current: GatewayServicesDep) -> Response:
        for facility in await current.facilities.list():
            key = current.gateway.limit_key(facility)
            for window, left in (await current.limiter.remaining(key, facility.limits)).items():
                current.metrics.budget_remaining.labels(facility.hotel_id, window).set(left)
        return Response(current.metrics.render(), media_type="text/plain; version=0.0.4")

    return app


def _serve(app: FastAPI, container: Container) -> None:
    """Make ``container`` the one the app's routes use."""
    app.state.container = container
