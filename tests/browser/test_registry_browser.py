"""The registry panel in Chromium: a wrongly mapped apartment is shown and fixed (spec §7)."""

from __future__ import annotations

import re
from typing import Any

from tests.browser.conftest import LiveConsole, screenshot
from tests.browser.test_console_browser import sign_in
from tests.web.support import WebSandbox


def test_a_customer_sees_the_wrong_listing_and_fixes_the_registry(
    page: Any, live_console: LiveConsole
) -> None:
    async def swap(sandbox: WebSandbox) -> tuple[str, str]:
        first, second = sandbox.enrolled.room_type_ids[:2]
        apartments = sandbox.web.customers.apartments
        listing = (await apartments.get(sandbox.student_id, first)).assistant_listing_id
        await apartments.update_listing(sandbox.student_id, first, None)
        await apartments.update_listing(sandbox.student_id, second, listing)
        return first, second

    first, second = live_console.run(swap)
    sign_in(page, live_console, live_console.customer)
    page.wait_for_url(re.compile(rf"/console/customers/{live_console.sandbox.student_id}$"))
    panel = page.locator("#registry")
    panel.get_by_test_id("registry-check").click()
    page.locator('#registry[data-status="problems"]').wait_for()
    rows = panel.get_by_test_id("registry-apartment")
    problems = {
        rows.nth(i).get_attribute("data-room-type"): rows.nth(i).get_attribute("data-problem")
        for i in range(rows.count())
    }
    assert problems[first] == "not_mapped" and problems[second] == "room_type_mismatch"
    assert "Listing unavailable" in panel.inner_text()
    panel.scroll_into_view_if_needed()
    screenshot(page, "registry-panel-problems")

    panel.get_by_test_id("registry-fix").click()
    page.locator('#registry[data-status="ok"]').wait_for()
    result = page.locator("#registry").get_by_test_id("registry-fix-result")
    assert result.get_attribute("data-changes") == "2"
    assert "The registry was fixed" in result.inner_text()
    page.locator("#registry").scroll_into_view_if_needed()
    screenshot(page, "registry-panel-fixed")
