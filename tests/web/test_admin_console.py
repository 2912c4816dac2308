"""The admin console for hundreds of customers: search, filters, sort, pages, totals, attention.

The customers are generated through the real services (:func:`pmsgate.demo.fleet.
generate_customers`) next to the sandbox's enrolled one; pages are read over HTTP.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from sqlalchemy import event

from pmsgate.demo.fleet import Fleet, generate_customers
from pmsgate.demo.serve import in_the_emulator
from pmsgate.gateway.metrics import FacilityState
from pmsgate.jobs.connections import check_facility
from pmsgate.jobs.runs import JobRuns
from tests.conftest import database_url as database_url  # both databases: see conftest.py
from tests.web.support import WebSandbox

pytestmark = pytest.mark.anyio


def student_ids(page: str) -> list[str]:
    """The student ids of the overview's rows, in their order."""
    return re.findall(r'data-testid="customer-row" data-student-id="([^"]+)"', page)


def attention_ids(page: str, kind: str) -> set[str]:
    """The customers of the incidents of one kind listed on /console/attention."""
    rows = re.findall(r'<tr data-testid="incident-row"[^>]*>', page)
    return {
        re.search(r'data-student-id="([^"]*)"', row).group(1)  # type: ignore[union-attr]
        for row in rows
        if f'data-kind="{kind}"' in row
    }


def total(page: str, name: str) -> int:
    """One of the overview's totals."""
    found = re.search(
        rf'data-testid="total-{name}"[^>]*>\s*<span class="value">(\d+)</span>', page, re.DOTALL
    )
    assert found, name
    return int(found.group(1))


async def fleet_of(web: WebSandbox, count: int, start: int = 0) -> Fleet:
    """``count`` generated customers in varied states."""
    return await generate_customers(web.web.customers, web.web.clock, count=count, start=start)


async def get(client: httpx.AsyncClient, url: str, status: int = 200) -> str:
    answer = await client.get(url)
    assert answer.status_code == status, (url, answer.status_code, answer.text[:500])
    return answer.text


@contextmanager
def counted_statements(web: WebSandbox) -> Iterator[list[str]]:
    """Every SQL statement the app's engine runs inside the block."""
    engine = web.web.customers.sessions.kw["bind"].sync_engine
    statements: list[str] = []

    def record(*args: Any) -> None:
        statements.append(args[2])

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", record)


async def test_three_hundred_customers_searched_filtered_sorted_and_paged(web: WebSandbox) -> None:
    fleet = await fleet_of(web, 300)
    admin, _ = await web.signed_in("admin")
    everyone = 301  # and the sandbox's enrolled customer (connected, not onboarded)

    home = await get(admin, "/console")
    assert total(home, "customers") == everyone
    errors = {m.student_id for m in fleet.with_status("error")}
    unlinked = {m.student_id for m in fleet.with_status("not linked")}
    assert total(home, "status-error") == len(errors)
    assert total(home, "status-not_linked") == len(unlinked)
    assert total(home, "status-connected") == everyone - len(errors) - len(unlinked)
    assert total(home, "route-B") == sum(1 for m in fleet.members if m.route == "B")
    assert total(home, "waiting") == sum(1 for m in fleet.members if m.waiting)
    assert total(home, "overdue") == sum(1 for m in fleet.members if m.overdue)
    assert len(student_ids(home)) == 50  # the first page
    assert f"Showing 1–50 of {everyone} customers" in home  # noqa: RUF001
    assert 'href="/console/attention"' in home

    # One click: the ones in error, exactly (as incidents, once the tick reconciled).
    await web.web.incidents.reconcile()
    attention = await get(admin, "/console/attention")
    assert attention_ids(attention, "pms_error") == errors
    overdue = await get(admin, "/console?waiting=overdue&per_page=200")
    assert set(student_ids(overdue)) == {m.student_id for m in fleet.members if m.overdue}
    assert set(student_ids(await get(admin, "/console?status=error&per_page=200"))) == errors
    flagged = errors | {m.student_id for m in fleet.members if m.overdue or m.budget_heavy}
    assert set(student_ids(await get(admin, "/console?problems=yes&per_page=200"))) == flagged

    # Search: name, e-mail, hotel, student id (case does not matter).
    assert student_ids(await get(admin, "/console?q=residence+042")) == ["demo-0042"]
    assert student_ids(await get(admin, "/console?q=OWNER-007%40")) == ["demo-0007"]
    assert student_ids(await get(admin, "/console?q=9000012")) == ["demo-0012"]
    assert student_ids(await get(admin, "/console?q=demo-0299")) == ["demo-0299"]
    nothing = await get(admin, "/console?q=no+such+customer")
    assert 'data-testid="overview-empty"' in nothing

    # Filters combine; the route and the waiting step.
    route_b_waiting = await get(admin, "/console?route=B&waiting=channels&per_page=200")
    assert set(student_ids(route_b_waiting)) == {
        m.student_id for m in fleet.members if m.route == "B" and m.waiting
    }
    not_started = await get(admin, "/console?route=none&per_page=200")
    assert len(student_ids(not_started)) == everyone - sum(1 for m in fleet.members if m.route)

    # Sorting and pages.
    by_id = student_ids(await get(admin, "/console?sort=student_id&order=desc&per_page=25"))
    assert by_id[:2] == [web.student_id, "demo-0299"]
    assert by_id == sorted(by_id, reverse=True)
    second = student_ids(await get(admin, "/console?sort=student_id&page=2&per_page=25"))
    assert second[0] == "demo-0025"
    heaviest = student_ids(await get(admin, "/console?sort=budget&order=desc"))
    assert heaviest[0] in {m.student_id for m in fleet.members if m.budget_heavy}
    beyond = await get(admin, "/console?page=99")
    assert "There is no page 99: showing page 7, the last one." in beyond
    assert len(student_ids(beyond)) == everyone - 6 * 50
    # The links keep the query (bookmarkable).
    filtered = await get(admin, "/console?status=connected&sort=name")
    assert 'href="/console?status=connected&amp;page=2"' in filtered


BAD_QUERIES = (
    "status=bogus",
    "route=C",
    "sort=password",
    "order=sideways",
    "page=abc",
    "page=0",
    "per_page=7",
    "waiting=no-such-step",
    "problems=maybe",
    "q=" + "x" * 101,
)


async def test_a_bad_parameter_is_a_clear_page_never_a_500(web: WebSandbox) -> None:
    admin, _ = await web.signed_in("admin")
    for query in BAD_QUERIES:
        page = await get(admin, f"/console?{query}", status=422)
        assert 'data-code="invalid_overview_parameter"' in page, query
        name = query.split("=", 1)[0]
        assert f"{name} is one of" in page, query
        assert '<link rel="stylesheet"' in page  # a whole page, styled
    # An unknown parameter is ignored; an empty one is the default.
    assert len(student_ids(await get(admin, "/console?colour=red&status=&page="))) == 1


async def test_the_overview_costs_the_same_statements_for_3_or_30_customers(
    web: WebSandbox,
) -> None:
    admin, _ = await web.signed_in("admin")
    await fleet_of(web, 3)
    await get(admin, "/console")  # warm-up: the session's own reads settle
    with counted_statements(web) as few:
        await get(admin, "/console")
        await get(admin, "/console/attention")
    await fleet_of(web, 27, start=3)
    with counted_statements(web) as many:
        await get(admin, "/console")
        await get(admin, "/console/attention")
    assert len(few) == len(many), (few, many)
    assert len(few) <= 20


async def test_the_admin_page_of_a_customer_has_ids_checklist_keys_and_its_audit_trail(
    web: WebSandbox,
) -> None:
    await fleet_of(web, 2)
    admin, _ = await web.signed_in("admin")
    page = await get(admin, "/console/customers/demo-0001")
    assert 'data-testid="customer-facts"' in page
    assert "<code>demo-0001</code>" in page
    assert 'data-step="channels" data-status="waiting"' in page
    assert "pmsgate onboard confirm demo-0001 channels" in page
    assert 'id="keys"' in page and 'id="pms"' in page and 'id="knowledge"' in page
    assert 'data-testid="audit-event" data-action="key.minted"' in page
    assert 'href="/console/audit?customer=demo-0001"' in page
    assert '<a href="/console">Customers</a>' in page


async def test_only_an_admin_sees_the_overview_and_the_attention_page(web: WebSandbox) -> None:
    customer, _ = await web.signed_in("customer")
    home = await customer.get("/console")
    assert home.status_code == 303  # to its own page
    refused = await get(customer, "/console/attention", status=403)
    assert 'data-code="forbidden"' in refused
    anonymous = await web.client.get("/console/attention?x=1")
    assert anonymous.status_code == 303
    assert anonymous.headers["location"].startswith("/login?next=/console/attention")


async def test_a_scheduled_job_whose_latest_run_failed_needs_attention(web: WebSandbox) -> None:
    runs = JobRuns(web.web.customers.sessions, web.web.clock)
    failed = await runs.start("check-connections")
    await runs.finish(
        failed.id, "failed", {"error": {"code": "platform_unavailable", "message": "down"}}
    )
    recovered = await runs.start("usage-snapshots")
    await runs.finish(recovered.id, "failed", {"error": {"code": "boom"}})
    web.enrolled.clock.advance(60)
    again = await runs.start("usage-snapshots")
    await runs.finish(again.id, "succeeded", {})
    admin, _ = await web.signed_in("admin")
    page = await get(admin, "/console/attention")
    assert re.findall(r'data-testid="attention-job" data-job="([^"]+)"', page) == [
        "check-connections"
    ]
    assert "platform_unavailable" in page
    home = await get(admin, "/console")
    assert "1 failing job" in home


async def test_the_overview_shows_each_customers_latest_knowledge_sync(web: WebSandbox) -> None:
    first = await web.web.sync_jobs.start(web.student_id, commit=False)
    assert (await web.web.sync_jobs.wait(first)).status == "succeeded"
    web.enrolled.clock.advance(60)
    second = await web.web.sync_jobs.start(web.student_id, commit=True)
    assert (await web.web.sync_jobs.wait(second)).status == "succeeded"
    admin, _ = await web.signed_in("admin")
    page = await get(admin, "/console?sort=last_sync&order=desc")
    row = page.split(f'data-student-id="{web.student_id}"', 1)[1].split("</tr>", 1)[0]
    assert 'commit · <span class="status succeeded">succeeded</span>' in row


async def test_the_demos_generated_facilities_hold_under_the_access_check(web: WebSandbox) -> None:
    fleet = await generate_customers(
        web.web.customers,
        web.web.clock,
        count=5,
        upstream=in_the_emulator(web.enrolled.sandbox),
    )
    outcomes = {
        m.student_id: (await check_facility(web.gateway, m.hotel_id))[0]
        for m in fleet.members
        if m.hotel_id is not None
    }
    assert outcomes == {
        "demo-0000": "ok",
        "demo-0001": "ok",
        "demo-0002": "ok",
        "demo-0003": "skipped",  # generated in error (its password changed upstream)
        "demo-0004": "ok",
    }


async def test_a_fresh_metrics_snapshot_shows_a_budget_spent_since_the_last_usage_flush(
    web: WebSandbox,
) -> None:
    snapshot = web.gateway.metrics.facilities
    now = web.web.clock.now()

    async def states() -> list[FacilityState]:
        return [FacilityState(web.hotel_id, "connected", {"day": 150}, {"day": 5000})]

    assert await snapshot.refresh(now, states, force=True)
    admin, _ = await web.signed_in("admin")
    flagged = await get(admin, "/console?problems=yes")
    assert student_ids(flagged) == [web.student_id]
    assert "4,850" in flagged  # 5,000 less the 150 the limiter has left today
    web.enrolled.clock.advance(11 * 60)  # an old snapshot is not trusted
    assert student_ids(await get(admin, "/console?problems=yes")) == []
