"""Optional OpenTelemetry traces of the gateway → booking system path (docs/operations.md).

Off unless an OTLP endpoint is configured: ``PMSGATE_OTEL_ENDPOINT`` (the collector's base
URL, e.g. ``http://otel-collector:4318``; traces go to ``<it>/v1/traces``) or the standard
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (with the other
``OTEL_EXPORTER_OTLP_*`` variables, e.g. headers, read by the exporter itself). The
packages are the optional extra ``pmsgate[otel]`` (opentelemetry-sdk, the OTLP/HTTP
exporter, the httpx instrumentation), imported only when traces are configured: without
them, and unconfigured, nothing of OpenTelemetry is loaded.

What a trace of a tool call holds:

- a ``SERVER`` span per HTTP request (:class:`TracingMiddleware`), named by the method and
  the route *template* (``POST /v1/tools/get-in-house-guests``, never a raw path: paths may
  carry ids or one-time tokens), continuing the caller's trace when it sent a W3C
  ``traceparent``;
- an ``INTERNAL`` span per booking-system call of the gateway (``pms <operation>``,
  :meth:`pmsgate.gateway.service.Gateway._observe`) with the facility, the operation and,
  on failure, the error's code;
- a ``CLIENT`` span per HTTP request sent to the booking system (the httpx instrumentation
  of the booking-system client), which carries ``traceparent`` to it. Neither bodies nor
  headers are recorded: no token, password or guest data reaches a span.

The tracer provider is the process's own (never the global one), shut down (its last
spans flushed) when the container closes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

import httpx
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pmsgate.config import Settings
from pmsgate.errors import ConfigurationError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Tracer

SERVICE_NAME = "pmsgate"
# The standard variables that turn traces on as well as PMSGATE_OTEL_ENDPOINT.
STANDARD_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
INSTALL_HINT = (
    "install the optional extra: pip install 'pmsgate[otel]' (uv sync --extra otel), "
    "or unset PMSGATE_OTEL_ENDPOINT and OTEL_EXPORTER_OTLP_ENDPOINT."
)


def configured(settings: Settings, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether traces are asked for (an endpoint set, and the SDK not disabled)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(settings.otel_endpoint) or any(environ.get(name) for name in STANDARD_ENDPOINTS)


def available() -> bool:
    """Whether the packages of ``pmsgate[otel]`` are installed."""
    try:
        # Whether the optional extra pmsgate[otel] is installed: that is the question.
        import opentelemetry.exporter.otlp.proto.http.trace_exporter
        import opentelemetry.instrumentation.httpx
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        return False
    return True


class Tracing:
    """The process's tracer provider, the gateway's tracer, and instrumented clients."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self.tracer: Tracer = provider.get_tracer("pmsgate.gateway")
        self._instrumented: list[httpx.AsyncClient] = []

    def instrument(self, client: httpx.AsyncClient) -> None:
        """A ``CLIENT`` span for each request ``client`` sends, with ``traceparent`` sent on."""
        # The optional extra pmsgate[otel], loaded only when traces are on (as below).
        from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

        HTTPXClientInstrumentor.instrument_client(client, tracer_provider=self.provider)
        self._instrumented.append(client)

    def shutdown(self) -> None:
        """Flush the spans still held and stop exporting (the container's exit)."""
        # The optional extra pmsgate[otel], loaded only when traces are on.
        from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

        for client in self._instrumented:
            HTTPXClientInstrumentor.uninstrument_client(client)
        self._instrumented.clear()
        self.provider.shutdown()


def tracing_from_settings(
    settings: Settings,
    *,
    environ: Mapping[str, str] = os.environ,
    exporter: SpanExporter | None = None,
) -> Tracing | None:
    """The process's tracing when configured (or an ``exporter`` is given), else None.

    ``exporter`` replaces the OTLP exporter (tests: an in-memory one, spans exported as
    each ends). A configuration asking for traces without the packages installed is a
    :class:`~pmsgate.errors.ConfigurationError` (start-up reports it as one line first).
    """
    if exporter is None and not configured(settings, environ):
        return None
    if not available():
        raise ConfigurationError(
            "Traces are configured (PMSGATE_OTEL_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT) "
            "but the OpenTelemetry packages are not installed.",
            hint=INSTALL_HINT,
        )
    # The optional extra pmsgate[otel]: present (checked above), loaded only when traces are on.
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE_NAME}))
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        # The OTLP exporter, loaded only when it is the one used (pmsgate[otel]).
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        endpoint = None
        if settings.otel_endpoint:
            endpoint = settings.otel_endpoint.rstrip("/") + "/v1/traces"
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return Tracing(provider)


@contextmanager
def _span(tracer: Tracer, name: str, attributes: Mapping[str, str]) -> Iterator[Span]:
    with tracer.start_as_current_span(name, attributes=dict(attributes)) as span:
        yield span


def upstream_span(tracing: Tracing | None, operation: str, hotel_id: str) -> Any:
    """The span of one booking-system call of the gateway (a no-op without tracing)."""
    if tracing is None:
        return nullcontext(None)
    attributes = {"pmsgate.operation": operation, "pmsgate.hotel_id": hotel_id}
    return _span(tracing.tracer, f"pms {operation}", attributes)


def mark_failed(span: Any, code: str) -> None:
    """Record on ``span`` (None without tracing) that the call failed with ``code``."""
    if span is None:
        return
    # A span exists, so pmsgate[otel] is installed: loaded only when traces are on.
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("pmsgate.error_code", code)
    span.set_status(Status(StatusCode.ERROR, code))


class TracingMiddleware:
    """A ``SERVER`` span per HTTP request, named by the route template that answered.

    ``tracing`` is read per request (the container may be opened after the app is built,
    as ``pmsgate serve`` does); without tracing the request passes untouched.
    """

    def __init__(self, app: ASGIApp, tracing: Callable[[], Tracing | None]) -> None:
        self.app = app
        self.tracing = tracing

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        tracing = self.tracing() if scope["type"] == "http" else None
        if tracing is None:
            await self.app(scope, receive, send)
            return
        # Tracing is on, so pmsgate[otel] is installed: loaded only then.
        from opentelemetry import propagate, trace

        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        method = scope["method"]
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        with tracing.tracer.start_as_current_span(
            method,
            context=propagate.extract(headers),
            kind=trace.SpanKind.SERVER,
            attributes={"http.request.method": method},
        ) as span:
            try:
                await self.app(scope, receive, send_status)
            finally:
                route = getattr(scope.get("route"), "path", None)
                if route:
                    span.update_name(f"{method} {route}")
                    span.set_attribute("http.route", route)
                span.set_attribute("http.response.status_code", status)
                if status >= 500:
                    span.set_status(trace.Status(trace.StatusCode.ERROR))
