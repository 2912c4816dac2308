"""An incident notice's one-time link, followed in Chromium as the customer would.

The booking-system password changes in the emulator, the connection check puts the
facility in ``error``, ``notify-incidents`` writes the customer's notice to the outbox;
the test opens the notice's link, continues, lands on its page at the reconnect form,
reconnects with the new password, and finds the link spent afterwards. Screenshots go
to test-artifacts/screenshots/incident-*.png.
"""

from __future__ import annotations

import email.policy
import re
from collections.abc import Iterator
from email.message import EmailMessage
from email.parser import BytesParser
from typing import Any

import pytest

from pmsgate.jobs.connections import check_facility
from pmsgate.jobs.notify import notify_incidents
from tests.browser.conftest import (
    Accounts,
    LiveConsole,
    english_owner,
    screenshot,
    serve_notifying_console,
)
from tests.customers.support import profile_of
from tests.web.support import WebSandbox

NEW_PASSWORD = "a-new-api-password-incident"


async def _owner_only(sandbox: WebSandbox) -> Accounts:
    """The enrolled customer's owner (the address its notices go to), in every role."""
    customer = await english_owner(sandbox)
    return customer, customer, customer


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveConsole]:
    with serve_notifying_console(tmp_path_factory.mktemp("incident"), _owner_only) as served:
        yield served


def _customer_notices(sandbox: WebSandbox) -> list[EmailMessage]:
    outbox = sandbox.web.settings.data_dir / "outbox"
    owner = profile_of(sandbox.enrolled.facility).email
    found: list[EmailMessage] = []
    for path in sorted(outbox.glob("incident-*.eml")):
        with path.open("rb") as handle:
            message = BytesParser(policy=email.policy.default).parse(handle)
        assert isinstance(message, EmailMessage)
        if message["To"] == owner:
            found.append(message)
    return found


def test_the_notice_link_signs_the_customer_in_on_the_reconnect_form(
    page: Any, browser: Any, live: LiveConsole
) -> None:
    async def break_and_notify(sandbox: WebSandbox) -> str:
        sandbox.enrolled.sandbox.kross.change_password(sandbox.hotel_id, NEW_PASSWORD)
        outcome, _ = await check_facility(sandbox.gateway, sandbox.hotel_id)
        assert outcome == "now_in_error"
        await notify_incidents(sandbox.web)
        [notice] = _customer_notices(sandbox)
        body = notice.get_body(preferencelist=("plain",))
        assert body is not None
        found = re.search(r"http://127\.0\.0\.1:\d+/login/link/[A-Za-z0-9_-]+", body.get_content())
        assert found
        return found.group(0)

    link = live.run(break_and_notify)
    student_id = live.sandbox.student_id

    page.goto(link)
    page.get_by_test_id("login-link-continue").wait_for()
    screenshot(page, "incident-link-continue")
    page.get_by_test_id("login-link-continue").click()
    page.wait_for_url(re.compile(rf"/console/customers/{student_id}#reconnect$"))
    form = page.locator("#reconnect")
    form.wait_for()
    assert form.is_visible()
    assert form.locator("input[type=password]").first.is_visible()
    screenshot(page, "incident-link-reconnect-form")

    form.locator("input[type=password]").first.fill(NEW_PASSWORD)
    form.locator("button[type=submit]").click()
    page.get_by_test_id("reconnect-result").wait_for()
    screenshot(page, "incident-reconnected")

    async def notify_again(sandbox: WebSandbox) -> list[str]:
        await notify_incidents(sandbox.web)
        return [str(message["Subject"]) for message in _customer_notices(sandbox)]

    subjects = live.run(notify_again)
    assert sorted(subjects) == [
        "Action needed: reconnect your booking system",
        "Your booking system is connected again",
    ]

    # Spent: someone else opening the link gets a page saying so, and the way to sign in.
    stranger = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-GB")
    try:
        other = stranger.new_page()
        answer = other.goto(link)
        assert answer is not None and answer.status == 410
        assert other.get_by_test_id("login-link-error").get_attribute("data-state") == "used"
        assert other.get_by_test_id("login-link-sign-in").is_visible()
        screenshot(other, "incident-link-used")
    finally:
        stranger.close()
