"""What an onboarding step is (docs/requirements.md R20), what it returns, the context it runs in.

A step is "binary: done or not done", declared once as a :class:`Step` (number, id,
title, kind, routes, ``check``, ``apply``, its manual items and what a person does
when the platform has no API for it) in the module that implements it; the runbook
is the explicit tuple of :data:`pmsgate.onboarding.registry.STEPS`.

Each step has a ``check`` (reads only, cheap, safe to call on every run, never writes
upstream or to the database) and, for ``auto`` steps, an ``apply`` that does it (the
runner calls check → apply → check, so apply runs only when the step is not done,
and a finished step is never done twice). ``check`` steps only verify; ``manual``
steps are done by a person who records evidence with ``pmsgate onboard confirm``.

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

What the steps of one run hand each other is the typed :class:`RunState` of
``ctx.run`` — named fields, each saying which step sets it and which reads it. It
lives as long as the run: what is stored is each step's result and evidence
(``storage/onboarding.py``), which later runs read as ``ctx.previous``.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import date
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pmsgate.audit.actions import Actor
from pmsgate.clock import Clock
from pmsgate.config import Settings
from pmsgate.customers.context import CustomerContext, CustomerServices
from pmsgate.gateway.facility_service import FacilityService
from pmsgate.gateway.service import Gateway
from pmsgate.knowledge.sync import KnowledgeSync
from pmsgate.onboarding.accounts import ConsoleAccounts
from pmsgate.onboarding.customer_file import CustomerFile

if TYPE_CHECKING:
    import datetime as dt

    from pmsgate.integrations.notion.models import Block
    from pmsgate.onboarding.booking import BookingSystemApartments, VerifiedToken

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
class Problem:
    """Why something is not as it must be, and what a person does about it."""

    reason: str
    fix: str | None = None


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
class ManualItem:
    """One thing a person does and confirms on its own (``confirm … --item ID``)."""

    id: str  # kebab-case, stable: the key of its confirmation
    text: str  # what a person does
    dated: bool = False  # the step's due date is this item's lead time (kept while it waits)


@dataclass(frozen=True)
class PersonTask:
    """What a person does when the platform offers no API for a step, and the evidence to
    record (``Step.by_hand``; :func:`pmsgate.onboarding.person_tasks.person_task` uses it)."""

    instructions: str
    evidence: str


Check = Callable[["OnboardingContext"], Awaitable[StepResult]]
Apply = Callable[["OnboardingContext"], Awaitable[None]]
Describe = Callable[["OnboardingContext"], Awaitable[str]]

_STEP_ID = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


class StepDeclarationError(ValueError):
    """A step (or the runbook) declared inconsistently: raised at import, never at run time."""


@dataclass(frozen=True, kw_only=True)
class Step:
    """One step (docs/requirements.md R21), declared once: what runner, checklist and CLI need."""

    number: int  # the one place a step's number is written: the runbook is ordered by it
    id: str  # kebab-case, stable: the key of the step's results and of `confirm`
    title: str
    kind: StepKind
    routes: frozenset[str]  # which routes run it; step 9 decides the route
    check: Check
    apply: Apply | None = None  # AUTO steps only (and every AUTO step has one)
    describe: Describe | None = None  # --dry-run: what apply would do
    # Manual sub-items a person confirms one by one (`confirm … --item ID`).
    items: tuple[ManualItem, ...] = ()
    # What a person does instead when the platform refuses the step's endpoint (person_tasks).
    by_hand: PersonTask | None = None
    # Ids of later steps this one runs after (its number stays the runbook's): step 16's
    # message waits for step 17's test conversation on Route B. See execution_order.
    runs_after: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not _STEP_ID.fullmatch(self.id):
            raise StepDeclarationError(f"step id {self.id!r} is not kebab-case")
        if (self.kind is StepKind.AUTO) != (self.apply is not None):
            raise StepDeclarationError(f"step {self.id}: an apply exactly when the kind is auto")
        item_ids = [item.id for item in self.items]
        if len(set(item_ids)) != len(item_ids):
            raise StepDeclarationError(f"step {self.id}: item ids repeat: {item_ids}")

    @property
    def item_ids(self) -> tuple[str, ...]:
        """The ids of the step's confirmable sub-items."""
        return tuple(item.id for item in self.items)

    def item(self, item_id: str) -> ManualItem | None:
        """The sub-item with this id, or None."""
        return next((item for item in self.items if item.id == item_id), None)


def runbook(*steps: Step) -> tuple[Step, ...]:
    """``steps`` as a runbook, ordered by their numbers: ids unique, the numbers 1, 2, 3, …
    each once, no gap (else an error, at once). A step's number is only its ``number``."""
    seen: set[str] = set()
    for step in steps:
        if step.id in seen:
            raise StepDeclarationError(f"step id {step.id} appears twice in the runbook")
        seen.add(step.id)
    for number in sorted({step.number for step in steps}):
        holders = [step.id for step in steps if step.number == number]
        if len(holders) > 1:
            raise StepDeclarationError(f"step number {number} is used twice: {', '.join(holders)}")
    missing = sorted(set(range(1, len(steps) + 1)) - {step.number for step in steps})
    if missing:
        raise StepDeclarationError(
            f"the runbook has no step {missing[0]}: number its {len(steps)} steps 1 to "
            f"{len(steps)}, once each"
        )
    return tuple(sorted(steps, key=lambda step: step.number))


def execution_order(steps: Sequence[Step]) -> list[Step]:
    """The order a run takes: the runbook's, but a step with ``runs_after`` moved after those.

    The numbers (the checklist, ``confirm``) stay the runbook's; only the run goes 15, 17, 16.
    """
    order = list(steps)
    for step in [s for s in steps if s.runs_after]:
        targets = set(step.runs_after)
        last = max((i for i, s in enumerate(order) if s.id in targets), default=None)
        if last is not None and last > order.index(step):
            order.remove(step)
            order.insert(last, step)  # `last` moved down by one: right after the target
    return order


def find_step(steps: Sequence[Step], ref: str) -> Step | None:
    """The step with this id (or number as text), or None."""
    ref = ref.strip()
    return next((step for step in steps if ref in (step.id, str(step.number))), None)


@dataclass(frozen=True)
class CommitSummary:
    """What step 14's commit reported in this run (shown by its re-check)."""

    counters: dict[str, int]
    nodes: int
    wifi_nodes: dict[str, bool]
    errors: dict[str, str]  # room type → error code

    def evidence(self) -> dict[str, Any]:
        """JSON-ready, for the step's evidence."""
        return asdict(self)


@dataclass
class RunState:
    """What the steps of one run hand each other (for this run only; nothing here is stored)."""

    # Step id → the result recorded for it in this run (set by the runner; step 16 reads it).
    results: dict[str, StepResult] = field(default_factory=dict)
    # The steps this run takes (the whole runbook from OnboardingServices.context, the run's
    # own from the runner); step 16 checks that every automatable one holds, and refuses to
    # decide without them.
    steps: tuple[Step, ...] = ()
    # Step 1 → step 2's allowlist comment: the live pages of the apartments database.
    notion_apartment_pages: int | None = None
    # Step 1 → step 9: False when the booking system refused the file's credentials.
    booking_system_authenticated: bool | None = None
    # Steps 9, 10: the booking system's apartments, read once per run and facility.
    booking_system_apartments: dict[str, BookingSystemApartments] = field(default_factory=dict)
    # Step 13: each notes page's block tree, read once per run unless edited since.
    notion_trees: dict[str, tuple[dt.datetime | None, list[Block]]] = field(default_factory=dict)
    # Step 13 → step 14: room types whose page waits for WiFi credentials.
    templates_waiting_for_wifi: list[str] = field(default_factory=list)
    # Step 14's apply → its re-check.
    knowledge_commit: CommitSummary | None = None
    # Steps 6, 7, 17: the run's part of every platform write's idempotency key.
    idempotency_run: str | None = None
    # Step 1 → step 3 (and ensure_facility): the token that proved the file's credentials,
    # adopted as the facility's token once registered with them (one upstream session).
    verified: VerifiedToken | None = None


# Who the audit trail names for what the steps change (keys minted and revoked, the
# facility registered): the runbook itself, whoever started it (docs/audit.md).
ONBOARDING_ACTOR = Actor.system("onboarding")


class OnboardingContext:
    """One onboarding run for one customer: its file, the services, and the run's state."""

    def __init__(
        self,
        *,
        file: CustomerFile,
        customers: CustomerServices,
        facilities: FacilityService,
        gateway: Gateway,
        knowledge: KnowledgeSync,
        settings: Settings,
        clock: Clock,
        dry_run: bool = False,
        route: str | None = None,
        run_id: str | None = None,
        manual_evidence: dict[str, dict[str, Any]] | None = None,
        previous: dict[str, dict[str, Any]] | None = None,
        accounts: ConsoleAccounts | None = None,
    ) -> None:
        self.file = file
        self.accounts = accounts  # the customer's console account (step 16); None: unchecked
        self.customers = customers
        self.facilities = facilities
        self.gateway = gateway  # every booking-system request: its limiter and tokens
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
        self.run = RunState()  # what the steps of this run hand each other

    @property
    def student_id(self) -> str:
        """The customer's student_id."""
        return self.file.student_id

    async def customer_context(self) -> CustomerContext:
        """Everything stored about the customer now (re-read: steps change it)."""
        return await self.customers.context(self.file.student_id)

    def __repr__(self) -> str:
        return f"OnboardingContext(student_id={self.student_id!r}, route={self.route!r})"
