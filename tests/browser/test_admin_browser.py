"""The admin console in Chromium with 300 generated customers: find the ones in error in one
click, search, filter, sort, page, open a customer; each page checked with axe-core.

Screenshots: ``test-artifacts/screenshots/admin-*.png``.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from pmsgate.demo.fleet import Fleet, generate_customers
from tests.browser.accessibility import assert_accessible, assert_focus_visible
from tests.browser.conftest import ARTIFACTS, LiveConsole, screenshot
from tests.web.support import WebSandbox

COUNT = 300
CHUNK = 50


@pytest.fixture(scope="module")
def fleet(live_console: LiveConsole) -> Fleet:
    """300 generated customers on the live console (next to its two sandbox customers)."""
    generated = Fleet()
    for start in range(0, COUNT, CHUNK):  # each call on the server's loop within its time limit

        async def generate(sandbox: WebSandbox, start: int = start) -> Fleet:
            return await generate_customers(
                sandbox.web.customers, sandbox.web.clock, count=CHUNK, start=start
            )

        generated.members.extend(live_console.run(generate).members)

    async def reconcile(sandbox: WebSandbox) -> None:
        # What the notify-incidents tick does first: the facilities in error become incidents.
        await sandbox.web.incidents.reconcile()

    live_console.run(reconcile)
    return generated


def screenshots(page: Any, name: str) -> None:
    """The whole page, and what the window shows first (readable at full size)."""
    screenshot(page, name)
    page.screenshot(path=str(ARTIFACTS / f"{name}-top.png"))


def sign_in_as_admin(page: Any, live: LiveConsole) -> None:
    """Through the login form, as a person would."""
    page.goto(f"{live.url}/console")
    page.wait_for_url(re.compile(r"/login"))
    page.get_by_test_id("login-email").fill(live.admin[0])
    page.get_by_test_id("login-password").fill(live.admin[1])
    page.get_by_test_id("login-submit").click()
    page.wait_for_url(f"{live.url}/console")


def row_ids(page: Any) -> list[str]:
    """The student ids of the overview's rows shown."""
    rows = page.get_by_test_id("customer-row")
    return [rows.nth(i).get_attribute("data-student-id") for i in range(rows.count())]


def test_an_admin_finds_the_customers_in_error_in_one_click(
    page: Any, live_console: LiveConsole, fleet: Fleet
) -> None:
    sign_in_as_admin(page, live_console)
    assert page.get_by_test_id("total-customers").inner_text().split()[0] == str(COUNT + 2)
    assert len(row_ids(page)) == 50
    screenshots(page, "admin-overview")
    assert_accessible(page, "admin-overview")
    assert_focus_visible(page)

    errors = {m.student_id for m in fleet.with_status("error")}
    page.get_by_test_id("attention-link").click()  # the one click
    page.wait_for_url(f"{live_console.url}/console/attention")
    listed = page.locator('[data-testid="incident-row"][data-kind="pms_error"]')
    assert {listed.nth(i).get_attribute("data-student-id") for i in range(listed.count())} == (
        errors
    )
    screenshots(page, "admin-attention")
    assert_accessible(page, "admin-attention")

    # The same from the totals: the "error" count is a filter link.
    page.goto(f"{live_console.url}/console")
    page.get_by_test_id("total-status-error").click()
    page.wait_for_url(re.compile(r"status=error"))
    assert set(row_ids(page)) == errors
    screenshot(page, "admin-overview-errors")


def test_an_admin_searches_filters_sorts_and_pages(
    page: Any, live_console: LiveConsole, fleet: Fleet
) -> None:
    sign_in_as_admin(page, live_console)
    page.get_by_test_id("filter-q").fill("residence 04")
    page.get_by_test_id("filter-apply").click()
    page.wait_for_url(re.compile(r"q=residence"))
    assert row_ids(page) == [f"demo-{n:04d}" for n in range(40, 50)]
    screenshots(page, "admin-search")

    page.goto(f"{live_console.url}/console")
    page.get_by_test_id("filter-route").select_option("B")
    page.get_by_test_id("filter-waiting").select_option("overdue")
    page.get_by_test_id("filter-apply").click()
    page.wait_for_url(re.compile(r"route=B.*waiting=overdue"))
    expected = {m.student_id for m in fleet.members if m.route == "B" and m.overdue}
    assert set(row_ids(page)) == expected
    screenshots(page, "admin-filtered")
    assert_accessible(page, "admin-filtered")

    page.goto(f"{live_console.url}/console")
    page.get_by_test_id("sort-name").click()  # already by name: now descending
    page.wait_for_url(re.compile(r"order=desc"))
    page.get_by_test_id("page-next").click()
    page.wait_for_url(re.compile(r"page=2"))
    assert page.locator('nav.pager [aria-current="page"]').inner_text() == "2"
    screenshot(page, "admin-page-2")

    page.goto(f"{live_console.url}/console?status=nonsense")
    assert page.get_by_test_id("error").get_attribute("data-code") == ("invalid_overview_parameter")
    screenshot(page, "admin-bad-parameter")


def test_an_admin_opens_a_customer_with_its_checklist_and_audit_trail(
    page: Any, live_console: LiveConsole, fleet: Fleet
) -> None:
    sign_in_as_admin(page, live_console)
    waiting = next(m for m in fleet.members if m.overdue and m.status == "error")
    page.goto(f"{live_console.url}/console?q={waiting.student_id}")
    page.get_by_role("link", name=waiting.name).click()
    page.wait_for_url(re.compile(rf"/console/customers/{waiting.student_id}$"))
    assert page.locator("#pms").get_by_test_id("pms-status").inner_text() == "error"
    step = page.locator('[data-testid="step"][data-step="channels"]')
    assert step.get_attribute("data-status") == "waiting"
    assert page.get_by_test_id("audit-event").count() >= 1
    screenshots(page, "admin-customer")
    assert_accessible(page, "admin-customer")
