"""What the admin console shows about every customer, read in a constant number of queries.

:class:`AdminOverview` reads the whole fleet with the aggregate queries of
:class:`pmsgate.storage.admin_overview.AdminOverviewRepository` (one statement each, however
many customers) and turns it into one :class:`OverviewRow` per customer: its integration
status, route, onboarding progress and the steps waiting for a person, the last knowledge
sync, the booking-system budget of the last 24 hours, and its :class:`Problem` list. The
overview's totals are over every customer, so the fleet is read whole and searched, filtered,
sorted and paged in memory (:func:`select_rows`): a few thousand small rows, no per-customer
query. :class:`OverviewQuery` is the page's query string, validated (a bad value is a 422
``invalid_overview_parameter`` naming the allowed values, never a 500).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import Clock
from pmsgate.gateway.metrics import FacilitySnapshot
from pmsgate.onboarding.registry import STEPS
from pmsgate.storage.admin_overview import (
    AdminOverviewRepository,
    CustomerSummaryRow,
    RunSummary,
    StepSummary,
    SyncSummary,
)
from pmsgate.storage.gateway_usage import hour_start
from pmsgate.storage.job_runs import JobRunRepository, JobRunView
from pmsgate.web.query_params import ParameterRules

# A facility that spent this share of its daily budget needs attention, in percent.
BUDGET_WARNING_PCT = 80.0
# The metrics snapshot's remaining budget is used while it is younger than this.
SNAPSHOT_TRUSTED_FOR = timedelta(minutes=10)

NOT_LINKED = "not linked"
STATUSES = ("connected", "error", NOT_LINKED)
ROUTES = ("A", "B", "none")
SORTS = ("name", "student_id", "status", "route", "progress", "budget", "last_sync", "created")
ORDERS = ("asc", "desc")
PER_PAGE_CHOICES = (25, 50, 100, 200)
DEFAULT_PER_PAGE = 50
MAX_QUERY = 100

_STEP_BY_ID = {step.id: step for step in STEPS}

# The kinds of problem a customer can have, as the overview names them.
PROBLEM_LABELS = {
    "pms_error": "booking system in error",
    "overdue_step": "manual step past due",
    "registry": "registry problem",
    "budget": "budget nearly spent",
}


@dataclass(frozen=True)
class Problem:
    """Something about a customer a person must look at."""

    kind: str
    message: str

    @property
    def label(self) -> str:
        """The kind as the overview words it."""
        return PROBLEM_LABELS.get(self.kind, self.kind)


@dataclass(frozen=True)
class WaitingStep:
    """A step waiting for a person, with its due date."""

    number: int
    step_id: str
    title: str
    due: date | None
    waiting_for: str | None
    overdue: bool


# The fields of an overview row that are the customer's as stored.
_AS_STORED = (
    "student_id",
    "name",
    "email",
    "created_at",
    "workspace_slug",
    "hotel_id",
    "facility_name",
)


@dataclass(frozen=True)
class OverviewRow:
    """One customer on the admin overview."""

    student_id: str
    name: str
    email: str
    created_at: datetime
    workspace_slug: str | None
    hotel_id: str | None
    facility_name: str | None
    status: str
    pms_error: str | None
    status_since: datetime | None
    route: str | None
    run_status: str | None
    steps_done: int
    steps_applicable: int
    waiting: tuple[WaitingStep, ...]
    last_sync: SyncSummary | None
    budget_used: int | None
    budget_allowed: int | None
    problems: tuple[Problem, ...] = ()

    @property
    def display_name(self) -> str:
        """The customer's name, else its student_id."""
        return self.name or self.student_id

    @property
    def status_class(self) -> str:
        """The status as a CSS class (``not_linked``)."""
        return self.status.replace(" ", "_")

    @property
    def onboarded(self) -> bool:
        """Whether onboarding recorded anything."""
        return self.steps_applicable > 0 and self.run_status is not None

    @property
    def progress(self) -> float:
        """The share of the route's steps done (0 before onboarding)."""
        return self.steps_done / self.steps_applicable if self.steps_applicable else 0.0

    @property
    def overdue(self) -> tuple[WaitingStep, ...]:
        """The waiting steps past their due date."""
        return tuple(step for step in self.waiting if step.overdue)

    @property
    def budget_percent(self) -> float | None:
        """The share of the daily budget spent in the last 24 hours, in percent."""
        if self.budget_used is None or not self.budget_allowed:
            return None
        return 100.0 * self.budget_used / self.budget_allowed

    def matches(self, text: str) -> bool:
        """Whether the search text is in its name, e-mail, student id, facility or workspace."""
        needle = text.casefold()
        haystack = (
            self.name,
            self.email,
            self.student_id,
            self.hotel_id or "",
            self.facility_name or "",
            self.workspace_slug or "",
        )
        return any(needle in value.casefold() for value in haystack)


@dataclass(frozen=True)
class Fleet:
    """Every customer's row and the fleet-wide problems, read at one moment."""

    rows: tuple[OverviewRow, ...]
    failing_jobs: tuple[JobRunView, ...]
    read_at: datetime

    @property
    def attention(self) -> tuple[OverviewRow, ...]:
        """The customers with at least one problem."""
        return tuple(row for row in self.rows if row.problems)

    def totals(self) -> Totals:
        """The overview's counts, over every customer."""
        statuses = Counter(row.status for row in self.rows)
        routes = Counter(row.route or "none" for row in self.rows)
        return Totals(
            customers=len(self.rows),
            by_status={status: statuses.get(status, 0) for status in STATUSES},
            by_route={route: routes.get(route, 0) for route in ROUTES},
            waiting_customers=sum(1 for row in self.rows if row.waiting),
            waiting_steps=sum(len(row.waiting) for row in self.rows),
            overdue_steps=sum(len(row.overdue) for row in self.rows),
            attention=len(self.attention),
            failing_jobs=len(self.failing_jobs),
        )


@dataclass(frozen=True)
class Totals:
    """How many customers, by status and route; waiting steps; customers needing attention."""

    customers: int
    by_status: dict[str, int]
    by_route: dict[str, int]
    waiting_customers: int
    waiting_steps: int
    overdue_steps: int
    attention: int
    failing_jobs: int


class AdminOverview:
    """Reads the fleet for the admin console (one per request; the queries are constant)."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        clock: Clock,
        *,
        snapshot: FacilitySnapshot | None = None,
        registry_problems: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self._sessions = sessions
        self._clock = clock
        self._snapshot = snapshot
        self._registry_problems = registry_problems or {}

    async def fleet(self) -> Fleet:
        """Every customer's row, and the scheduled jobs whose latest run failed."""
        now = self._clock.now()
        since = hour_start(now) - timedelta(hours=23)  # the 24 hourly rows up to now
        async with self._sessions() as session:
            repository = AdminOverviewRepository(session)
            customers = await repository.customers()
            runs = await repository.last_runs()
            steps = await repository.latest_steps()
            syncs = await repository.last_syncs()
            calls = await repository.upstream_calls_since(since)
            jobs = await JobRunRepository(session).latest_by_job()
        by_student: dict[str, list[StepSummary]] = {}
        for step in steps:
            by_student.setdefault(step.student_id, []).append(step)
        remaining = self._remaining_today(now)
        rows = tuple(
            self._row(
                customer,
                runs.get(customer.student_id),
                by_student.get(customer.student_id, []),
                syncs.get(customer.student_id),
                calls,
                remaining,
                now.date(),
            )
            for customer in customers
        )
        failing = tuple(
            sorted(
                (run for run in jobs.values() if run.status == "failed"),
                key=lambda run: run.job,
            )
        )
        return Fleet(rows=rows, failing_jobs=failing, read_at=now)

    def _remaining_today(self, now: datetime) -> dict[str, int]:
        """The day window's remaining budget per hotel from a recent metrics snapshot."""
        snapshot = self._snapshot
        if snapshot is None or snapshot.taken_at is None:
            return {}
        if now - snapshot.taken_at > SNAPSHOT_TRUSTED_FOR:
            return {}
        return {
            state.hotel_id: state.remaining["day"]
            for state in snapshot.facilities
            if "day" in state.remaining
        }

    def _row(
        self,
        customer: CustomerSummaryRow,
        run: RunSummary | None,
        steps: list[StepSummary],
        sync: SyncSummary | None,
        calls: Mapping[str, int],
        remaining: Mapping[str, int],
        today: date,
    ) -> OverviewRow:
        route = run.route if run is not None else None
        latest = {step.step_id: step for step in steps}
        done = applicable = 0
        waiting: list[WaitingStep] = []
        for step in STEPS:
            if route is not None and route not in step.routes:
                continue
            applicable += 1
            result = latest.get(step.id)
            if result is None:
                continue
            if result.status == "done":
                done += 1
            elif result.status == "waiting":
                waiting.append(
                    WaitingStep(
                        number=step.number,
                        step_id=step.id,
                        title=step.title,
                        due=result.due,
                        waiting_for=result.waiting_for,
                        overdue=result.due is not None and result.due < today,
                    )
                )
        if run is None and not latest:
            applicable = 0
        status = customer.pms_status or NOT_LINKED
        used: int | None = None
        allowed = customer.limit_per_day
        if customer.hotel_id is not None and allowed:
            used = calls.get(customer.hotel_id, 0)
            if customer.hotel_id in remaining:
                used = max(used, allowed - remaining[customer.hotel_id])
        row = OverviewRow(
            **{name: getattr(customer, name) for name in _AS_STORED},
            status=status,
            pms_error=customer.pms_error if status == "error" else None,
            status_since=customer.pms_status_changed_at,
            route=route,
            run_status=run.status if run is not None else None,
            steps_done=done,
            steps_applicable=applicable,
            waiting=tuple(waiting),
            last_sync=sync,
            budget_used=used if customer.hotel_id is not None else None,
            budget_allowed=allowed if customer.hotel_id is not None else None,
        )
        return replace(row, problems=self._problems(row))

    def _problems(self, row: OverviewRow) -> tuple[Problem, ...]:
        problems: list[Problem] = []
        if row.status == "error":
            problems.append(
                Problem("pms_error", row.pms_error or "The booking system refused the access.")
            )
        for step in row.overdue:
            due = step.due.isoformat() if step.due else ""
            problems.append(
                Problem("overdue_step", f"Step {step.number} ({step.title}) was due {due}.")
            )
        for message in self._registry_problems.get(row.student_id, ()):
            problems.append(Problem("registry", message))
        percent = row.budget_percent
        if percent is not None and percent >= BUDGET_WARNING_PCT:
            problems.append(
                Problem(
                    "budget",
                    f"{row.budget_used:,} of {row.budget_allowed:,} booking-system requests "
                    f"of the daily budget used in the last 24 hours ({percent:.0f} %).",
                )
            )
        return tuple(problems)


# --- the overview's query string -----------------------------------------------------------------


_RULES = ParameterRules(
    code="invalid_overview_parameter", elsewhere="Or open /console for the whole list."
)
_bad = _RULES.bad
_choice = _RULES.choice


def _positive(params: Mapping[str, str], name: str, default: int) -> int:
    value = params.get(name, "").strip()
    if not value:
        return default
    if not value.isdigit() or int(value) < 1 or len(value) > 6:
        raise _bad(name, value, ("a whole number from 1",))
    return int(value)


@dataclass(frozen=True)
class OverviewQuery:
    """The overview's search, filters, sort and page, as its query string gives them."""

    q: str = ""
    status: str = ""
    route: str = ""
    waiting: str = ""
    problems: bool = False
    sort: str = "name"
    order: str = "asc"
    page: int = 1
    per_page: int = DEFAULT_PER_PAGE

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> OverviewQuery:
        """The query of a request (``invalid_overview_parameter`` for a value out of range)."""
        q = params.get("q", "").strip()
        if len(q) > MAX_QUERY:
            raise _bad("q", q, (f"at most {MAX_QUERY} characters",))
        given = {**params, "status": params.get("status", "").strip().replace(" ", "_")}
        status = _choice(given, "status", ("connected", "error", "not_linked"), "")
        waiting_choices = ("any", "overdue", *(step.id for step in STEPS))
        per_page = _positive(params, "per_page", DEFAULT_PER_PAGE)
        if per_page not in PER_PAGE_CHOICES:
            raise _bad("per_page", str(per_page), tuple(str(n) for n in PER_PAGE_CHOICES))
        problems = _choice(params, "problems", ("yes", "no"), "no")
        return cls(
            q=q,
            status=NOT_LINKED if status == "not_linked" else status,
            route=_choice(params, "route", ROUTES, ""),
            waiting=_choice(params, "waiting", waiting_choices, ""),
            problems=problems == "yes",
            sort=_choice(params, "sort", SORTS, "name"),
            order=_choice(params, "order", ORDERS, "asc"),
            page=_positive(params, "page", 1),
            per_page=per_page,
        )

    def params(self, **changes: Any) -> dict[str, str]:
        """The non-default parameters of this query with ``changes``, for a link."""
        query = replace(self, **changes)
        values = {
            "q": query.q,
            "status": query.status.replace(" ", "_"),
            "route": query.route,
            "waiting": query.waiting,
            "problems": "yes" if query.problems else "",
            "sort": query.sort if query.sort != "name" else "",
            "order": query.order if query.order != "asc" else "",
            "page": str(query.page) if query.page != 1 else "",
            "per_page": str(query.per_page) if query.per_page != DEFAULT_PER_PAGE else "",
        }
        return {name: value for name, value in values.items() if value}

    def url(self, **changes: Any) -> str:
        """``/console`` with this query (and ``changes``)."""
        params = self.params(**changes)
        return "/console" + ("?" + urlencode(params) if params else "")

    def sort_url(self, column: str) -> str:
        """The link of a column heading: sort by it (again: the other way), first page."""
        order = "desc" if self.sort == column and self.order == "asc" else "asc"
        return self.url(sort=column, order=order, page=1)

    @property
    def filtered(self) -> bool:
        """Whether a search or a filter narrows the list."""
        return bool(self.q or self.status or self.route or self.waiting or self.problems)


def _sort_key(sort: str) -> Callable[[OverviewRow], Any]:
    keys: dict[str, Callable[[OverviewRow], Any]] = {
        "name": lambda row: (row.display_name.casefold(), row.student_id),
        "student_id": lambda row: row.student_id,
        "status": lambda row: (row.status, row.display_name.casefold()),
        "route": lambda row: (row.route or "~", row.display_name.casefold()),
        "progress": lambda row: (row.progress, row.display_name.casefold()),
        "budget": lambda row: (row.budget_percent, row.student_id),
        "last_sync": lambda row: (
            row.last_sync.created_at if row.last_sync else None,
            row.student_id,
        ),
        "created": lambda row: (row.created_at, row.student_id),
    }
    return keys[sort]


def _sorted(rows: list[OverviewRow], query: OverviewQuery) -> list[OverviewRow]:
    """Sorted by the query; rows without the value (no facility, never synced) last either way."""
    key = _sort_key(query.sort)
    present = [row for row in rows if key(row)[0] is not None]
    missing = [row for row in rows if key(row)[0] is None]
    present.sort(key=key, reverse=query.order == "desc")
    missing.sort(key=lambda row: row.student_id)
    return present + missing


@dataclass(frozen=True)
class Selection:
    """One page of the rows a query selects, and how many it selects in all."""

    rows: tuple[OverviewRow, ...]
    matched: int
    page: int
    pages: int
    notice: str | None = None
    first: int = 0
    last: int = 0
    pages_shown: tuple[int, ...] = field(default_factory=tuple)


def _keep(row: OverviewRow, query: OverviewQuery) -> bool:
    if query.q and not row.matches(query.q):
        return False
    if query.status and row.status != query.status:
        return False
    if query.route and (row.route or "none") != query.route:
        return False
    if query.waiting == "any" and not row.waiting:
        return False
    if query.waiting == "overdue" and not row.overdue:
        return False
    if query.waiting not in ("", "any", "overdue") and not any(
        step.step_id == query.waiting for step in row.waiting
    ):
        return False
    return not (query.problems and not row.problems)


def select_rows(fleet: Fleet, query: OverviewQuery) -> Selection:
    """Search, filter, sort and page the fleet's rows (a page past the end: the last one)."""
    kept = _sorted([row for row in fleet.rows if _keep(row, query)], query)
    pages = max(1, -(-len(kept) // query.per_page))
    page, notice = query.page, None
    if page > pages:
        notice = f"There is no page {page}: showing page {pages}, the last one."
        page = pages
    start = (page - 1) * query.per_page
    shown = tuple(kept[start : start + query.per_page])
    window = sorted({1, pages, *range(max(1, page - 2), min(pages, page + 2) + 1)})
    return Selection(
        rows=shown,
        matched=len(kept),
        page=page,
        pages=pages,
        notice=notice,
        first=start + 1 if shown else 0,
        last=start + len(shown),
        pages_shown=tuple(window),
    )


def step_choices() -> list[tuple[str, str]]:
    """The steps a customer can wait on (manual and check steps first), for the filter."""
    return [(step.id, f"{step.number}. {step.title}") for step in STEPS]
