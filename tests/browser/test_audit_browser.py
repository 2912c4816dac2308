"""The admin's audit trail in Chromium: it fits a 1,440 px screen with long values, the
customer and actor pickers narrow it, and both exports download the selection.

Screenshots: ``test-artifacts/screenshots/audit-*.png``.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qs, urlparse

from pmsgate.audit.actions import Actor, AuditAction, Outcome
from tests.browser.accessibility import assert_accessible
from tests.browser.conftest import LiveConsole, screenshot
from tests.browser.test_admin_browser import sign_in_as_admin
from tests.web.support import WebSandbox

TEAM_MATE = "ops.colleague.with.a.rather.long.address@platform-team.example"


async def _events(sandbox: WebSandbox) -> None:
    """Events of two actors; one with the long, unbroken values that used to widen the page."""
    await sandbox.web.audit.record(
        AuditAction.CONSOLE_ACTION,
        actor=Actor.admin(TEAM_MATE),
        subject=f"customer:{sandbox.student_id}",
        outcome=Outcome.SUCCESS,
        details={"operation": "resend-sign-in-link", "idempotency_key": "k" * 120},
        student_id=sandbox.student_id,
    )
    await sandbox.web.audit.record(
        AuditAction.KEY_MINTED,
        actor=Actor.admin("admin@example.com"),
        subject="facility:" + "h" * 90,
        outcome=Outcome.SUCCESS,
        details={"label": "x" * 150},
    )


def _query(page: Any) -> dict[str, list[str]]:
    return parse_qs(urlparse(page.url).query)


def test_the_audit_trail_fits_the_screen_and_filters_with_pickers(
    page: Any, live_console: LiveConsole
) -> None:
    live_console.run(_events)
    page.set_viewport_size({"width": 1440, "height": 900})
    sign_in_as_admin(page, live_console)
    page.goto(f"{live_console.url}/console/audit")
    assert page.get_by_test_id("audit-event").count() >= 2
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= 1440, f"the audit page is {width} px wide on a 1,440 px screen"
    screenshot(page, "audit-admin-1440")
    assert_accessible(page, "audit-admin")

    # The customer picker offers the customers by name; the actor picker who acted lately.
    customers = page.locator("#audit-customers option")
    assert live_console.sandbox.student_id in [
        customers.nth(i).get_attribute("value") for i in range(customers.count())
    ]
    actors = page.locator("#audit-actors option")
    assert TEAM_MATE in [actors.nth(i).get_attribute("value") for i in range(actors.count())]

    page.get_by_test_id("audit-actor").fill(TEAM_MATE)
    page.get_by_test_id("audit-action").select_option("console.action")
    page.get_by_test_id("audit-filter").click()
    page.wait_for_url(re.compile(r"actor="))
    assert _query(page)["actor"] == [TEAM_MATE]
    rows = page.get_by_test_id("audit-event")
    assert rows.count() == 1
    assert rows.first.get_attribute("data-action") == "console.action"
    assert page.get_by_test_id("audit-action").input_value() == "console.action"
    screenshot(page, "audit-admin-by-actor")

    # Both exports carry the same selection.
    with page.expect_download() as csv_download:
        page.get_by_test_id("audit-export-csv").click()
    csv_text = open(csv_download.value.path(), encoding="utf-8-sig").read()  # noqa: SIM115
    assert csv_text.splitlines()[0].startswith("occurred_at,action,outcome")
    assert len(csv_text.strip().splitlines()) == 2 and TEAM_MATE in csv_text
    with page.expect_download() as jsonl_download:
        page.get_by_test_id("audit-export").click()
    lines = open(jsonl_download.value.path(), encoding="utf-8").read().splitlines()  # noqa: SIM115
    assert [json.loads(line)["actor"] for line in lines] == [TEAM_MATE]

    # Clicking an actor's name narrows to that actor; the customer picker to one customer.
    page.get_by_test_id("audit-clear").click()
    page.get_by_role("link", name="admin@example.com").first.click()
    page.wait_for_url(re.compile(r"actor=admin%40example.com"))
    assert {
        page.get_by_test_id("audit-event").nth(i).get_attribute("data-action")
        for i in range(page.get_by_test_id("audit-event").count())
    } >= {"key.minted"}
    page.goto(f"{live_console.url}/console/audit")
    page.get_by_test_id("audit-customer").fill(live_console.sandbox.student_id)
    page.get_by_test_id("audit-filter").click()
    page.wait_for_url(re.compile(r"customer="))
    assert page.get_by_test_id("audit-event").count() >= 1


def test_an_unknown_customer_in_the_filter_is_a_clear_error(
    page: Any, live_console: LiveConsole
) -> None:
    sign_in_as_admin(page, live_console)
    page.goto(f"{live_console.url}/console/audit?customer=nobody-here")
    assert page.get_by_test_id("error").get_attribute("data-code") == "unknown_customer_filter"
