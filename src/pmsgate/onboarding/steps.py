"""The onboarding steps of spec §4.3: what a step is, what it returns, and the registry.

A step is "binary: done or not done". Each has a ``check`` (reads only, cheap,
safe to call on every run, never writes upstream or to the database) and, for
``auto`` steps, an ``apply`` that does it (the runner calls check → apply → check,
so apply runs only when the step is not done, and a finished step is never done
twice). ``check`` steps only verify; ``manual`` steps are done by a person who
records evidence with ``pmsgate onboard confirm``.

How the runner reads a :class:`StepResult` (see ``runner.py``):

- ``done`` → recorded, next step.
- ``stop`` (any kind) → recorded, the run stops here with ``message`` and ``fix``.
- ``waiting_for`` set (any kind, e.g. an ``auto`` step that needs WiFi credentials
  a person must give) → recorded as waiting for a person; ``apply`` is NOT called;
  the run continues (a person never blocks what the machine can do).
- otherwise ``auto`` → apply, check again; still not done → the run FAILS here.
- otherwise ``check`` → recorded as not done; the run continues.

Exceptions raised by check/apply are caught by the runner and fail the run at
that step with the error's code and message (so raise :class:`pmsgate.errors`
errors with a clear message and hint; never put a secret in one).

``ctx.state`` keys set by the setup steps, for later steps of the same run:
``booking_system_authenticated`` (bool, step 1), ``notes_apartment_pages`` (int,
step 1), ``results`` (step id → the StepResult recorded in this run).

:func:`all_steps` collects the 17 steps in order from the step modules:
``steps_setup`` (1-5, 8), ``steps_provisioning`` (6, 7), ``steps_knowledge``
(9-14), ``steps_channels`` (15, 16) and ``steps_route_b`` (17). A module not
written yet is stood in for by placeholders that check → not done
("not implemented").
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import date
from enum import StrEnum
from typing import Any

from pmsgate.clock import Clock
from pmsgate.config import Settings
from pmsgate.customers.context import CustomerContext, CustomerServices
from pmsgate.gateway.facilities import FacilityService
from pmsgate.knowledge.sync import KnowledgeSync
from pmsgate.onboarding.customer_file import CustomerFile
from pmsgate.pms.client import PmsClient

ROUTE_A = "A"
ROUTE_B = "B"
BOTH_ROUTES: frozenset[str] = frozenset({ROUTE_A, ROUTE_B})
ONLY_A: frozenset[str] = frozenset({ROUTE_A})
ONLY_B: frozenset[str] = frozenset({ROUTE_B})


class StepKind(StrEnum):
    """``auto``: done and verified; ``check``: verified only; ``manual``: done by a person."""

    AUTO = "auto"
    CHECK = "check"
    MANUAL = "manual"


@dataclass(frozen=True)
class StepResult:
    """The outcome of one check: done or not, with JSON-able evidence (never a secret)."""

    done: bool
    evidence: dict[str, Any] = field(default_factory=dict)
    message: str = ""  # one line for the checklist
    stop: bool = False  # stop the run here (a failed prerequisite, Route "stop")
    fix: str | None = None  # what a person must do to unblock (shown with stop / manual)
    waiting_for: str | None = None  # manual steps: what a person must do
    due: date | None = None  # manual steps with a lead time


@dataclass(frozen=True)
class Step:
    """One step of spec §4.3."""

    number: int  # 1..17 (spec §4.3)
    id: str  # kebab-case, stable: the key of the step's results and of `confirm`
    title: str
    kind: StepKind
    routes: frozenset[str]  # which routes run it; step 9 decides the route
    check: Callable[[OnboardingContext], Awaitable[StepResult]]
    apply: Callable[[OnboardingContext], Awaitable[None]] | None = None  # AUTO only
    describe: Callable[[OnboardingContext], Awaitable[str]] | None = None  # --dry-run
    # Manual sub-items a person confirms one by one (`confirm … --item ID`): id → what to do.
    items: tuple[tuple[str, str], ...] = ()

    @property
    def item_ids(self) -> tuple[str, ...]:
        """The ids of the step's confirmable sub-items."""
        return tuple(item for item, _ in self.items)


class OnboardingContext:
    """One onboarding run for one customer: its file, the services, and scratch state."""

    def __init__(
        self,
        *,
        file: CustomerFile,
        customers: CustomerServices,
        facilities: FacilityService,
        pms: PmsClient,
        knowledge: KnowledgeSync,
        settings: Settings,
        clock: Clock,
        dry_run: bool = False,
        route: str | None = None,
        run_id: str | None = None,
        manual_evidence: dict[str, dict[str, Any]] | None = None,
        previous: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.file = file
        self.customers = customers
        self.facilities = facilities
        self.pms = pms
        self.knowledge = knowledge
        self.settings = settings
        self.clock = clock
        self.route = route  # set by step 9: "A" | "B" | None
        self.dry_run = dry_run
        self.run_id = run_id
        # Evidence a person recorded with `confirm`, per step id (the latest confirmation), as
        # {"evidence": text, "confirmed_at": iso, "by": name} — or, for a step with items,
        # {"items": {item: {"evidence", "confirmed_at", "by"}}}. Checks of manual steps (and
        # of automatable steps that wait for a person) read it.
        self.manual_evidence: dict[str, dict[str, Any]] = manual_evidence or {}
        # The evidence of the latest recorded result per step id, from earlier runs.
        self.previous: dict[str, dict[str, Any]] = previous or {}
        self.state: dict[str, Any] = {}  # scratch shared between the steps of one run

    @property
    def student_id(self) -> str:
        """The customer's student_id."""
        return self.file.student_id

    async def customer_context(self) -> CustomerContext:
        """Everything stored about the customer now (re-read: steps change it)."""
        return await self.customers.context(self.file.student_id)

    def __repr__(self) -> str:
        return f"OnboardingContext(student_id={self.student_id!r}, route={self.route!r})"


# --- the registry ------------------------------------------------------------------------------

# (number, id, title, kind, routes) of every step, in order: the placeholders' source and
# the contract the step modules fill in.
STEP_OUTLINE: tuple[tuple[int, str, str, StepKind, frozenset[str]], ...] = (
    (1, "prerequisites", "Prerequisites", StepKind.CHECK, BOTH_ROUTES),
    (2, "allowlist", "Allowlist entry", StepKind.AUTO, BOTH_ROUTES),
    (3, "workspace-configuration", "Workspace configuration", StepKind.AUTO, BOTH_ROUTES),
    (4, "notes-integration", "Notes integration connected", StepKind.AUTO, BOTH_ROUTES),
    (5, "workspace", "Workspace created, id read back", StepKind.AUTO, BOTH_ROUTES),
    (6, "custom-tools", "The six custom tools, gateway key secret", StepKind.AUTO, BOTH_ROUTES),
    (7, "guest-agent", "Guest agent configured", StepKind.AUTO, BOTH_ROUTES),
    (8, "platform-admin", "Platform-team Admin in the workspace", StepKind.AUTO, BOTH_ROUTES),
    (9, "route-choice", "Route choice", StepKind.CHECK, BOTH_ROUTES),
    (10, "listings-count", "Listings count", StepKind.CHECK, ONLY_A),
    (11, "apartment-registry", "Apartment registry rows", StepKind.AUTO, ONLY_A),
    (12, "knowledge-dry-run", "Knowledge dry run", StepKind.CHECK, ONLY_A),
    (13, "templates", "Templates patched", StepKind.AUTO, ONLY_A),
    (14, "knowledge-commit", "Knowledge commit", StepKind.AUTO, ONLY_A),
    (
        15,
        "channels",
        "Channels (WhatsApp, voice agent, final checks)",
        StepKind.MANUAL,
        BOTH_ROUTES,
    ),
    (16, "onboarding-message", "Onboarding message, baseline usage", StepKind.AUTO, BOTH_ROUTES),
    (17, "route-b-quick-setup", "Route B quick setup", StepKind.AUTO, ONLY_B),
)

# The modules that define steps, each exposing ``STEPS: list[Step]``.
STEP_MODULES = (
    "pmsgate.onboarding.steps_setup",
    "pmsgate.onboarding.steps_provisioning",
    "pmsgate.onboarding.steps_knowledge",
    "pmsgate.onboarding.steps_channels",
    "pmsgate.onboarding.steps_route_b",
)


def placeholder(number: int) -> Step:
    """A stand-in for a step whose module is not written yet: never done."""
    _, step_id, title, kind, routes = STEP_OUTLINE[number - 1]

    async def check(_ctx: OnboardingContext) -> StepResult:
        return StepResult(done=False, message="not implemented", evidence={"placeholder": True})

    async def apply(_ctx: OnboardingContext) -> None:
        return None

    async def describe(_ctx: OnboardingContext) -> str:
        return "nothing (not implemented)"

    return Step(
        number=number,
        id=step_id,
        title=title,
        kind=kind,
        routes=routes,
        check=check,
        apply=apply if kind is StepKind.AUTO else None,
        describe=describe if kind is StepKind.AUTO else None,
    )


def _module_steps(name: str) -> list[Step]:
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name == name:
            return []  # not written yet: placeholders stand in
        raise
    steps = getattr(module, "STEPS", [])
    return [step for step in steps if isinstance(step, Step)]


def all_steps() -> list[Step]:
    """The 17 steps of spec §4.3 in order (placeholders for steps not written yet)."""
    found: dict[int, Step] = {}
    for name in STEP_MODULES:
        for step in _module_steps(name):
            expected = STEP_OUTLINE[step.number - 1]
            if step.number in found or step.id != expected[1]:
                raise RuntimeError(f"step {step.number} ({step.id}) of {name} clashes")
            found[step.number] = step
    return [found.get(number) or placeholder(number) for number in range(1, 18)]


def step_by_id(step_id: str) -> Step | None:
    """The step with this id (or number as text), or None."""
    for step in all_steps():
        if step.id == step_id or str(step.number) == step_id:
            return step
    return None
