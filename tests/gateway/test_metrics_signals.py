"""The signals of issue 15 item 4 beyond HTTP and the facility gauges, each seen through a
real flow: the booking system's latency and outcomes per operation (the emulator, through
the gateway's own client), knowledge-sync jobs (the emulators of the platform and of the
notes, through the web app's route and through :class:`SyncJobs`), audit events (stored
by the trail, counted when they land) and the budget used per window.

Everything is read back from ``/metrics`` or the registry the scrape renders: what an
operator's Prometheus would see. docs/operations.md, "What to watch", describes each.
"""

from __future__ import annotations

from typing import Any

import pytest

from pmsgate.audit.actions import Actor, AuditAction, Outcome
from pmsgate.clock import ManualClock
from pmsgate.gateway.metrics import GatewayMetrics
from pmsgate.integrations.kit import ErrorKind
from pmsgate.integrations.kross import errors as kross
from pmsgate.knowledge.records import KnowledgeSyncRecords
from pmsgate.knowledge.sync import KnowledgeSync
from pmsgate.knowledge.sync_jobs import SyncJobs
from tests.customers.support import EnrolledSandbox
from tests.e2e.conftest import Gateway, add_seeded_facility
from tests.knowledge.sync_support import sync_sandbox
from tests.support.metrics import Samples, scrape
from tests.web.support import csrf, web_sandbox

pytestmark = pytest.mark.anyio

UPSTREAM = "pmsgate_upstream_request_seconds"


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def series(samples: Samples, name: str) -> list[dict[str, str]]:
    return [dict(labels) for (found, labels) in samples if found == name]


# --- the booking system: latency and outcomes per operation ---------------------------------


async def test_each_upstream_request_is_timed_by_operation_and_outcome(
    gateway: Gateway, kross_store: Any, clock: ManualClock
) -> None:
    record, key = await add_seeded_facility(gateway.services, kross_store)
    hotel_id = record["hotel_id"]
    assert (await gateway.tool("get-in-house-guests", key)).status_code == 200

    first = await scrape(gateway.app)
    count = UPSTREAM + "_count"
    # The token request and the read, each once, both answered.
    assert value(first, count, operation="auth/get-token", outcome="ok") == 1
    assert value(first, count, operation="reservations/get-list", outcome="ok") == 1
    assert value(first, UPSTREAM + "_bucket", operation="auth/get-token", outcome="ok", le="+Inf")
    # Bounded labels: an operation's name and an outcome, never a facility, path or URL.
    labels = series(first, count)
    assert {tuple(sorted(found)) for found in labels} == {("operation", "outcome")}
    assert not any(hotel_id in text or "/v5/" in text for x in labels for text in x.values())

    # The booking system fails every request: each attempt of the read is observed as a
    # server error (the caller still gets the cached answer, marked stale).
    kross_store.set_faults(error_rate=1.0)
    clock.advance(3600)
    answer = await gateway.tool("get-in-house-guests", key)
    assert answer.status_code == 200 and answer.json()["meta"]["stale"] is True

    failed = await scrape(gateway.app)
    errors = value(failed, count, operation="reservations/get-list", outcome="server_error")
    assert errors >= 2  # retried: every attempt is a request of its own
    assert value(failed, count, operation="reservations/get-list", outcome="ok") == 1
    # The gateway-level counter agrees on what happened.
    upstream_calls = value(
        failed,
        "pmsgate_upstream_calls_total",
        hotel_id=hotel_id,
        operation="reservations/get-list",
        outcome="pms_unavailable",
    )
    assert upstream_calls == errors


async def test_a_refused_request_is_a_client_error_not_an_upstream_failure(
    gateway: Gateway, kross_store: Any
) -> None:
    _, key = await add_seeded_facility(gateway.services, kross_store)
    # A payment to a reservation the booking system does not have: it refuses the request.
    answer = await gateway.http.post(
        "/v1/operations/reservations/add-payment",
        json={"id_reservation": 999_999_999, "amount": 10, "currency": "EUR", "method": "cash"},
        headers={"Authorization": f"Bearer {key}", "Idempotency-Key": "pay-unknown-1"},
    )
    assert answer.status_code == 404, answer.text

    samples = await scrape(gateway.app)
    count = UPSTREAM + "_count"
    operation = "reservations/add-payment"
    assert value(samples, count, operation=operation, outcome="client_error") == 1
    assert value(samples, count, operation=operation, outcome="server_error") == 0


def test_every_failure_kind_has_one_of_the_few_outcomes() -> None:
    """Each kind of errors.yaml, and the transport's failures, map into REQUEST_OUTCOMES."""
    for kind in ErrorKind:
        error = kross.KrossError("x", status=400, kind=kind)
        assert kross.request_outcome(error) in kross.REQUEST_OUTCOMES
    assert kross.request_outcome(None) == "ok"
    unavailable = kross.UpstreamUnavailable("x", status=503, kind=ErrorKind.UNAVAILABLE)
    assert kross.request_outcome(unavailable) == "server_error"
    assert kross.request_outcome(kross.UpstreamUnavailable("no answer")) == "timeout"
    assert kross.request_outcome(kross.WriteOutcomeUnknown("no answer")) == "timeout"
    refused = kross.UpstreamUnavailable("connect", may_have_been_sent=False)
    assert kross.request_outcome(refused) == "unreachable"
    assert kross.request_outcome(kross.HtmlInsteadOfJson("page", status=200)) == "unexpected"
    limited = kross.RateLimited("slow", status=429, kind=ErrorKind.RATE_LIMITED)
    assert kross.request_outcome(limited) == "rate_limited"
    login = kross.AuthenticationFailed("no", status=401, kind=ErrorKind.AUTH_FAILED)
    assert kross.request_outcome(login) == "auth_failed"


# --- budget used per window --------------------------------------------------------------


async def test_budget_used_per_window_comes_from_the_facility_snapshot(
    gateway: Gateway, kross_store: Any
) -> None:
    record, key = await add_seeded_facility(gateway.services, kross_store)
    hotel_id = record["hotel_id"]
    assert (await gateway.tool("get-in-house-guests", key)).status_code == 200

    samples = await scrape(gateway.app)
    for window in ("minute", "hour", "day"):
        used = value(samples, "pmsgate_budget_used", hotel_id=hotel_id, window=window)
        limit = value(samples, "pmsgate_budget_limit", hotel_id=hotel_id, window=window)
        left = value(samples, "pmsgate_budget_remaining", hotel_id=hotel_id, window=window)
        assert used == limit - left
        assert used >= 2  # the token request and the read took a permit each


# --- audit events --------------------------------------------------------------------------


async def test_audit_events_are_counted_by_action_and_outcome_once_stored(
    gateway: Gateway, kross_store: Any
) -> None:
    # Registering a facility stores its credentials and mints its key, each in the
    # registration's own unit of work (record_in): counted when it commits.
    await add_seeded_facility(gateway.services, kross_store)
    samples = await scrape(gateway.app)
    events = "pmsgate_audit_events_total"
    assert value(samples, events, action="key.minted", outcome="success") == 1
    assert value(samples, events, action="credentials.stored", outcome="success") == 1

    audit = gateway.container.audit
    await audit.record(
        AuditAction.SIGNIN_FAILED,
        actor=Actor.admin("someone@example.com"),
        subject="someone@example.com",
        outcome=Outcome.REFUSED,
    )
    # An event in a unit of work that rolls back never happened: not counted.
    sessions = gateway.container.sessions
    async with sessions() as session:
        await audit.record_in(
            session, AuditAction.ADMIN_ACTION, actor=Actor.cli(), subject="rolled back"
        )
        await session.rollback()
    async with sessions.begin() as session:
        await audit.record_in(session, AuditAction.ADMIN_ACTION, actor=Actor.cli(), subject="kept")

    after = await scrape(gateway.app)
    assert value(after, events, action="signin.failed", outcome="refused") == 1
    assert value(after, events, action="admin.action", outcome="success") == 1
    assert value(after, events, action="key.minted", outcome="success") == 1


# --- knowledge-sync jobs -------------------------------------------------------------------


def jobs_with(enrolled: EnrolledSandbox, metrics: GatewayMetrics) -> SyncJobs:
    repo = KnowledgeSyncRecords(enrolled.services.sessions, enrolled.clock)
    return SyncJobs(KnowledgeSync(enrolled.services, repo), repo, metrics=metrics)


def sync_counts(metrics: GatewayMetrics, mode: str) -> dict[str, float]:
    def read(name: str, **labels: str) -> float:
        return metrics.registry.get_sample_value(name, {"mode": mode, **labels}) or 0.0

    counts = {"started": read("pmsgate_knowledge_sync_jobs_started_total")}
    for outcome in ("succeeded", "failed", "cancelled"):
        counts[outcome] = read("pmsgate_knowledge_sync_jobs_finished_total", outcome=outcome)
        counts[f"timed_{outcome}"] = read(
            "pmsgate_knowledge_sync_job_duration_seconds_count", outcome=outcome
        )
    return counts


async def test_a_sync_job_run_through_the_web_app_is_counted_in_its_metrics(
    database_url: str,
) -> None:
    async with web_sandbox(database_url, seed=7, student_index=1) as web:
        before = await scrape(web.app)
        started = "pmsgate_knowledge_sync_jobs_started_total"
        finished = "pmsgate_knowledge_sync_jobs_finished_total"
        # Every mode and outcome is there from the start, at 0.
        assert (started, frozenset({("mode", "commit")})) in before
        assert value(before, finished, mode="dry_run", outcome="succeeded") == 0

        client, token = await web.signed_in("customer")
        answer = await client.post(
            f"/api/{web.assistant}/sync-knowledge", json={"commit": False}, headers=csrf(token)
        )
        assert answer.status_code == 200 and answer.json()["status"] == "succeeded"

        after = await scrape(web.app)
        assert value(after, started, mode="dry_run") == 1
        assert value(after, started, mode="commit") == 0
        assert value(after, finished, mode="dry_run", outcome="succeeded") == 1
        duration = "pmsgate_knowledge_sync_job_duration_seconds_count"
        assert value(after, duration, mode="dry_run", outcome="succeeded") == 1
        # The sign-in was an audit event of the same process.
        events = "pmsgate_audit_events_total"
        assert value(after, events, action="signin.succeeded", outcome="success") >= 1


async def test_a_failed_sync_job_is_counted_as_failed(database_url: str) -> None:
    metrics = GatewayMetrics()
    async with sync_sandbox(database_url, with_notion=False) as enrolled:
        async with jobs_with(enrolled, metrics) as jobs:
            outcome = await jobs.run_sync_within(enrolled.student_id, commit=False)
            assert outcome.job.error_code == "notes_not_connected"
        assert sync_counts(metrics, "dry_run") == {
            "started": 1,
            "succeeded": 0,
            "failed": 1,
            "cancelled": 0,
            "timed_succeeded": 0,
            "timed_failed": 1,
            "timed_cancelled": 0,
        }


async def test_a_sync_job_cut_by_the_shutdown_is_counted_as_cancelled(database_url: str) -> None:
    metrics = GatewayMetrics()
    async with sync_sandbox(database_url) as enrolled:
        async with jobs_with(enrolled, metrics) as jobs:
            # Still running when the process shuts down: cancelled.
            await jobs.start(enrolled.student_id, commit=True)
        counts = sync_counts(metrics, "commit")
        assert (counts["started"], counts["cancelled"], counts["timed_cancelled"]) == (1, 1, 1)
        assert counts["failed"] == counts["succeeded"] == 0
