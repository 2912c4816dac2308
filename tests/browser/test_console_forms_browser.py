"""Console forms in Chromium: safe to repeat (reload, double click), manual steps confirmed from
the page, and sign-in pauses that a customer's typos cannot turn into the team's lockout.

Screenshots: ``test-artifacts/screenshots/forms-*.png``.
"""

from __future__ import annotations

import re
from typing import Any

from pmsgate.audit.actions import AuditAction
from pmsgate.onboarding.records import OnboardingRecords
from pmsgate.storage.audit import AuditFilter
from pmsgate.storage.onboarding import NewStepResult
from tests.browser.conftest import LiveConsole, screenshot
from tests.web.support import WebSandbox


def sign_in(page: Any, live: LiveConsole, account: tuple[str, str]) -> None:
    """Through the login form, as a person would."""
    page.goto(f"{live.url}/login")
    page.get_by_test_id("login-email").fill(account[0])
    page.get_by_test_id("login-password").fill(account[1])
    page.get_by_test_id("login-submit").click()
    page.wait_for_url(re.compile(r"/console"))


def keys_labelled(live: LiveConsole, label: str) -> int:
    async def count(sandbox: WebSandbox) -> int:
        keys = await sandbox.gateway.facilities.list_keys(sandbox.hotel_id)
        return sum(1 for key in keys if key.label == label)

    return live.run(count)


def audited(live: LiveConsole, action: AuditAction) -> list[Any]:
    async def read(sandbox: WebSandbox) -> list[Any]:
        return [e async for e in sandbox.web.audit.export(AuditFilter(action_prefix=action.value))]

    return live.run(read)


def mint_form(page: Any, label: str) -> None:
    page.locator("details.mint > summary").click()
    form = page.get_by_test_id("mint-key-form")
    form.locator('input[name="label"]').fill(label)


def test_reloading_the_page_after_minting_a_key_leaves_one_key(
    page: Any, live_console: LiveConsole
) -> None:
    sign_in(page, live_console, live_console.admin)
    student_id = live_console.sandbox.student_id
    page.goto(f"{live_console.url}/console/customers/{student_id}")
    before = len(audited(live_console, AuditAction.KEY_MINTED))
    mint_form(page, "reload check")
    page.get_by_test_id("mint-key-submit").click()
    raw = page.get_by_test_id("minted-raw-key").inner_text()
    assert raw and raw not in page.url
    screenshot(page, "forms-minted-key")

    page.reload()
    assert page.get_by_test_id("minted-key-gone").is_visible()
    assert raw not in page.content()
    page.go_back()  # the page before the POST: nothing is re-sent
    page.go_forward()
    screenshot(page, "forms-minted-key-reloaded")
    assert keys_labelled(live_console, "reload check") == 1
    assert len(audited(live_console, AuditAction.KEY_MINTED)) == before + 1


def test_a_double_click_on_mint_makes_one_key(page: Any, live_console: LiveConsole) -> None:
    sign_in(page, live_console, live_console.admin)
    student_id = live_console.sandbox.student_id
    page.goto(f"{live_console.url}/console/customers/{student_id}")
    mint_form(page, "double click")
    page.get_by_test_id("mint-key-submit").dblclick()
    page.wait_for_url(re.compile(r"(minted|repeated)="))
    page.wait_for_load_state()
    screenshot(page, "forms-double-click")
    assert keys_labelled(live_console, "double click") == 1
    shown = (
        page.get_by_test_id("minted-raw-key").count()
        + page.get_by_test_id("minted-key-gone").count()
    )
    assert shown == 1


def test_an_admin_confirms_a_manual_step_from_the_page(
    page: Any, live_console: LiveConsole
) -> None:
    async def waiting_channels(sandbox: WebSandbox) -> None:
        records = OnboardingRecords(sandbox.web.customers.sessions, sandbox.enrolled.clock)
        run = await records.start_run(sandbox.student_id, dry_run=False)
        await records.record(
            NewStepResult(
                student_id=sandbox.student_id,
                step_id="channels",
                number=15,
                kind="manual",
                status="waiting",
                done=False,
                evidence={"required_items": ["whatsapp-number", "voice-agent"]},
                waiting_for="[whatsapp-number] the number; [voice-agent] the voice agent",
                run_id=run.id,
            )
        )
        await records.finish_run(run.id, "succeeded", route="A")

    live_console.run(waiting_channels)
    sign_in(page, live_console, live_console.admin)
    student_id = live_console.sandbox.student_id
    page.goto(f"{live_console.url}/console/customers/{student_id}#onboarding")
    step = page.locator('[data-testid="person-step"][data-step="channels"]')
    step.get_by_test_id("confirm-step-open").click()
    step.get_by_test_id("confirm-step-item").select_option("whatsapp-number")
    step.get_by_test_id("confirm-step-evidence").fill("+39 333 000 live, answered a test message")
    screenshot(page, "forms-confirm-step-form")
    step.get_by_test_id("confirm-step-submit").click()
    done = page.get_by_test_id("step-done")
    done.wait_for()
    assert "channels" in done.inner_text()
    row = page.locator('[data-testid="step"][data-step="channels"]')
    assert "whatsapp-number confirmed" in row.inner_text()
    screenshot(page, "forms-confirm-step-done")
    [event] = audited(live_console, AuditAction.ONBOARDING_STEP_CONFIRMED)
    assert (event.actor_kind, event.actor) == ("admin", live_console.admin[0])


def test_a_customers_typos_do_not_stop_the_admin_and_the_admin_unlocks_them(
    browser: Any, live_console: LiveConsole
) -> None:
    # Two people behind the same office address (every browser here is 127.0.0.1).
    contexts = [
        browser.new_context(viewport={"width": 1280, "height": 900}, locale=locale)
        for locale in ("it-IT", "en-GB")
    ]
    try:
        customer, admin = (context.new_page() for context in contexts)
        email = live_console.customer[0]
        for _ in range(live_console.sandbox.enrolled.settings.login_max_failures + 1):
            customer.goto(f"{live_console.url}/login")
            customer.get_by_test_id("login-email").fill(email)
            customer.get_by_test_id("login-password").fill("not my password")
            customer.get_by_test_id("login-submit").click()
            customer.get_by_test_id("login-error").wait_for()
        paused = customer.get_by_test_id("login-error")
        assert paused.get_attribute("data-code") == "too_many_login_attempts"
        assert "minut" in paused.inner_text()  # the wait, in the reader's language
        screenshot(customer, "forms-login-paused-it")

        sign_in(admin, live_console, live_console.admin)  # same address: not locked out
        admin.goto(f"{live_console.url}/console/sign-in-locks")
        lock = admin.get_by_test_id("lock").filter(has_text=email)
        assert lock.count() >= 1
        screenshot(admin, "forms-sign-in-locks")
        lock.first.get_by_test_id("lock-unlock").click()
        admin.get_by_test_id("unlocked").wait_for()
        screenshot(admin, "forms-sign-in-unlocked")

        sign_in(customer, live_console, live_console.customer)
        assert "/console" in customer.url
        assert audited(live_console, AuditAction.SIGNIN_UNLOCKED)
    finally:
        for context in contexts:
            context.close()
