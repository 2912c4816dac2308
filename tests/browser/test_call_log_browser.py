"""A facility's connection health and tool-call log in Chromium, at 1,440 px and 390 px.

A few tool calls go through the real gateway route with a minted key (fresh, cached, an
error), the usage-flush tick writes them; the admin opens the customer's page, follows the
health panel's link to the log, filters it, and reads it on a phone.

Screenshots: ``test-artifacts/screenshots/call-log-*.png`` and ``health-panel-*.png``.
"""

from __future__ import annotations

import re
from typing import Any

from pmsgate.gateway.scopes import TOOLS_READ
from pmsgate.jobs.usage import flush_gateway_usage
from tests.browser.accessibility import assert_accessible
from tests.browser.conftest import LiveConsole, screenshot
from tests.browser.test_admin_browser import sign_in_as_admin
from tests.web.support import WebSandbox

PHONE = {"width": 390, "height": 844}


async def _calls(sandbox: WebSandbox) -> None:
    # A password change upstream and the reconnect after it: the panel's status history.
    await sandbox.gateway.facilities.mark_error(sandbox.hotel_id, "Invalid credentials (1001)")
    sandbox.enrolled.clock.advance(3600)
    await sandbox.gateway.facilities.mark_connected(sandbox.hotel_id, cause="reconnected")
    sandbox.enrolled.clock.advance(600)
    _, raw = await sandbox.gateway.facilities.mint_key(
        sandbox.hotel_id, "assistant (production)", scopes=(TOOLS_READ,)
    )
    auth = {"Authorization": f"Bearer {raw}"}
    today = sandbox.enrolled.clock.now().date()
    for _ in range(2):
        await sandbox.client.post("/v1/tools/get-in-house-guests", json={}, headers=auth)
        sandbox.enrolled.clock.advance(95)
    await sandbox.client.post(
        "/v1/tools/check-availability",
        json={"arrival": today.isoformat(), "departure": "2026-02-30"},
        headers=auth,
    )
    await sandbox.client.post(
        "/v1/tools/get-reservation-status", json={"reservation_id": 123456}, headers=auth
    )
    await flush_gateway_usage(sandbox.gateway)


def _width(page: Any) -> int:
    return int(page.evaluate("() => document.documentElement.scrollWidth"))


def test_the_call_log_shows_each_calls_outcome_and_freshness_on_a_desktop_and_a_phone(
    page: Any, live_console: LiveConsole
) -> None:
    live_console.run(_calls)
    student_id = live_console.sandbox.student_id
    page.set_viewport_size({"width": 1440, "height": 900})
    sign_in_as_admin(page, live_console)

    page.goto(f"{live_console.url}/console/customers/{student_id}")
    panel = page.get_by_test_id("health-panel")
    assert panel.get_attribute("data-status") == "connected"
    assert "none recorded" not in panel.get_by_test_id("health-last-success").inner_text()
    day = panel.locator('[data-testid="health-period"][data-period="24 h"]')
    assert day.get_attribute("data-calls") == "4"
    assert day.get_attribute("data-errors") == "2"  # bad dates, an unknown reservation
    history = panel.get_by_test_id("health-change")
    assert [history.nth(i).get_attribute("data-to") for i in range(2)] == ["connected", "error"]
    assert "Invalid credentials (1001)" in history.nth(1).inner_text()
    panel.scroll_into_view_if_needed()
    panel.screenshot(
        path=str(screenshot(page, "health-panel-1440").with_name("health-panel-only-1440.png"))
    )

    panel.get_by_test_id("health-calls-link").click()
    page.wait_for_url(f"**/console/customers/{student_id}/calls")
    calls = page.get_by_test_id("call")
    assert calls.count() == 4
    freshness = [calls.nth(i).get_attribute("data-freshness") for i in range(4)]
    assert freshness == ["none", "none", "cached", "fresh"]
    assert "fresh from the booking system" in calls.nth(3).inner_text()
    assert "cached, 1 min 35 s old" in calls.nth(2).inner_text()
    assert "invalid_arguments" in calls.nth(1).inner_text()
    assert "assistant (production)" in calls.nth(0).inner_text()
    assert "123456" not in page.content()  # a reservation id is never kept
    assert _width(page) <= 1440, f"the call log is {_width(page)} px wide on 1,440 px"
    screenshot(page, "call-log-1440")
    assert_accessible(page, "call-log")

    # Filter by outcome: bookmarkable query parameters.
    page.get_by_test_id("calls-outcome").select_option("error")
    page.get_by_test_id("calls-filter").click()
    page.wait_for_url(re.compile(r"/calls\?.*outcome=error"))
    assert page.get_by_test_id("call").count() == 2
    assert (
        page.get_by_test_id("calls-export-csv")
        .get_attribute("href")
        .endswith("calls.csv?outcome=error")
    )

    page.set_viewport_size(PHONE)
    page.goto(f"{live_console.url}/console/customers/{student_id}/calls")
    assert page.get_by_test_id("call").count() == 4
    assert _width(page) <= PHONE["width"], f"the call log is {_width(page)} px wide on a phone"
    screenshot(page, "call-log-390")
    page.goto(f"{live_console.url}/console/customers/{student_id}#health")
    assert _width(page) <= PHONE["width"], f"the customer page is {_width(page)} px on a phone"
    page.get_by_test_id("health-panel").screenshot(
        path=str(screenshot(page, "health-panel-390").with_name("health-panel-only-390.png"))
    )
