"""A small app behind the gateway's HTTP front (the middleware every request passes)."""

from __future__ import annotations

from fastapi import FastAPI

from pmsgate.gateway.http_front import HttpFrontMiddleware
from pmsgate.gateway.metrics import GatewayMetrics


def behind_the_front(
    app: FastAPI, metrics: GatewayMetrics | None = None, *, max_body: int = 1000
) -> FastAPI:
    """``app`` behind the HTTP front: ``metrics`` (or none), no tracing, bodies (uploads
    too) of at most ``max_body`` bytes."""
    app.add_middleware(
        HttpFrontMiddleware,
        metrics=lambda: metrics,
        tracing=lambda: None,
        max_body_bytes=max_body,
        max_upload_body_bytes=max_body,
    )
    return app
