"""The consent to an app, the connected apps and the webhooks page, on a phone in Italian.

A property operator opens them on a 390 px screen with an Italian browser: the consent says
which app gets what on which property and for how long; the webhooks page shows a failed
delivery in words with its next action, and a new secret once. Each page is looked at
(screenshots under test-artifacts/screenshots/), checked with axe-core and for horizontal
scrolling.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pmsgate.audit.actions import Actor
from tests.browser.accessibility import assert_accessible
from tests.browser.conftest import LiveConsole, screenshot, serve_console
from tests.oauth.support import REDIRECT_URI, authorize_url, pkce
from tests.web.support import WebSandbox
from tests.webhooks.support import Receiver, receiver

PHONE = {"width": 390, "height": 844}
ADMIN = Actor.admin("admin@example.com")
# Words of the pages' English that must not be on the Italian ones.
ENGLISH = ("Allow", "Deny", "secret", "Subscriptions", "Deliveries", "Send again", "given up")


@pytest.fixture(scope="module")
def hook() -> Iterator[Receiver]:
    """A loopback receiver; its first answer is a 500 (a delivery that fails)."""
    with receiver() as state:
        yield state


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, hook: Receiver) -> Iterator[LiveConsole]:
    """The console with open app registration and a webhook whose only delivery failed."""

    def settings(tmp: Path, port: int) -> dict[str, Any]:
        return {
            "public_url": f"http://127.0.0.1:{port}",
            "oauth_client_registration": True,
            "webhook_allow_loopback_http": True,
            "webhook_max_attempts": 1,
            "data_dir": tmp,
        }

    with serve_console(
        tmp_path_factory.mktemp("oauth-webhooks"), settings_overrides=settings
    ) as live:

        async def failed_delivery(sandbox: WebSandbox) -> None:
            await sandbox.web.webhooks.subscribe(
                sandbox.student_id, hook.url, ["facility.connection_lost"], actor=ADMIN
            )
            hook.statuses = [500]
            await sandbox.gateway.facilities.mark_error(sandbox.hotel_id, "refused")
            await sandbox.web.webhook_deliverer.run()
            await sandbox.gateway.facilities.mark_connected(sandbox.hotel_id)

        live.run(failed_delivery)
        yield live


def looked_at(page: Any, name: str) -> None:
    """Screenshot, axe-core, Italian, and no horizontal scroll on the phone."""
    screenshot(page, name)
    assert_accessible(page, name)
    assert page.locator("html").get_attribute("lang") == "it"
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"{name}: {width} px wide on a 390 px screen"
    text = page.locator("body").inner_text()
    found = [word for word in ENGLISH if word in text]
    assert not found, f"{name}: English on an Italian page: {found}"


def authorize_path(live: LiveConsole) -> str:
    """An app registered as "Claude": its authorization request, as the app would send it."""
    registered = httpx.post(
        f"{live.url}/oauth/register",
        json={
            "redirect_uris": [REDIRECT_URI],
            "client_name": "Claude",
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        },
    )
    assert registered.status_code == 201, registered.text
    _, challenge = pkce()
    return authorize_url(registered.json()["client_id"], challenge, resource=f"{live.url}/mcp")


def test_an_operator_connects_an_app_and_reads_the_webhooks_on_an_italian_phone(
    browser: Any, live: LiveConsole, hook: Receiver
) -> None:
    context = browser.new_context(viewport=PHONE, locale="it-IT", timezone_id="Europe/Rome")
    page = context.new_page()
    page.set_default_timeout(30_000)
    # The app's redirect URI answers in place of the app.
    page.route(f"{REDIRECT_URI}**", lambda route: route.fulfill(status=200, body="ok"))
    try:
        page.goto(live.url + authorize_path(live))  # not signed in: sign in, then back
        page.wait_for_url(re.compile(r"/login"))
        page.get_by_test_id("login-email").fill(live.customer[0])
        page.get_by_test_id("login-password").fill(live.customer[1])
        page.get_by_test_id("login-submit").click()
        page.wait_for_url(re.compile(r"/console/oauth/consent"))

        consent = page.get_by_test_id("oauth-consent")
        assert "Collegare “Claude” al tuo gestionale?" in consent.inner_text()
        assert page.get_by_test_id("oauth-facility").locator("option").count() == 1
        assert "30 giorni" in page.get_by_test_id("oauth-duration").inner_text()
        looked_at(page, "oauth-consent-phone-it")
        page.get_by_test_id("oauth-allow").click()
        page.wait_for_url(re.compile(r"code="))

        page.goto(f"{live.url}/console/oauth/grants")
        assert page.get_by_test_id("oauth-grant-state").inner_text() == "attiva"
        looked_at(page, "oauth-grants-phone-it")

        page.goto(f"{live.url}/console/webhooks")
        failed = page.locator('[data-testid="webhook-delivery"][data-status="failed"]')
        assert "non consegnato" in failed.inner_text()
        assert failed.get_by_role("button", name="Invia di nuovo").is_visible()
        form = page.get_by_test_id("webhook-subscribe-form")
        form.get_by_label("Indirizzo web (URL) che riceve i messaggi").fill(hook.url)
        form.get_by_label("La connessione al gestionale funziona di nuovo").check()
        form.get_by_role("button", name="Aggiungi webhook").click()
        page.get_by_test_id("webhook-secret-value").wait_for()
        assert page.get_by_test_id("webhook-secret-value").inner_text().startswith("whsec_")
        looked_at(page, "webhooks-phone-it")
    finally:
        context.close()
