"""Incidents in Chromium, as a platform-team member would triage them among 300 customers.

300 generated customers (every 10th linked one in ``error``) next to the sandbox's
enrolled customer; the enrolled facility's password changes in the booking-system
emulator, the connection check puts it in ``error`` and the ``notify-incidents`` tick
opens its incident and sends its notices. The admin finds it on "Needs attention" with
its age and the notices sent, opens it, presses *Check now* and *Resend the sign-in link*
(both appear in its timeline), acknowledges it (it leaves the open ones) and snoozes it
(it is listed as snoozed). Screenshots: test-artifacts/screenshots/incident-console-*.png.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from pmsgate.demo.fleet import generate_customers
from pmsgate.jobs.connections import check_facility
from pmsgate.jobs.notify import notify_incidents
from tests.browser.accessibility import assert_accessible
from tests.browser.conftest import (
    Accounts,
    LiveConsole,
    english_owner,
    screenshot,
    serve_notifying_console,
)
from tests.web.support import WebSandbox

COUNT = 300
CHUNK = 50
NEW_PASSWORD = "a-new-api-password-triage"


async def _accounts(sandbox: WebSandbox) -> Accounts:
    """An admin, and the enrolled customer's owner (the address its notices go to)."""
    customer = await english_owner(sandbox)
    admin = await sandbox.add_user("admin", email="lead@platform.example")
    return admin, customer, customer


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveConsole]:
    with serve_notifying_console(tmp_path_factory.mktemp("incidents"), _accounts) as served:
        for start in range(0, COUNT, CHUNK):

            async def generate(sandbox: WebSandbox, start: int = start) -> None:
                await generate_customers(
                    sandbox.web.customers, sandbox.web.clock, count=CHUNK, start=start
                )

            served.run(generate)

        async def break_and_tick(sandbox: WebSandbox) -> None:
            sandbox.enrolled.sandbox.kross.change_password(sandbox.hotel_id, NEW_PASSWORD)
            outcome, _ = await check_facility(sandbox.gateway, sandbox.hotel_id)
            assert outcome == "now_in_error"
            await notify_incidents(sandbox.web)
            sandbox.enrolled.clock.advance(3 * 3600 + 120)  # the team looks three hours later

        served.run(break_and_tick)
        yield served


def shot(page: Any, name: str) -> None:
    """The page in test-artifacts/screenshots/ and in /tmp (to look at)."""
    path = screenshot(page, f"incident-console-{name}")
    page.screenshot(path=f"/tmp/incident-console-{name}.png")  # what the window shows first
    assert path.exists()


def sign_in(page: Any, live: LiveConsole, then: str) -> None:
    page.goto(f"{live.url}{then}")
    page.wait_for_url(re.compile(r"/login"))
    page.get_by_test_id("login-email").fill(live.admin[0])
    page.get_by_test_id("login-password").fill(live.admin[1])
    page.get_by_test_id("login-submit").click()
    page.wait_for_url(re.compile(re.escape(then)))


def the_row(page: Any, live: LiveConsole) -> Any:
    return page.locator(
        f'[data-testid="incident-row"][data-student-id="{live.sandbox.student_id}"]'
    )


def timeline_kinds(page: Any) -> list[str]:
    lines = page.get_by_test_id("timeline-line")
    return [lines.nth(i).get_attribute("data-kind") for i in range(lines.count())]


def test_a_broken_password_is_triaged_from_the_incident_list(page: Any, live: LiveConsole) -> None:
    sign_in(page, live, "/console/attention")
    rows = page.get_by_test_id("incident-row")
    assert rows.count() > 20  # the fleet's facilities in error, and ours
    row = the_row(page, live)
    assert row.get_attribute("data-state") == "open"
    assert row.get_by_test_id("incident-age").inner_text() == "in error for 3 h"
    notices = row.get_by_test_id("incident-notices").inner_text()
    assert "customer" in notices and "team" in notices
    shot(page, "list")
    assert_accessible(page, "incident-console-list")

    row.get_by_test_id("incident-link").click()
    page.wait_for_url(re.compile(r"/console/incidents/\d+$"))
    assert page.get_by_test_id("incident-age-line").inner_text() == "in error for 3 h"
    assert page.get_by_test_id("incident-customer-told").inner_text() != "not yet"
    shot(page, "page")

    page.get_by_test_id("incident-check").click()
    page.wait_for_url(re.compile(r"done=check_refused"))
    assert "check" in timeline_kinds(page)
    assert page.get_by_test_id("incident-count").inner_text() == "2"
    page.get_by_test_id("incident-resend").click()
    page.wait_for_url(re.compile(r"done=resend_sign-in"))
    assert "link_resent" in timeline_kinds(page)
    assert "Sign-in link resent to" in page.get_by_test_id("incident-timeline").inner_text()
    shot(page, "checked-and-resent")

    page.get_by_test_id("incident-acknowledge").first.click()
    page.wait_for_url(re.compile(r"done=acknowledge"))
    state = page.get_by_test_id("incident-state").first
    assert state.get_attribute("data-state") == "acknowledged"
    page.goto(f"{live.url}/console/attention?state=open")
    assert the_row(page, live).count() == 0
    page.goto(f"{live.url}/console/attention?state=acknowledged")
    assert the_row(page, live).count() == 1
    shot(page, "acknowledged")

    the_row(page, live).get_by_test_id("incident-snooze-1h").click()
    page.wait_for_url(re.compile(r"done=snooze"))
    assert the_row(page, live).count() == 0  # no longer acknowledged: snoozed
    page.goto(f"{live.url}/console/attention?state=snoozed")
    row = the_row(page, live)
    assert row.get_attribute("data-state") == "snoozed"
    assert row.get_by_test_id("incident-state-detail").inner_text().startswith("until ")
    shot(page, "snoozed")

    # The customer's page has the same panel near the top.
    page.goto(f"{live.url}/console/customers/{live.sandbox.student_id}")
    panel = page.get_by_test_id("incident-panel")
    assert "in error for 3 h" in panel.inner_text()
    assert "link_resent" in timeline_kinds(page)
    shot(page, "customer-panel")
