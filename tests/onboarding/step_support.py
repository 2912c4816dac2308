"""What the step tests share: a customer file of a seeded facility, a context, a live gateway.

The steps run against the in-process emulators through the real services and
clients (``tests/customers/support.py``), on a ManualClock whose ``sleep`` moves
time instead of waiting. Custom tools run on the platform emulator in a child
interpreter, so the gateway they call is served by uvicorn on real loopback HTTP
(:func:`live_gateway`), reading the same database and the booking-system emulator.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, fields
from typing import Any

import httpx

from pmsgate.app import create_app
from pmsgate.config import Settings
from pmsgate.container import open_container
from pmsgate.gateway.service import Gateway
from pmsgate.knowledge.records import KnowledgeSyncRecords
from pmsgate.knowledge.sync import KnowledgeSync
from pmsgate.onboarding.customer_file import CustomerFile, parse_customer_file
from pmsgate.onboarding.registry import STEPS
from pmsgate.onboarding.steps import (
    BOTH_ROUTES,
    Check,
    OnboardingContext,
    Step,
    StepKind,
    StepResult,
)
from pmsgate.sandbox.customers import customer_document as sandbox_customer_document
from tests.customers.support import (
    SANDBOX_URL,
    EnrolledSandbox,
    enrolled_sandbox,
)
from tests.e2e.processes import free_port
from tests.support.servers import serving_app

WRITE_METHODS = ("POST ", "PATCH ", "PUT ", "DELETE ")
PLATFORM_ADMIN = "platform-team@example.com"


def customer_document(
    facility: Mapping[str, Any],
    notes: Mapping[str, Any],
    *,
    student_id: str,
    wifi: bool = True,
    **overrides: Any,
) -> dict[str, Any]:
    """A customer file (as parsed YAML) for a seeded facility and its notes workspace."""
    document = sandbox_customer_document(facility, notes)
    document["student_id"] = student_id
    document["platform_admins"] = [PLATFORM_ADMIN]
    if not wifi:
        document["wifi"] = []
    document.update(overrides)
    return document


def synthetic_step(
    number: int,
    kind: StepKind,
    check: Check,
    *,
    name: str = "step",
    title: str | None = None,
    routes: frozenset[str] = BOTH_ROUTES,
    **handlers: Any,
) -> Step:
    """A made-up step ``<name>-<number>`` of ``kind`` (``handlers``: the step's ``apply``
    and ``describe``)."""
    return Step(
        number=number,
        id=f"{name}-{number}",
        title=title or f"Step {number}",
        kind=kind,
        routes=routes,
        check=check,
        **handlers,
    )


def customer_file(enrolled: EnrolledSandbox, **overrides: Any) -> CustomerFile:
    """The enrolled customer's file (inline secrets: a test document, resolved as given)."""
    document = customer_document(
        enrolled.facility,
        enrolled.notion_ground_truth,
        student_id=enrolled.student_id,
        **overrides,
    )
    return parse_customer_file(document, env={})


@dataclass
class StepSandbox(EnrolledSandbox):
    """An enrolled customer, and the gateway of the process (every booking-system request)."""

    gateway: Gateway | None = None


def onboarding_context(
    enrolled: StepSandbox, file: CustomerFile | None = None, **options: Any
) -> OnboardingContext:
    """A context of one onboarding run on the enrolled customer's services and gateway.

    Its run takes the whole runbook (the runner sets the steps it takes the same way).
    """
    services = enrolled.services
    assert enrolled.gateway is not None
    ctx = OnboardingContext(
        file=file or customer_file(enrolled),
        customers=services,
        facilities=services.facilities,
        gateway=enrolled.gateway,
        knowledge=KnowledgeSync(
            services,
            KnowledgeSyncRecords(services.sessions, enrolled.clock),
            clock=enrolled.clock,
            sleep=enrolled.sleep,
        ),
        settings=enrolled.settings,
        clock=enrolled.clock,
        **options,
    )
    ctx.run.steps = STEPS
    return ctx


@asynccontextmanager
async def step_sandbox(
    database_url: str, *, gateway_port: int | None = None, **options: Any
) -> AsyncIterator[StepSandbox]:
    """An enrolled customer whose settings name a gateway URL (served or not), and a gateway."""
    port = gateway_port or free_port()
    overrides = {"gateway_public_url": f"http://127.0.0.1:{port}/"}
    overrides.update(options.pop("settings_overrides", {}))
    async with enrolled_sandbox(database_url, settings_overrides=overrides, **options) as enrolled:
        copied = {f.name: getattr(enrolled, f.name) for f in fields(enrolled)}
        yield StepSandbox(**copied, gateway=enrolled.container.gateway.gateway)


@asynccontextmanager
async def live_gateway(settings: Settings, app: Any, clock: Any) -> AsyncIterator[str]:
    """The gateway (same database and vault as ``settings``) served by uvicorn on loopback."""
    url = (settings.gateway_public_url or "").rstrip("/")
    port = int(url.rsplit(":", 1)[1])
    kross_http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=SANDBOX_URL)
    opened = open_container(settings, kross_http=kross_http, clock=clock)
    async with kross_http, opened as container:
        app = create_app(settings, container=container)
        async with serving_app(app, port):
            yield url


def assistant_routes(enrolled: EnrolledSandbox) -> Counter[str]:
    """Admitted platform requests by route so far."""
    return Counter(enrolled.sandbox.assistant.stats.requests_by_route)


def assistant_writes(before: Counter[str], after: Counter[str]) -> dict[str, int]:
    """Write requests admitted between two tallies, by route."""
    delta = after - before
    return {route: n for route, n in delta.items() if route.startswith(WRITE_METHODS)}


def assistant_writes_since(enrolled: EnrolledSandbox, before: Counter[str]) -> dict[str, int]:
    """The platform writes since ``before`` (see :func:`assistant_writes`)."""
    return assistant_writes(before, assistant_routes(enrolled))


async def run_step(
    ctx: OnboardingContext, check: Any, apply: Any | None = None
) -> tuple[StepResult, StepResult]:
    """check → (apply when not done) → check, as the runner does; (first, last) results."""
    first: StepResult = await check(ctx)
    if first.done or apply is None or first.stop:
        return first, first
    await apply(ctx)
    last: StepResult = await check(ctx)
    return first, last


async def workspace_of(enrolled: EnrolledSandbox) -> str:
    """The enrolled customer's workspace id."""
    context = await enrolled.context()
    assert context.workspace_id is not None
    return context.workspace_id
