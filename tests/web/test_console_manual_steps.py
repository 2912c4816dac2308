"""Manual onboarding steps and sign-in locks, acted on from the admin console (PRG, audited)."""

from __future__ import annotations

import httpx
import pytest

from pmsgate.audit.actions import AuditAction
from pmsgate.onboarding.records import OnboardingRecords
from pmsgate.storage.audit import AuditFilter
from pmsgate.storage.onboarding import NewStepResult
from tests.web.support import WebSandbox, form_token_in

pytestmark = pytest.mark.anyio


async def record_waiting_steps(web: WebSandbox) -> OnboardingRecords:
    """A run whose channels step and platform-admin person's task wait for a person."""
    records = OnboardingRecords(web.web.customers.sessions, web.enrolled.clock)
    run = await records.start_run(web.student_id, dry_run=False)
    for step_id, number, kind in (("platform-admin", 8, "auto"), ("channels", 15, "manual")):
        await records.record(
            NewStepResult(
                student_id=web.student_id,
                step_id=step_id,
                number=number,
                kind=kind,
                status="waiting",
                done=False,
                evidence={"required_items": ["whatsapp-number"]} if step_id == "channels" else {},
                waiting_for="a person",
                run_id=run.id,
            )
        )
    await records.finish_run(run.id, "succeeded", route="A")
    return records


def customer_page(web: WebSandbox) -> str:
    return f"/console/customers/{web.student_id}"


def step_form(page: str, step_id: str, form: str) -> str:
    """The one-time token of a step's confirm or reopen form on the page."""
    start = page.index(f'data-testid="person-step" data-step="{step_id}"')
    return form_token_in(page[start:], form)


async def send(
    admin: httpx.AsyncClient, web: WebSandbox, step_id: str, action: str, data: dict[str, str]
) -> httpx.Response:
    return await admin.post(f"{customer_page(web)}/onboarding/{step_id}/{action}", data=data)


async def reopen_from_the_page(
    admin: httpx.AsyncClient, web: WebSandbox, csrf_token: str, step_id: str, **fields: str
) -> httpx.Response:
    """Send the step's reopen form (with ``fields``) as the customer page shows it now."""
    page = (await admin.get(customer_page(web))).text
    token = step_form(page, step_id, "reopen-step-form")
    form = {"csrf_token": csrf_token, "form_token": token, **fields}
    return await send(admin, web, step_id, "reopen", form)


async def events(web: WebSandbox, action: AuditAction) -> list[object]:
    return [e async for e in web.web.audit.export(AuditFilter(action_prefix=action.value))]


async def test_an_admin_confirms_a_channel_item_from_the_page_once_with_its_evidence(
    web: WebSandbox,
) -> None:
    records = await record_waiting_steps(web)
    admin, csrf_token = await web.signed_in("admin")
    page = (await admin.get(customer_page(web))).text
    assert "pmsgate onboard confirm" in page  # the other door, still shown
    form = {
        "csrf_token": csrf_token,
        "form_token": step_form(page, "channels", "confirm-step-form"),
        "item": "whatsapp-number",
        "evidence": "number +39 333 live, test message answered",
    }
    done = await send(admin, web, "channels", "confirm", form)
    assert done.status_code == 303
    assert "step_done=confirm_step" in done.headers["location"]
    after = (await admin.get(done.headers["location"])).text
    assert 'data-testid="step-done" data-step="channels"' in after

    again = await send(admin, web, "channels", "confirm", form)  # a reload
    assert "repeated=1" in again.headers["location"]
    confirmed = (await records.confirmations(web.student_id))["channels"]
    assert confirmed.evidence["items"]["whatsapp-number"]["evidence"].startswith("number")
    assert confirmed.person == admin_email(after)
    trail = await events(web, AuditAction.ONBOARDING_STEP_CONFIRMED)
    assert len(trail) == 1
    assert trail[0].actor_kind == "admin"  # type: ignore[attr-defined]
    assert trail[0].subject == "step:channels/whatsapp-number"  # type: ignore[attr-defined]

    # Reopened from the page: the item waits for a person again.
    reopened = await reopen_from_the_page(
        admin, web, csrf_token, "channels", item="whatsapp-number", note="the number was changed"
    )
    assert "step_done=reopen_step" in reopened.headers["location"]
    latest = (await records.checklist(web.student_id))["channels"]
    assert latest.status == "waiting" and latest.evidence == {"items": {}}
    assert "the number was changed" in (latest.message or "")
    assert len(await events(web, AuditAction.ONBOARDING_STEP_REOPENED)) == 1


def admin_email(page: str) -> str:
    marker = 'data-testid="signed-in-as">'
    return page.split(marker, 1)[1].split(" (", 1)[0]


async def test_a_persons_task_is_confirmed_then_reopened_and_errors_are_plain(
    web: WebSandbox,
) -> None:
    records = await record_waiting_steps(web)
    admin, csrf_token = await web.signed_in("admin")
    page = (await admin.get(customer_page(web))).text
    token = step_form(page, "platform-admin", "confirm-step-form")

    empty = await send(
        admin, web, "platform-admin", "confirm", {"csrf_token": csrf_token, "form_token": token}
    )
    assert "step_error=evidence_required" in empty.headers["location"]
    shown = (await admin.get(empty.headers["location"])).text
    assert 'data-testid="step-error" data-code="evidence_required"' in shown

    # The refused form changed nothing, so the same form can be sent again.
    confirmed = await send(
        admin,
        web,
        "platform-admin",
        "confirm",
        {"csrf_token": csrf_token, "form_token": token, "evidence": "admin added by hand"},
    )
    assert "step_done=confirm_step" in confirmed.headers["location"]
    assert (await records.confirmations(web.student_id))["platform-admin"].evidence[
        "evidence"
    ] == "admin added by hand"

    reopened = await reopen_from_the_page(admin, web, csrf_token, "platform-admin")
    assert "step_done=reopen_step" in reopened.headers["location"]
    assert not (await records.confirmations(web.student_id))["platform-admin"].evidence

    nothing = await send(
        admin,
        web,
        "platform-admin",
        "reopen",
        {
            "csrf_token": csrf_token,
            "form_token": step_form(page, "channels", "confirm-step-form"),
        },
    )
    assert nothing.status_code == 400  # another form's token

    customer, customer_token = await web.signed_in("customer")
    refused = await send(customer, web, "platform-admin", "confirm", {"csrf_token": customer_token})
    assert refused.status_code == 403


async def test_an_admin_unlocks_an_account_and_an_address_from_the_console(web: WebSandbox) -> None:
    ctx = await web.web.customers.context(web.student_id)
    # The customer's own account (the one its page's account panel is about).
    email, password = await web.add_user("customer", email=ctx.customer.email)
    for _ in range(web.enrolled.settings.login_max_failures + 1):
        await web.client.post("/api/auth/login", json={"email": email, "password": "wrong!"})
    paused = await web.client.post("/api/auth/login", json={"email": email, "password": password})
    assert paused.status_code == 429

    admin, csrf_token = await web.signed_in("admin")
    locks = (await admin.get("/console/sign-in-locks")).text
    assert 'data-testid="lock"' in locks and email in locks

    page = (await admin.get(customer_page(web))).text
    assert 'data-testid="unlock-account-form"' in page
    unlocked = await admin.post(
        "/console/sign-in-locks/unlock",
        data={
            "csrf_token": csrf_token,
            "email": email,
            "next": f"{customer_page(web)}#account",
        },
    )
    assert unlocked.status_code == 303
    assert unlocked.headers["location"].startswith(f"{customer_page(web)}?unlocked=account")
    shown = (await admin.get(unlocked.headers["location"])).text
    assert 'data-testid="unlocked"' in shown
    again = await web.client.post("/api/auth/login", json={"email": email, "password": password})
    assert again.status_code == 200

    bad = await admin.post(
        "/console/sign-in-locks/unlock", data={"csrf_token": csrf_token, "address": "nope"}
    )
    assert bad.headers["location"] == "/console/sign-in-locks?unlock_error=invalid_address"
    by_address = await admin.post(
        "/console/sign-in-locks/unlock", data={"csrf_token": csrf_token, "address": "127.0.0.1"}
    )
    assert by_address.headers["location"] == "/console/sign-in-locks?unlocked=address"

    trail = await events(web, AuditAction.SIGNIN_UNLOCKED)
    assert sorted((e.actor_kind, e.subject) for e in trail) == [  # type: ignore[attr-defined]
        ("admin", "address:127.0.0.1"),
        ("admin", f"user:{email}"),
    ]
    customer, customer_token = await web.signed_in("customer")
    assert (await customer.get("/console/sign-in-locks")).status_code == 403
    refused = await customer.post(
        "/console/sign-in-locks/unlock", data={"csrf_token": customer_token, "email": email}
    )
    assert refused.status_code == 403
