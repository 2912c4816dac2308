"""Prometheus metrics of the gateway, on a registry of its own (one per app instance).

What each metric means, the alerts built on them and what to do when one fires:
docs/operations.md, "What to watch". The rules (deploy/prometheus/alerts.yaml) and the
dashboard (deploy/grafana/pmsgate.json) are checked against the names exported here by
tests/gateway/test_metrics_rules.py, so renaming a metric fails a test, not an alert.

Three things here are built for cost, not only for meaning:

- :meth:`GatewayMetrics.observe_request` (called by the one HTTP layer,
  :class:`pmsgate.gateway.http_front.HttpFrontMiddleware`) observes one histogram per
  request, labelled by the route *template* (``/v1/tools/{name}``, never the raw path), the
  method and the status class: bounded label sets, whose children are cached (so are the
  tool-call counter's, :meth:`GatewayMetrics.tool_called`).
- The facility gauges (counts by status, facilities in ``error``, remaining budgets) are
  read from a :class:`FacilitySnapshot`, refreshed at most every ``max_age_s`` seconds
  (60 by default) by a scrape: a scrape never queries every facility's budget.
- Scheduled jobs report each run (:meth:`GatewayMetrics.job_finished`) from the one place
  jobs run, :class:`pmsgate.jobs.scheduler.Scheduler`.
- Every HTTP request to the booking system is timed by the client itself
  (:class:`pmsgate.integrations.kross.client.KrossClient`'s ``observer`` is
  :meth:`GatewayMetrics.observe_upstream`), labelled by operation and one of a few
  outcomes: the time a call waited for a permit is not in it. Knowledge-sync jobs
  (:class:`pmsgate.knowledge.sync_jobs.SyncJobs`) and audit events
  (:class:`pmsgate.audit.trail.AuditTrail`'s ``observer``) report here the same way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime

import anyio
import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pmsgate.version import build_info

log = structlog.get_logger(__name__)

# Seconds: fast cached answers (a few ms) to slow upstream calls and writes (seconds).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED_ROUTE = "unmatched"  # a path no route knows (404s): one label, whatever the path
# How old the facility snapshot may be before a scrape refreshes it.
SNAPSHOT_MAX_AGE_S = 60.0
FACILITY_STATUSES = ("connected", "unverified", "error")
JOB_OUTCOMES = ("succeeded", "failed")
SYNC_MODES = ("dry_run", "commit")
SYNC_OUTCOMES = ("succeeded", "failed", "cancelled")
# Seconds: a knowledge sync takes seconds to many minutes (docs/requirements.md R17.2).
SYNC_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0)


def status_class(status: int) -> str:
    """The status label: ``2xx``, ``3xx``, ``4xx``, ``5xx``; 429 apart (budget refusals)."""
    if status == 429:
        return "429"
    return f"{status // 100}xx"


@dataclass(frozen=True)
class FacilityState:
    """One facility as the snapshot holds it: status and, per window, budget left and limit."""

    hotel_id: str
    status: str
    remaining: Mapping[str, int] = field(default_factory=dict)
    limits: Mapping[str, int] = field(default_factory=dict)


SnapshotLoader = Callable[[], Awaitable[Iterable[FacilityState]]]


class FacilitySnapshot(Collector):
    """The facility gauges, from a snapshot taken at most every ``max_age_s`` seconds.

    Exported: ``pmsgate_facility_status{status}`` (how many facilities in each status, every
    status always present), ``pmsgate_facility_error{hotel_id}`` (1 for each facility in
    ``error`` and only those: the series are as many as the broken integrations, so the
    alert names the customer), ``pmsgate_budget_remaining``, ``pmsgate_budget_used`` and
    ``pmsgate_budget_limit`` ``{hotel_id, window}`` and
    ``pmsgate_facility_snapshot_timestamp_seconds``. A refresh
    that fails keeps the previous snapshot (its timestamp shows its age) and is retried by
    the next scrape.
    """

    def __init__(self, max_age_s: float = SNAPSHOT_MAX_AGE_S) -> None:
        self.max_age_s = max_age_s
        self.facilities: tuple[FacilityState, ...] = ()
        self.taken_at: datetime | None = None
        self._lock = anyio.Lock()

    def is_fresh(self, now: datetime) -> bool:
        """Whether a snapshot taken less than ``max_age_s`` ago is held."""
        return self.taken_at is not None and (now - self.taken_at).total_seconds() < self.max_age_s

    async def refresh(self, now: datetime, load: SnapshotLoader, *, force: bool = False) -> bool:
        """Take a new snapshot with ``load`` unless a fresh one is held; True when taken.

        Concurrent scrapes wait for the one refresh under way instead of starting theirs.
        """
        if not force and self.is_fresh(now):
            return False
        async with self._lock:
            if not force and self.is_fresh(now):
                return False
            try:
                facilities = tuple(await load())
            except Exception as error:  # the metrics stay served, from the previous snapshot
                log.warning("metrics_snapshot_failed", error=type(error).__name__)
                return False
            self.facilities, self.taken_at = facilities, now
            return True

    def describe(self) -> Iterable[Metric]:
        """Nothing: the families are only built when collected (no collect at registration)."""
        return ()

    def collect(self) -> Iterator[Metric]:
        """The gauges of the snapshot held."""
        counts = GaugeMetricFamily(
            "pmsgate_facility_status",
            "Registered facilities by status (from the facility snapshot).",
            labels=["status"],
        )
        by_status = dict.fromkeys(FACILITY_STATUSES, 0)
        for facility in self.facilities:
            by_status[facility.status] = by_status.get(facility.status, 0) + 1
        for status, count in by_status.items():
            counts.add_metric([status], count)
        yield counts
        in_error = GaugeMetricFamily(
            "pmsgate_facility_error",
            "1 for each facility whose integration is in error (only those facilities).",
            labels=["hotel_id"],
        )
        remaining = GaugeMetricFamily(
            "pmsgate_budget_remaining",
            "Upstream requests left in each window, by facility (from the facility snapshot).",
            labels=["hotel_id", "window"],
        )
        used = GaugeMetricFamily(
            "pmsgate_budget_used",
            "Upstream requests spent in each window, by facility (limit - remaining).",
            labels=["hotel_id", "window"],
        )
        limits = GaugeMetricFamily(
            "pmsgate_budget_limit",
            "Upstream requests allowed in each window, by facility.",
            labels=["hotel_id", "window"],
        )
        for facility in self.facilities:
            if facility.status == "error":
                in_error.add_metric([facility.hotel_id], 1)
            for window, left in facility.remaining.items():
                remaining.add_metric([facility.hotel_id, window], left)
                limit = facility.limits.get(window)
                if limit is not None:
                    used.add_metric([facility.hotel_id, window], max(0, limit - left))
            for window, limit in facility.limits.items():
                limits.add_metric([facility.hotel_id, window], limit)
        yield in_error
        yield remaining
        yield used
        yield limits
        taken = GaugeMetricFamily(
            "pmsgate_facility_snapshot_timestamp_seconds",
            "When the facility snapshot was taken (Unix time; 0 before the first one).",
        )
        taken.add_metric([], 0 if self.taken_at is None else self.taken_at.timestamp())
        yield taken


class GatewayMetrics:
    """Counters, gauges and histograms exposed at ``/metrics``."""

    def __init__(self, snapshot_max_age_s: float = SNAPSHOT_MAX_AGE_S) -> None:
        self.registry = CollectorRegistry()
        self._calls_and_upstream()
        self._process_state()
        self._jobs_and_sync()
        self.audit_events = Counter(
            "pmsgate_audit_events",
            "Audit events recorded by this process, by action and outcome.",
            ["action", "outcome"],
            registry=self.registry,
        )
        self.facilities = FacilitySnapshot(snapshot_max_age_s)
        self.registry.register(self.facilities)
        self._http_children: dict[tuple[str, str, int], Histogram] = {}
        self._upstream_children: dict[tuple[str, str], Histogram] = {}
        self._tool_children: dict[tuple[str, str], Counter] = {}

    def _calls_and_upstream(self) -> None:
        """Tool calls, what reached the booking system, the read cache."""
        self.tool_calls = Counter(
            "pmsgate_tool_calls",
            "Tool and operation calls answered, by tool and outcome.",
            ["tool", "outcome"],
            registry=self.registry,
        )
        self.upstream_calls = Counter(
            "pmsgate_upstream_calls",
            "Requests sent to the booking system, by facility, operation and outcome.",
            ["hotel_id", "operation", "outcome"],
            registry=self.registry,
        )
        self.upstream_429s = Counter(
            "pmsgate_upstream_429",
            "Rate-limit answers received from the booking system, by facility.",
            ["hotel_id"],
            registry=self.registry,
        )
        self.cache_hits = Counter(
            "pmsgate_cache_hits",
            "Answers served from the read cache, by staleness.",
            ["stale"],
            registry=self.registry,
        )
        self.stale_answers = Counter(
            "pmsgate_stale_answers",
            "Tool answers marked stale, by tool.",
            ["tool"],
            registry=self.registry,
        )
        self.token_refreshes = Counter(
            "pmsgate_token_refreshes",
            "Tokens obtained from the booking system, by facility.",
            ["hotel_id"],
            registry=self.registry,
        )
        self.upstream_requests = Histogram(
            "pmsgate_upstream_request_seconds",
            "HTTP requests sent to the booking system, by operation and outcome, with latency.",
            ["operation", "outcome"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )

    def _process_state(self) -> None:
        """The running build, Redis up or down, HTTP requests by route."""
        self.build_info = Gauge(
            "pmsgate_build_info",
            "Always 1: the running code's version and source revision as labels.",
            ["version", "revision"],
            registry=self.registry,
        )
        running = build_info()
        self.build_info.labels(version=running.version, revision=running.revision).set(1)
        self.redis_up = Gauge(
            "pmsgate_redis_up",
            "1 while Redis (shared limits, cache, locks) answers, 0 during an outage.",
            registry=self.registry,
        )
        self.http_requests = Histogram(
            "pmsgate_http_request_duration_seconds",
            "HTTP requests answered, by route template, method and status class, with latency.",
            ["route", "method", "status"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )

    def _jobs_and_sync(self) -> None:
        """Scheduled jobs and knowledge-sync jobs (every outcome present from the start)."""
        self.job_runs = Counter(
            "pmsgate_job_runs",
            "Scheduled job runs finished in this process, by job and outcome.",
            ["scheduled_job", "outcome"],
            registry=self.registry,
        )
        self.job_last_success = Gauge(
            "pmsgate_job_last_success_timestamp_seconds",
            "When the job's last successful run started (Unix time; from job_runs at start).",
            ["scheduled_job"],
            registry=self.registry,
        )
        self.job_interval = Gauge(
            "pmsgate_job_interval_seconds",
            "The interval of each job scheduled in this process.",
            ["scheduled_job"],
            registry=self.registry,
        )
        self.sync_jobs_started = Counter(
            "pmsgate_knowledge_sync_jobs_started",
            "Knowledge-sync jobs started in this process, by mode (dry_run, commit).",
            ["mode"],
            registry=self.registry,
        )
        self.sync_jobs_finished = Counter(
            "pmsgate_knowledge_sync_jobs_finished",
            "Knowledge-sync jobs finished in this process, by mode and outcome.",
            ["mode", "outcome"],
            registry=self.registry,
        )
        self.sync_job_duration = Histogram(
            "pmsgate_knowledge_sync_job_duration_seconds",
            "How long the knowledge-sync jobs of this process ran, by mode and outcome.",
            ["mode", "outcome"],
            buckets=SYNC_BUCKETS,
            registry=self.registry,
        )
        for mode in SYNC_MODES:
            self.sync_jobs_started.labels(mode)
            for outcome in SYNC_OUTCOMES:
                self.sync_jobs_finished.labels(mode, outcome)

    # --- HTTP ----------------------------------------------------------------------------

    def tool_called(self, tool: str, outcome: str) -> None:
        """One tool or operation call answered (``pmsgate_tool_calls``)."""
        key = (tool, outcome)
        child = self._tool_children.get(key)
        if child is None:
            child = self.tool_calls.labels(tool, outcome)
            self._tool_children[key] = child
        child.inc()

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        """One request answered (the labelled child looked up once per label set)."""
        key = (route, method, status)
        child = self._http_children.get(key)
        if child is None:
            child = self.http_requests.labels(route, method, status_class(status))
            self._http_children[key] = child
        child.observe(seconds)

    # --- the booking system -------------------------------------------------------------

    def observe_upstream(self, operation: str, outcome: str, seconds: float) -> None:
        """One HTTP request to the booking system answered (or failed) after ``seconds``."""
        key = (operation, outcome)
        child = self._upstream_children.get(key)
        if child is None:
            child = self.upstream_requests.labels(operation, outcome)
            self._upstream_children[key] = child
        child.observe(seconds)

    # --- knowledge-sync jobs and audit events ---------------------------------------------

    def sync_job_started(self, mode: str) -> None:
        """A knowledge-sync job of ``mode`` (``dry_run`` or ``commit``) starts running."""
        self.sync_jobs_started.labels(mode).inc()

    def sync_job_finished(self, mode: str, outcome: str, seconds: float) -> None:
        """A knowledge-sync job finished: ``succeeded``, ``failed`` or ``cancelled``."""
        self.sync_jobs_finished.labels(mode, outcome).inc()
        self.sync_job_duration.labels(mode, outcome).observe(seconds)

    def audit_recorded(self, action: str, outcome: str) -> None:
        """An audit event was written (or committed with its unit of work)."""
        self.audit_events.labels(action, outcome).inc()

    # --- scheduled jobs -----------------------------------------------------------------

    def job_scheduled(self, job: str, interval_s: float, last_success: datetime | None) -> None:
        """A job this process schedules: its interval, its outcomes at 0, its last success."""
        self.job_interval.labels(job).set(interval_s)
        for outcome in JOB_OUTCOMES:
            self.job_runs.labels(job, outcome)
        if last_success is not None:
            self.job_last_success.labels(job).set(last_success.timestamp())

    def job_finished(self, job: str, succeeded: bool, started_at: datetime) -> None:
        """One run of ``job`` finished (a cancelled run counts as failed)."""
        self.job_runs.labels(job, "succeeded" if succeeded else "failed").inc()
        if succeeded:
            self.job_last_success.labels(job).set(started_at.timestamp())

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)
