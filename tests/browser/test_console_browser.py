"""The console as people use it, in Chromium: sign in, open a customer, sync, reconnect."""

from __future__ import annotations

import re
from typing import Any

from pmsgate.jobs.connections import check_facility
from tests.browser.conftest import LiveConsole, screenshot
from tests.web.support import WebSandbox


def sign_in(page: Any, live: LiveConsole, account: tuple[str, str]) -> None:
    """Sign in through the login form, as a person would."""
    page.goto(f"{live.url}/console")
    page.wait_for_url(re.compile(r"/login"))
    page.get_by_test_id("login-email").fill(account[0])
    page.get_by_test_id("login-password").fill(account[1])
    page.get_by_test_id("login-submit").click()


def test_an_admin_signs_in_opens_a_customer_runs_a_dry_run_and_sees_the_counters(
    page: Any, live_console: LiveConsole
) -> None:
    sandbox = live_console.sandbox
    sign_in(page, live_console, live_console.admin)
    page.wait_for_url(f"{live_console.url}/console")
    rows = page.get_by_test_id("customer-row")
    assert rows.count() == 2
    screenshot(page, "admin-home")

    page.get_by_role("link", name=sandbox.enrolled.facility["name"]).click()
    page.wait_for_url(re.compile(rf"/console/customers/{sandbox.student_id}$"))
    screenshot(page, "customer-page-admin")

    page.get_by_test_id("sync-dry-run").click()
    page.locator('[data-testid="sync-job"][data-status="succeeded"]').wait_for()
    apartments = len(sandbox.enrolled.facility["apartments"])
    assert page.get_by_test_id("counter-apartments").inner_text().split()[-1] == str(apartments)
    assert page.get_by_test_id("counter-unresolvedApartments").inner_text().split()[-1] == "0"
    assert page.get_by_test_id("counter-incompleteTemplates").is_visible()
    screenshot(page, "dry-run-counters")


def test_a_customer_whose_password_changed_reconnects_and_sees_connected(
    page: Any, live_console: LiveConsole
) -> None:
    new_password = "a-new-api-password-2026"

    async def change_password_upstream(sandbox: WebSandbox) -> None:
        sandbox.enrolled.sandbox.kross.change_password(sandbox.hotel_id, new_password)
        outcome, _ = await check_facility(sandbox.gateway, sandbox.hotel_id)
        assert outcome == "now_in_error"

    live_console.run(change_password_upstream)
    sign_in(page, live_console, live_console.customer)
    page.wait_for_url(re.compile(rf"/console/customers/{live_console.sandbox.student_id}$"))
    status = page.locator("#pms").get_by_test_id("pms-status")
    assert status.get_attribute("data-state") == "error"
    assert status.inner_text() == "not connected"
    screenshot(page, "customer-pms-error")

    page.get_by_test_id("reconnect-password").fill("not-the-password")
    page.get_by_test_id("reconnect-submit").click()
    page.get_by_test_id("reconnect-error").wait_for()
    assert page.locator("#pms").get_by_test_id("pms-status").inner_text() == "not connected"

    page.get_by_test_id("reconnect-password").fill(new_password)
    page.get_by_test_id("reconnect-submit").click()
    page.get_by_test_id("reconnect-result").wait_for()
    assert page.locator("#pms").get_by_test_id("pms-status").inner_text() == "connected"
    screenshot(page, "customer-reconnected")


def test_a_customer_sees_only_its_own_page(page: Any, live_console: LiveConsole) -> None:
    sign_in(page, live_console, live_console.other_customer)
    page.wait_for_url(re.compile(r"/console/customers/"))
    assert live_console.sandbox.student_id not in page.url
    answer = page.goto(f"{live_console.url}/console/customers/{live_console.sandbox.student_id}")
    assert answer is not None and answer.status == 403
    assert page.get_by_test_id("error").get_attribute("data-code") == "forbidden"
