"""The incident list, an incident's page and their actions, over HTTP.

Generated customers (:func:`pmsgate.demo.fleet.generate_customers`: every 10th in
``error``) next to the sandbox's enrolled one; the incidents come from a reconciliation,
as the ``notify-incidents`` tick makes them. Every action is a form POST with the
session's CSRF token, answered 303 to a page.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from pmsgate.demo.fleet import generate_customers
from pmsgate.jobs.connections import check_facility
from pmsgate.jobs.notify import notify_incidents
from tests.web.support import WebSandbox, login, web_sandbox

pytestmark = pytest.mark.anyio

ERRORS = {"demo-0003", "demo-0023", "demo-0033"}  # of the first 40: every 10th from 3, linked


@pytest.fixture
async def sandbox(database_url: str, tmp_path: Path) -> AsyncIterator[WebSandbox]:
    overrides = {"data_dir": tmp_path, "public_url": "https://console.example.com"}
    async with web_sandbox(database_url, settings_overrides=overrides) as web:
        await generate_customers(web.web.customers, web.web.clock, count=40)
        await web.web.incidents.reconcile()
        yield web


def rows(page: str) -> list[dict[str, str]]:
    """The list's rows: their data attributes."""
    found = []
    for row in re.findall(r'<tr data-testid="incident-row"([^>]*)>', page):
        found.append(dict(re.findall(r'data-([a-z-]+)="([^"]*)"', row)))
    return found


def students(page: str) -> set[str]:
    """The customers of the rows."""
    return {row["student-id"] for row in rows(page)}


async def get(client: httpx.AsyncClient, url: str, status: int = 200) -> str:
    answer = await client.get(url)
    assert answer.status_code == status, (url, answer.status_code, answer.text[:300])
    return answer.text


async def post(
    client: httpx.AsyncClient, url: str, csrf: str, **form: str | list[str]
) -> httpx.Response:
    answer = await client.post(url, data={"csrf_token": csrf, **form})
    assert answer.status_code == 303, (url, answer.status_code, answer.text[:300])
    return answer


async def form_token(client: httpx.AsyncClient, page_url: str, action: str) -> str:
    """The one-time token of the form posting to ``action`` on the page ``page_url``."""
    page = await get(client, page_url)
    form = re.search(rf'action="{re.escape(action)}"[^>]*>(.*?)</form>', page, re.DOTALL)
    assert form, action
    found = re.search(r'name="form_token" value="([^"]+)"', form.group(1))
    assert found, action
    return found.group(1)


def incident_of(page: str, student_id: str) -> str:
    return next(row["incident-id"] for row in rows(page) if row["student-id"] == student_id)


async def test_the_list_filters_sorts_and_refuses_a_bad_filter_with_a_page(
    sandbox: WebSandbox,
) -> None:
    s = sandbox
    me, password = await s.add_user("admin")
    admin = await s.new_client()
    csrf = await login(admin, me, password)
    page = await get(admin, "/console/attention")
    assert students(page) == ERRORS
    assert all(row["kind"] == "pms_error" and row["state"] == "open" for row in rows(page))
    assert 'data-testid="incident-age">in error for' in page
    assert 'data-testid="attention-jobs"' in page  # the failing jobs are still listed

    first = incident_of(page, "demo-0003")
    back = await post(
        admin,
        f"/console/incidents/{first}/acknowledge",
        csrf,
        next="/console/attention?kind=pms_error",
    )
    assert back.headers["location"] == "/console/attention?kind=pms_error&done=acknowledge"
    second = incident_of(page, "demo-0033")
    await post(admin, f"/console/incidents/{second}/assign", csrf, assignee=me)
    await post(admin, f"/console/incidents/{second}/snooze", csrf, **{"for": "4h"})

    assert students(await get(admin, "/console/attention?state=open")) == {"demo-0023"}
    assert students(await get(admin, "/console/attention?state=acknowledged")) == {"demo-0003"}
    assert students(await get(admin, "/console/attention?state=snoozed")) == {"demo-0033"}
    assert students(await get(admin, "/console/attention?assignee=me")) == {"demo-0033"}
    assert students(await get(admin, f"/console/attention?assignee={me}")) == {"demo-0033"}
    assert students(await get(admin, "/console/attention?assignee=nobody")) == {
        "demo-0003",
        "demo-0023",
    }
    assert students(await get(admin, "/console/attention?kind=registry")) == set()
    assert students(await get(admin, "/console/attention?state=resolved")) == set()

    # Sorted by count: a check refused makes one incident count 2.
    s.enrolled.clock.advance(60)
    check = f"/console/incidents/{first}/check"
    token = await form_token(admin, f"/console/incidents/{first}", check)
    await post(admin, check, csrf, form_token=token)
    # The same form again (a reload, a double click): sent to the first one's page, not redone.
    repeated = await post(admin, check, csrf, form_token=token)
    assert repeated.headers["location"].endswith("done=check_refused&repeated=1")
    assert 'data-testid="incident-repeated"' in await get(admin, repeated.headers["location"])
    by_count = rows(await get(admin, "/console/attention?sort=count&order=desc"))
    assert by_count[0]["student-id"] == "demo-0003"
    oldest_first = rows(await get(admin, "/console/attention?sort=age&order=asc"))
    assert len(oldest_first) == 3
    # The headings keep the filters (bookmarkable).
    filtered = await get(admin, "/console/attention?kind=pms_error&state=all")
    assert 'href="/console/attention?kind=pms_error&amp;state=all&amp;sort=count"' in filtered

    for query in ("kind=bogus", "state=closed", "sort=password", "order=up", "assignee=x@y.z"):
        refused = await get(admin, f"/console/attention?{query}", status=422)
        assert 'data-code="invalid_incident_filter"' in refused, query
        assert '<link rel="stylesheet"' in refused


async def test_a_bulk_action_states_the_count_then_acts_on_those_incidents(
    sandbox: WebSandbox,
) -> None:
    s = sandbox
    admin, csrf = await s.signed_in("admin")
    confirm = await get(admin, "/console/attention/bulk?action=acknowledge&kind=pms_error")
    assert 'data-testid="bulk-count">3<' in confirm
    ids = re.findall(r'name="incident" value="(\d+)"', confirm)
    assert len(ids) == 3
    # Nothing happened yet.
    assert len(rows(await get(admin, "/console/attention?state=open"))) == 3

    token = re.search(r'name="form_token" value="([^"]+)"', confirm).group(1)  # type: ignore[union-attr]
    done = await post(
        admin,
        "/console/attention/bulk",
        csrf,
        action="acknowledge",
        incident=ids,
        next="/console/attention?kind=pms_error",
        form_token=token,
    )
    assert done.headers["location"] == "/console/attention?kind=pms_error&bulk_done=acknowledge%3A3"
    listed = await get(admin, done.headers["location"])
    assert 'data-testid="bulk-done"' in listed
    assert {row["state"] for row in rows(listed)} == {"acknowledged"}
    # Acknowledged ones are not offered again.
    again = await get(admin, "/console/attention/bulk?action=acknowledge")
    assert 'data-testid="bulk-none"' in again
    bad = await get(admin, "/console/attention/bulk?action=delete-everything", status=422)
    assert 'data-code="invalid_incident_filter"' in bad


async def test_actions_need_an_admin_and_the_csrf_token(sandbox: WebSandbox) -> None:
    s = sandbox
    admin, _ = await s.signed_in("admin")
    incident = incident_of(await get(admin, "/console/attention"), "demo-0003")
    refused = await admin.post(f"/console/incidents/{incident}/acknowledge", data={})
    assert refused.status_code == 403
    customer, csrf = await s.signed_in("customer")
    forbidden = await customer.post(
        f"/console/incidents/{incident}/acknowledge", data={"csrf_token": csrf}
    )
    assert forbidden.status_code == 403
    assert (await customer.get("/console/attention")).status_code == 403
    assert (await customer.get(f"/console/incidents/{incident}")).status_code == 403
    missing = await get(admin, "/console/incidents/99999", status=404)
    assert 'data-code="incident_not_found"' in missing


async def test_the_customer_page_shows_how_long_who_was_told_and_the_timeline(
    database_url: str, tmp_path: Path
) -> None:
    overrides = {
        "data_dir": tmp_path,
        "public_url": "https://console.example.com",
        "notify_team_email": "ops@platform.example",
    }
    async with web_sandbox(database_url, settings_overrides=overrides) as s:
        s.enrolled.sandbox.kross.change_password(s.hotel_id, "a-new-password-for-23")
        assert (await check_facility(s.gateway, s.hotel_id))[0] == "now_in_error"
        await notify_incidents(s.web)
        s.enrolled.clock.advance(3 * 3600)
        admin, csrf = await s.signed_in("admin")
        page = await get(admin, f"/console/customers/{s.student_id}")
        panel = page.split('data-testid="incident-panel"', 1)[1].split("</section>", 1)[0]
        assert "in error for 3 h" in panel
        assert 'data-testid="incident-customer-told">2' in panel  # a date: it was sent
        assert 'data-testid="incident-team-told">2' in panel
        assert 'data-kind="notice"' in panel and 'data-kind="opened"' in panel
        incident = re.search(r'data-incident-id="(\d+)"', panel).group(1)  # type: ignore[union-attr]
        # A note from the customer page comes back to it, in the timeline.
        here = f"/console/customers/{s.student_id}#incidents"
        note = f"/console/incidents/{incident}/note"
        token = await form_token(admin, f"/console/customers/{s.student_id}", note)
        back = await post(admin, note, csrf, text="Phoned: fixing it.", next=here, form_token=token)
        assert back.headers["location"] == f"/console/customers/{s.student_id}?done=note#incidents"
        again = await get(admin, back.headers["location"])
        assert "Phoned: fixing it." in again and 'data-testid="incident-done"' in again
        # An empty note is refused with its code, nothing added.
        token = await form_token(admin, f"/console/incidents/{incident}", note)
        refused = await post(admin, note, csrf, text=" ", form_token=token)
        assert refused.headers["location"].endswith("incident_error=invalid_note")
        # Without its one-time token a note is refused, nothing added.
        untokened = await post(admin, note, csrf, text="Twice?")
        assert untokened.headers["location"].endswith("incident_error=form_token_invalid")
        page = await get(admin, refused.headers["location"])
        assert 'data-code="invalid_note"' in page
