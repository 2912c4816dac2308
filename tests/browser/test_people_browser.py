"""The property operator's side in Chromium, in Italian and English, on a desk and a phone.

Tried as a new user would: the invitation's link → a password chosen → the
first sign-in on their own page, in their language, with the brand and Rome times;
"forgot password"; a reconnect whose result is where the eye is; a form sent after the
session ended keeps what was typed; a Route B customer's page. Every page is looked at
(screenshots under test-artifacts/screenshots/), checked with axe-core, and on a 390 px
screen checked for horizontal scrolling.
"""

from __future__ import annotations

import email
import email.policy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pmsgate.audit.actions import Actor
from pmsgate.jobs.connections import check_facility
from tests.browser.accessibility import assert_accessible
from tests.browser.conftest import LiveConsole, onboarded_on_route_b, screenshot, serve_console
from tests.customers.support import student_id_of
from tests.web.support import WebSandbox

BRAND = "Ospiti Felici"
SUPPORT = "aiuto@ospitifelici.example"
PASSWORD = "tre gatti sul tetto di casa"
DESK = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
# English words that must not be on an Italian page (labels, headings, buttons).
ENGLISH = (
    "Sign out",
    "Booking system",
    "What to do now",
    "Your assistant",
    "Is my",
    "Reconnect",
    "Password",
    "Usage",
    "Recent activity",
    "UTC",
    "pmsgate",
)


def _settings(tmp: Path, port: int) -> dict[str, Any]:
    return {
        "public_url": f"http://127.0.0.1:{port}",
        "brand_name": BRAND,
        "support_email": SUPPORT,
        "support_phone": "+39 02 1234 5678",
        "data_dir": tmp,  # the module's own outbox
    }


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveConsole]:
    """The console with a brand, a support contact and its public address (for links)."""
    with serve_console(tmp_path_factory.mktemp("people"), settings_overrides=_settings) as live:
        yield live


def browser_page(browser: Any, language: str, viewport: dict[str, int]) -> Any:
    """A fresh context of a browser set to ``language`` (Accept-Language) and screen size."""
    locale = "it-IT" if language == "it" else "en-GB"
    context = browser.new_context(viewport=viewport, locale=locale, timezone_id="Europe/Rome")
    page = context.new_page()
    page.set_default_timeout(30_000)
    return page


def outbox_link(live: LiveConsole, prefix: str, address: str) -> str:
    """The one-time link of the newest message to ``address`` of this kind in the outbox."""
    folder = Path(live.sandbox.enrolled.settings.data_dir) / "outbox"
    for path in sorted(folder.glob(f"{prefix}.*.eml"), reverse=True):
        message = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
        if message["To"] == address:
            body = message.get_body(preferencelist=("plain",))  # type: ignore[attr-defined]
            found = re.search(r"http://\S+/login/link/[A-Za-z0-9_-]+", body.get_content())
            assert found, body.get_content()
            return found.group(0)
    raise AssertionError(f"no {prefix} message to {address}")


def looked_at(page: Any, name: str, *, language: str, phone: bool) -> None:
    """Screenshot, axe-core, the page's language and no horizontal scroll on a phone."""
    screenshot(page, name)
    assert_accessible(page, name)
    assert page.locator("html").get_attribute("lang") == language
    if phone:
        width = page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"{name}: {width} px wide on a 390 px screen"
    if language == "it":
        text = page.locator("body").inner_text()
        found = [word for word in ENGLISH if word in text]
        assert not found, f"{name}: English on an Italian page: {found}"


def invite(live: LiveConsole, address: str) -> str:
    """A console account of the enrolled customer at ``address``, invited; its link."""

    async def go(sandbox: WebSandbox) -> None:
        account, _ = await sandbox.web.users.ensure_customer_account(sandbox.student_id, address)
        await sandbox.web.invitations.send(account, "invite", actor=Actor.system("test"))

    live.run(go)
    return outbox_link(live, "invite", address)


@pytest.mark.parametrize(
    ("language", "screen"), [("it", "phone"), ("it", "desk"), ("en", "phone"), ("en", "desk")]
)
def test_an_invitation_leads_to_a_password_and_the_first_sign_in(
    browser: Any, live: LiveConsole, language: str, screen: str
) -> None:
    phone = screen == "phone"
    address = f"owner-{language}-{screen}@casa.example"
    link = invite(live, address)
    page = browser_page(browser, language, PHONE if phone else DESK)
    name = f"people-{language}-{screen}"
    page.goto(link)
    page.get_by_test_id("set-password").wait_for()
    assert page.get_by_test_id("set-password-email").input_value() == address
    assert BRAND in page.title()
    looked_at(page, f"{name}-invitation", language=language, phone=phone)

    page.get_by_test_id("set-password-new").fill(PASSWORD)
    page.get_by_test_id("set-password-confirm").fill(PASSWORD + "!")
    page.get_by_test_id("set-password-submit").click()
    page.get_by_test_id("set-password-error").wait_for()
    looked_at(page, f"{name}-passwords-differ", language=language, phone=phone)

    page.get_by_test_id("set-password-new").fill(PASSWORD)
    page.get_by_test_id("set-password-confirm").fill(PASSWORD)
    page.get_by_test_id("set-password-submit").click()
    page.wait_for_url(re.compile(rf"/console/customers/{live.sandbox.student_id}"))
    page.get_by_test_id("answers").wait_for()
    assert BRAND in page.title()
    looked_at(page, f"{name}-first-page", language=language, phone=phone)
    page.context.close()


def test_forgot_password_on_a_phone_in_italian(browser: Any, live: LiveConsole) -> None:
    address = "forgot@casa.example"
    invite(live, address)  # an account exists (its invitation is not used)
    page = browser_page(browser, "it", PHONE)
    page.goto(f"{live.url}/login")
    assert BRAND in page.locator("body").inner_text()
    looked_at(page, "people-it-phone-sign-in", language="it", phone=True)
    page.get_by_role("link", name=re.compile("dimenticato", re.I)).click()
    page.get_by_test_id("forgot-email").fill(address)
    page.get_by_test_id("forgot-submit").click()
    page.get_by_test_id("forgot-sent").wait_for()
    assert SUPPORT in page.get_by_test_id("support-contact").inner_text()
    looked_at(page, "people-it-phone-forgot-sent", language="it", phone=True)

    page.goto(outbox_link(live, "invite", address))  # no password yet: a new invitation
    page.get_by_test_id("set-password-new").fill(PASSWORD)
    page.get_by_test_id("set-password-confirm").fill(PASSWORD)
    page.get_by_test_id("set-password-submit").click()
    page.wait_for_url(re.compile(r"/console/customers/"))
    page.context.close()


def _break_booking_system(live: LiveConsole, new_password: str) -> None:
    async def go(sandbox: WebSandbox) -> None:
        sandbox.enrolled.sandbox.kross.change_password(sandbox.hotel_id, new_password)
        outcome, _ = await check_facility(sandbox.gateway, sandbox.hotel_id)
        assert outcome in ("now_in_error", "skipped")  # skipped: already in error
        assert (await sandbox.gateway.facilities.get(sandbox.hotel_id)).status == "error"

    live.run(go)


def _sign_in(page: Any, live: LiveConsole, address: str, password: str) -> None:
    page.goto(f"{live.url}/console")
    page.wait_for_url(re.compile(r"/login"))
    page.get_by_test_id("login-email").fill(address)
    page.get_by_test_id("login-password").fill(password)
    page.get_by_test_id("login-submit").click()
    page.wait_for_url(re.compile(r"/console/customers/"))


def _in_view(page: Any, test_id: str) -> bool:
    return bool(
        page.evaluate(
            """(id) => { const el = document.querySelector(`[data-testid="${id}"]`);
               if (!el) return false; const r = el.getBoundingClientRect();
               return r.top >= 0 && r.top < window.innerHeight && r.height > 0; }""",
            test_id,
        )
    )


@pytest.mark.parametrize("screen", ["phone", "desk"])
def test_a_reconnect_shows_its_result_where_the_eye_is_and_the_page_agrees(
    browser: Any, live: LiveConsole, screen: str
) -> None:
    phone = screen == "phone"
    address = f"reconnect-{screen}@casa.example"
    invite(live, address)
    live.run(lambda sandbox: sandbox.web.users.set_password(address, _secret(PASSWORD)))
    new_password = f"changed-upstream-{screen}-2026"
    _break_booking_system(live, new_password)
    page = browser_page(browser, "it", PHONE if phone else DESK)
    _sign_in(page, live, address, PASSWORD)
    # Disconnected: no card says all is well with the apartments or the connection.
    booking = page.get_by_test_id("answer-booking")
    assert booking.get_attribute("data-tone") == "bad"
    registry = page.locator("#registry")
    if registry.count():
        assert registry.get_attribute("data-status") in ("paused", "never_checked")
    looked_at(page, f"people-it-{screen}-disconnected", language="it", phone=phone)

    page.locator("#reconnect-password").fill(new_password)
    page.get_by_test_id("reconnect-submit").click()
    page.get_by_test_id("reconnect-result").wait_for()
    page.wait_for_function(
        """() => { const el = document.querySelector('[data-testid="reconnect-result"]');
           const r = el.getBoundingClientRect(); return r.top >= 0 && r.top < innerHeight; }""",
        timeout=5_000,
    )
    assert _in_view(page, "reconnect-result")
    # The rest of the page agrees at once (no reload): the answer, and no "on hold" left.
    assert page.get_by_test_id("answer-booking").get_attribute("data-tone") == "ok"
    if registry.count():
        assert registry.get_attribute("data-status") != "paused"
    looked_at(page, f"people-it-{screen}-reconnected", language="it", phone=phone)
    page.context.close()


def _secret(value: str) -> Any:
    from pydantic import SecretStr

    return SecretStr(value)


def test_a_form_sent_after_the_session_ended_keeps_what_was_typed(
    browser: Any, live: LiveConsole
) -> None:
    address = "expired@casa.example"
    invite(live, address)
    live.run(lambda sandbox: sandbox.web.users.set_password(address, _secret(PASSWORD)))
    page = browser_page(browser, "it", DESK)
    _sign_in(page, live, address, PASSWORD)
    # The session ends elsewhere (a password change ends every session) while the page is open.
    live.run(lambda sandbox: sandbox.web.users.set_password(address, _secret(PASSWORD)))
    page.locator("#reconnect-username").fill("api99999")
    page.locator("#reconnect-password").fill("typed-before-it-ended")
    page.get_by_test_id("reconnect-submit").click()
    page.wait_for_url(re.compile(r"/login\?.*expired=1"))
    page.get_by_test_id("login-expired").wait_for()
    looked_at(page, "people-it-session-ended", language="it", phone=False)
    page.get_by_test_id("login-email").fill(address)
    page.get_by_test_id("login-password").fill(PASSWORD)
    page.get_by_test_id("login-submit").click()
    page.wait_for_url(re.compile(r"/console/customers/"))
    assert page.locator("#reconnect-username").input_value() == "api99999"
    assert page.locator("#reconnect-password").input_value() == ""  # never kept
    page.get_by_test_id("kept-input").wait_for()
    looked_at(page, "people-it-input-kept", language="it", phone=False)
    page.context.close()


def test_a_route_b_customer_reads_what_its_assistant_knows_in_italian_on_a_phone(
    browser: Any, live: LiveConsole
) -> None:
    other = student_id_of(live.sandbox.enrolled.sandbox.kross.facility_summaries()[1])

    live.run(lambda sandbox: onboarded_on_route_b(sandbox, other))
    address, password = live.other_customer
    page = browser_page(browser, "it", PHONE)
    _sign_in(page, live, address, password)
    assert page.get_by_test_id("sync-dry-run").count() == 0
    route_b = page.get_by_test_id("knowledge-route-b")
    assert route_b.is_visible()
    assert SUPPORT in route_b.inner_text()  # "write to us" says where
    looked_at(page, "people-it-phone-route-b", language="it", phone=True)
    page.context.close()
