"""A customer's own page in Chromium (issue 16 items 3, 6, 7): each state, looked at and checked.

The customer signs in and reads the plain page; checks its notes; loses its booking-system
connection (the password changes upstream) and sees it first on its to-do list; a check
of the notes then is a warning, not a success; it reconnects through #reconnect (where an
incident notice's sign-in link lands), updates its knowledge and reads the result in words.
A Route B customer sees no sync at all. Every state is screenshotted under
test-artifacts/screenshots/ and checked with axe-core (no serious or critical violation)
and for a visible keyboard focus (tests/browser/accessibility.py).
"""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

from pmsgate.gateway.usage import UsageHistory
from pmsgate.jobs.connections import check_facility
from pmsgate.storage.gateway_usage import HourCounts, hour_start
from tests.browser.accessibility import assert_accessible, assert_focus_visible
from tests.browser.conftest import LiveConsole, onboarded_on_route_b, screenshot
from tests.browser.test_console_browser import sign_in
from tests.customers.support import student_id_of
from tests.web.support import WebSandbox
from tests.web.test_customer_console import INTERNAL_WORDS

_CAMEL = re.compile(r"\b[a-z]+[A-Z][A-Za-z]*\b")


def assert_plain_page(page: Any, live: LiveConsole, *, student_id: str) -> None:
    """What the customer reads holds no internal word (ids, codes, counters, commands)."""
    text = page.locator("body").inner_text()
    sandbox = live.sandbox
    internal = [*INTERNAL_WORDS, student_id]
    if student_id == sandbox.student_id:
        internal += [sandbox.assistant, sandbox.hotel_id]
    found = [word for word in internal if word in text]
    assert not found, f"internal words on the customer's page: {found}"
    # A key's display prefix (<code>, e.g. "pgk_vCAeKf…") is random text, not a counter name.
    words = page.evaluate(
        "() => Array.from(document.body.querySelectorAll('code'))"
        ".reduce((t, c) => t.replace(c.innerText, ''), document.body.innerText)"
    )
    assert not _CAMEL.findall(words), _CAMEL.findall(words)


def check_page(page: Any, live: LiveConsole, name: str, *, student_id: str) -> None:
    """Screenshot, accessibility and plain words of the page as it is now."""
    screenshot(page, name)
    assert_plain_page(page, live, student_id=student_id)
    assert_accessible(page, name)


def answer(page: Any, key: str) -> tuple[str, str]:
    """One of the page's answers: its tone and headline."""
    box = page.get_by_test_id(f"answer-{key}")
    return box.get_attribute("data-tone"), box.locator(".headline").inner_text()


def todos(page: Any) -> list[str]:
    """The to-do list, in order."""
    return [t.strip() for t in page.get_by_test_id("todo").all_inner_texts()]


async def _seed_usage(sandbox: WebSandbox) -> None:
    """Four 6-hourly snapshots since a baseline and two days of hourly gateway counts."""
    now = sandbox.enrolled.clock.now()
    usage = sandbox.web.customers.usage
    figures = [(20, 400, 150, 150), (22, 460, 190, 180), (25, 540, 250, 230), (29, 650, 300, 290)]
    for i, (usd, messages, calls, upstream) in enumerate(figures):
        await usage.record(
            sandbox.student_id,
            taken_at=now - timedelta(hours=18 - 6 * i),
            usd_spent=Decimal(usd),
            messages=messages,
            tool_calls=calls,
            upstream_calls=upstream,
            kind="baseline" if i == 0 else "periodic",
        )
    first = hour_start(now) - timedelta(hours=47)
    counts = {
        (sandbox.hotel_id, first + timedelta(hours=h)): HourCounts(
            tool_calls=(h * 7) % 23 + (12 if 8 <= (first.hour + h) % 24 <= 20 else 0),
            upstream_calls=(h * 5) % 11 + 2,
        )
        for h in range(48)
    }
    await UsageHistory(sandbox.web.customers.sessions).add(counts)


def test_a_customer_reads_its_page_loses_the_connection_and_gets_it_back(
    page: Any, live_console: LiveConsole
) -> None:
    live = live_console
    sandbox = live.sandbox
    student_id = sandbox.student_id
    live.run(_seed_usage)
    sign_in(page, live, live.customer)
    page.wait_for_url(re.compile(rf"/console/customers/{student_id}$"))
    assert answer(page, "booking") == ("ok", "Yes, connected")
    assert page.get_by_test_id("sync-commit").is_visible()
    assert page.locator('[data-testid^="chart-"][data-empty="false"]').count() == 3
    check_page(page, live, "customer-home-connected", student_id=student_id)
    assert assert_focus_visible(page) >= 5

    # Check the notes: the result in words, with what to fix.
    page.get_by_test_id("sync-dry-run").click()
    page.locator('[data-testid="sync-job"][data-status="succeeded"]').wait_for()
    headline = page.get_by_test_id("sync-headline").inner_text()
    assert headline.startswith("Check finished")
    apartments = len(sandbox.enrolled.facility["apartments"])
    assert f"{apartments} apartments checked" in page.get_by_test_id("sync-lines").inner_text()
    check_page(page, live, "customer-dry-run", student_id=student_id)

    # The API password changes in the booking system; the scheduled check finds out.
    new_password = "a-new-api-password-2026"

    async def change_password_upstream(sandbox: WebSandbox) -> None:
        sandbox.enrolled.sandbox.kross.change_password(sandbox.hotel_id, new_password)
        outcome, _ = await check_facility(sandbox.gateway, sandbox.hotel_id)
        assert outcome == "now_in_error"

    live.run(change_password_upstream)
    page.reload()
    assert answer(page, "booking") == ("bad", "No — the connection is down")
    assert "Reconnect your booking system" in todos(page)[0]
    assert page.get_by_test_id("todo").first.get_attribute("data-who") == "you"
    assert page.locator("#pms").get_by_test_id("pms-status").inner_text() == "not connected"
    check_page(page, live, "customer-connection-down", student_id=student_id)

    # A check of the notes now: a warning that nothing can sync, not a green success.
    with page.expect_response(lambda r: r.url.endswith("/sync") and r.request.method == "POST"):
        page.get_by_test_id("sync-dry-run").click()
    warning = "Nothing can sync until you reconnect your booking system"
    page.get_by_test_id("sync-headline").filter(has_text=warning).wait_for()
    job = page.get_by_test_id("sync-job")
    assert (job.get_attribute("data-status"), job.get_attribute("data-tone")) == (
        "succeeded",
        "warn",
    )
    check_page(page, live, "customer-dry-run-while-disconnected", student_id=student_id)

    # The incident notice's link lands on the reconnect form.
    page.goto(f"{live.url}/console/audit")
    page.goto(f"{live.url}/console/customers/{student_id}#reconnect")
    page.locator("#reconnect").wait_for()
    page.wait_for_function(
        "() => { const r = document.getElementById('reconnect').getBoundingClientRect();"
        " return window.scrollY > 0 && r.top > -2 && r.top < window.innerHeight; }",
        timeout=5_000,
    )
    screenshot(page, "customer-reconnect-link-lands")
    page.get_by_label("API password").fill("not-the-password")
    page.get_by_role("button", name="Reconnect").click()
    page.get_by_test_id("reconnect-error").wait_for()
    assert page.locator("#pms").get_by_test_id("pms-status").inner_text() == "not connected"
    check_page(page, live, "customer-reconnect-refused", student_id=student_id)
    page.get_by_label("API password").fill(new_password)
    page.get_by_role("button", name="Reconnect").click()
    page.get_by_test_id("reconnect-result").wait_for()
    assert page.locator("#pms").get_by_test_id("pms-status").inner_text() == "connected"
    # The summary at the top follows without a reload (htmx swaps it out of band).
    assert answer(page, "booking") == ("ok", "Yes, connected")
    assert not any("Reconnect your booking system" in t for t in todos(page))
    assert any("Check your notes again" in t for t in todos(page))
    assert page.get_by_test_id("sync-headline").inner_text() == (
        "The last check ran while your booking system was disconnected"
    )
    screenshot(page, "customer-reconnected")

    # Update the knowledge: created / updated / unchanged and what was blocked, in words.
    page.reload()
    assert answer(page, "booking") == ("ok", "Yes, connected")
    page.get_by_test_id("sync-commit").click()
    page.locator('[data-testid="sync-job"][data-kind="commit"][data-status="succeeded"]').wait_for()
    page.locator('[data-testid="answer-knowledge"]:not([data-tone="busy"])').wait_for()
    assert answer(page, "knowledge")[1] in ("Yes", "Partly")
    lines = page.get_by_test_id("sync-lines").inner_text()
    assert "of knowledge added" in lines and "already up to date" in lines
    page.reload()
    events = page.get_by_test_id("event").all_inner_texts()
    assert any("You started an update of the knowledge." in e for e in events)
    assert any("connection lost" in e for e in events)
    check_page(page, live, "customer-after-update", student_id=student_id)

    # All of its activity, in words.
    page.get_by_test_id("all-activity").click()
    page.wait_for_url(re.compile(r"/console/audit$"))
    assert page.get_by_test_id("audit-event").count() >= 5
    check_page(page, live, "customer-activity", student_id=student_id)
    assert_focus_visible(page)

    # A fragment URL opened directly is the whole styled page, at the panel.
    page.goto(f"{live.url}/console/customers/{student_id}/sync")
    page.wait_for_url(re.compile(r"#knowledge$"))
    background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(246, 247, 249)"  # console.css applied
    assert page.get_by_test_id("answers").is_visible()


def test_a_route_b_customer_sees_no_sync_and_what_applies_instead(
    page: Any, live_console: LiveConsole
) -> None:
    live = live_console
    other = student_id_of(live.sandbox.enrolled.sandbox.kross.facility_summaries()[1])

    live.run(lambda sandbox: onboarded_on_route_b(sandbox, other))
    sign_in(page, live, live.other_customer)
    page.wait_for_url(re.compile(r"/console/customers/"))
    assert page.get_by_test_id("sync-dry-run").count() == 0
    assert page.get_by_test_id("sync-commit").count() == 0
    assert (
        "straight from your booking system" in page.get_by_test_id("knowledge-route-b").inner_text()
    )
    # Live, but this customer's booking system is not linked yet: a warning, and ours to do.
    assert answer(page, "assistant") == ("warn", "Live, but it cannot see your bookings")
    assert todos(page) == ["Wait for us: we are connecting your booking system."]
    check_page(page, live, "customer-route-b", student_id=other)
    assert_focus_visible(page)
    # On a phone: one column, nothing wider than the screen.
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    check_page(page, live, "customer-route-b-phone", student_id=other)


def test_the_sign_in_page_and_a_refusal_are_accessible(
    page: Any, live_console: LiveConsole
) -> None:
    live = live_console
    page.goto(f"{live.url}/login")
    screenshot(page, "customer-sign-in")
    assert_accessible(page, "customer-sign-in")
    assert assert_focus_visible(page) >= 3
    sign_in(page, live, live.other_customer)
    page.wait_for_url(re.compile(r"/console/customers/"))
    answer = page.goto(f"{live.url}/console/customers/{live.sandbox.student_id}")
    assert answer is not None and answer.status == 403
    screenshot(page, "customer-refused-another-page")
    assert_accessible(page, "customer-refused-another-page")
