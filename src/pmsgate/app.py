"""The service's composition root: builds the FastAPI app that `pmsgate serve` runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from pmsgate.config import Settings
from pmsgate.errors import install_error_handlers
from pmsgate.storage.db import open_database


def create_app(settings: Settings) -> FastAPI:
    """The gateway application for these settings; migrations run on start."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_database(settings.effective_database_url) as engine:
            app.state.engine = engine
            yield

    app = FastAPI(title="pmsgate", lifespan=lifespan)
    install_error_handlers(app)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app
