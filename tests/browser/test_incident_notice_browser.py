"""An incident notice's one-time link, followed in Chromium as the customer would.

The booking-system password changes in the emulator, the connection check puts the
facility in ``error``, ``notify-incidents`` writes the customer's notice to the outbox;
the test opens the notice's link, continues, lands on its page at the reconnect form,
reconnects with the new password, and finds the link spent afterwards. Screenshots go
to test-artifacts/screenshots/incident-*.png.
"""

from __future__ import annotations

import asyncio
import email.policy
import re
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from email.message import EmailMessage
from email.parser import BytesParser
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from pmsgate.jobs.connections import check_facility
from pmsgate.jobs.notify import notify_incidents
from tests.browser.conftest import LiveConsole, screenshot
from tests.customers.support import profile_of
from tests.e2e.processes import free_port
from tests.web.support import WebSandbox, web_sandbox

NEW_PASSWORD = "a-new-api-password-incident"


def _serve(tmp: Path, ready: Future[LiveConsole]) -> None:
    async def main() -> None:
        port = free_port()
        overrides = {
            "data_dir": tmp,
            "public_url": f"http://127.0.0.1:{port}",
            "notify_team_email": "ops@platform.example",
        }
        database_url = f"sqlite+aiosqlite:///{tmp / 'console.db'}"
        async with web_sandbox(database_url, settings_overrides=overrides) as sandbox:
            owner = profile_of(sandbox.enrolled.facility).email
            customer = await sandbox.add_user("customer", email=owner)
            server = uvicorn.Server(
                uvicorn.Config(sandbox.app, host="127.0.0.1", port=port, log_config=None)
            )
            serving = asyncio.create_task(server.serve())
            while not server.started:  # noqa: ASYNC110  # uvicorn has no awaitable for it
                await asyncio.sleep(0.02)
            ready.set_result(
                LiveConsole(
                    url=f"http://127.0.0.1:{port}",
                    admin=customer,
                    customer=customer,
                    other_customer=customer,
                    sandbox=sandbox,
                    loop=asyncio.get_running_loop(),
                    server=server,
                )
            )
            await serving

    try:
        asyncio.run(main())
    except BaseException as error:  # surface a start-up failure in the test, not a hang
        if not ready.done():
            ready.set_exception(error)
        raise


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveConsole]:
    ready: Future[LiveConsole] = Future()
    thread = threading.Thread(
        target=_serve, args=(tmp_path_factory.mktemp("incident"), ready), daemon=True
    )
    thread.start()
    served = ready.result(timeout=120)
    try:
        yield served
    finally:
        served.stop()
        thread.join(timeout=30)


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
    stranger = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        other = stranger.new_page()
        answer = other.goto(link)
        assert answer is not None and answer.status == 410
        assert other.get_by_test_id("login-link-error").get_attribute("data-state") == "used"
        assert other.get_by_test_id("login-link-sign-in").is_visible()
        screenshot(other, "incident-link-used")
    finally:
        stranger.close()
