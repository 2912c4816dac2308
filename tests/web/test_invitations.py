"""Accounts from day one: invitation → set password → signed in; forgot password; re-send.

Through HTTP on the web sandbox; the messages are read from the outbox as the mail
server would get them, and their link is followed like a person would.
"""

from __future__ import annotations

import email
import email.policy
import re
from email.message import EmailMessage
from pathlib import Path

import pytest

from pmsgate.audit.actions import Actor
from pmsgate.storage.audit import AuditFilter
from tests.web.support import WebSandbox, csrf, form_token_in, login, web_sandbox

pytestmark = pytest.mark.anyio

PUBLIC = "https://console.example.test"
PASSWORD = "a long and happy passphrase"
_LINK = re.compile(re.escape(PUBLIC) + r"/login/link/([A-Za-z0-9_-]+)")


def outbox(web: WebSandbox, prefix: str, to: str) -> list[EmailMessage]:
    """The outbox's messages of a kind (``invite``, ``reset``) to ``to``, oldest first."""
    folder = Path(web.enrolled.settings.data_dir) / "outbox"
    messages = [
        email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
        for path in sorted(folder.glob(f"{prefix}.*.eml"))
    ]
    return [m for m in messages if m["To"] == to]  # type: ignore[misc]


def text_of(message: EmailMessage) -> str:
    part = message.get_body(preferencelist=("plain",))
    assert part is not None
    return str(part.get_content())


def link_token(message: EmailMessage) -> str:
    found = _LINK.search(text_of(message))
    assert found, text_of(message)
    return found.group(1)


async def customer_email(web: WebSandbox) -> str:
    customer = await web.web.customers.customers.find(web.student_id)
    assert customer is not None
    return customer.email


async def events(web: WebSandbox, action: str) -> list[object]:
    page = await web.web.audit.page(AuditFilter(action_prefix=action), limit=50)
    return list(page.events)


@pytest.fixture
async def web(database_url: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    async with web_sandbox(
        database_url,
        settings_overrides={
            "public_url": PUBLIC,
            "password_reset_max_per_hour": 2,
            "data_dir": tmp_path,  # this test's own outbox
        },
        with_notion=False,
        sync=False,
    ) as sandbox:
        yield sandbox


async def test_an_invitation_lets_the_customer_choose_a_password_and_lands_signed_in(
    web: WebSandbox,
) -> None:
    address = await customer_email(web)
    state = await web.web.invitations.ensure_invited(web.student_id, address)
    assert state.created and state.invitation_sent and not state.password_set
    # Onboarding's second call sends nothing new.
    again = await web.web.invitations.ensure_invited(web.student_id, address)
    assert not again.created and not again.invitation_sent
    [invitation] = outbox(web, "invite", address)
    assert invitation["To"] == address
    token = link_token(invitation)
    assert token not in str(await events(web, "account.invited"))  # never in the trail

    # No password works before one is chosen.
    refused = await web.client.post(
        "/api/auth/login", json={"email": address, "password": "!" + "x" * 12}
    )
    assert refused.status_code == 401

    page = await web.client.get(f"/login/link/{token}")
    assert page.status_code == 200 and 'data-testid="set-password"' in page.text
    assert address in page.text  # the account, for the password manager

    differ = await web.client.post(
        f"/login/link/{token}", data={"password": PASSWORD, "password_confirm": PASSWORD + "!"}
    )
    assert differ.status_code == 422 and 'data-code="passwords_differ"' in differ.text
    short = await web.client.post(
        f"/login/link/{token}", data={"password": "short", "password_confirm": "short"}
    )
    assert 'data-code="password_too_short"' in short.text
    assert PASSWORD not in differ.text and 'value="short"' not in short.text  # never echoed

    done = await web.client.post(
        f"/login/link/{token}", data={"password": PASSWORD, "password_confirm": PASSWORD}
    )
    assert done.status_code == 303 and done.headers["location"].startswith("/console")
    home = await web.client.get("/console")
    assert home.headers["location"] == f"/console/customers/{web.student_id}"
    assert len(await events(web, "account.password_set")) == 1

    # Spent: the link now says so; the password signs in.
    spent = await web.client.get(f"/login/link/{token}")
    assert spent.status_code == 410 and 'data-state="used"' in spent.text
    other = await web.new_client()
    await login(other, address, PASSWORD)


async def test_forgot_password_answers_the_same_for_any_address_and_mails_only_accounts(
    web: WebSandbox,
) -> None:
    address, _ = await web.add_user("customer", email="owner@casa.example")
    unknown = await web.client.post("/login/forgot", data={"email": "nobody@casa.example"})
    known = await web.client.post("/login/forgot", data={"email": address})
    # The same answer either way, and a page a reload never sends again from (303, GET).
    assert unknown.status_code == known.status_code == 303
    assert unknown.headers["location"] == known.headers["location"] == "/login/forgot?sent=1"
    sentence = 'data-testid="forgot-sent"'
    assert sentence in (await web.client.get(known.headers["location"])).text
    [reset] = outbox(web, "reset", address)
    assert reset["To"] == address
    token = link_token(reset)

    new_password = PASSWORD + " again"
    done = await web.client.post(
        f"/login/link/{token}", data={"password": new_password, "password_confirm": new_password}
    )
    assert done.status_code == 303
    await login(await web.new_client(), address, new_password)

    # Limited per client and per address (2 an hour here, both spent): the same page, and no
    # more e-mail.
    for _ in range(3):
        again = await web.client.post("/login/forgot", data={"email": address})
        assert again.status_code == 303 and again.headers["location"] == known.headers["location"]
    assert len(outbox(web, "reset", address)) == 1
    requested = await events(web, "account.reset_requested")
    assert any(getattr(e, "outcome", None) == "refused" for e in requested)


async def test_an_admin_sends_the_invitation_again_from_the_customer_page(
    web: WebSandbox,
) -> None:
    admin, token = await web.signed_in("admin")
    page = await admin.get(f"/console/customers/{web.student_id}")
    assert 'data-testid="account-panel"' in page.text and 'data-state="none"' in page.text
    form = {"csrf_token": token, "form_token": form_token_in(page.text, "invite-form")}
    sent = await admin.post(f"/console/customers/{web.student_id}/invite", data=form)
    assert sent.status_code == 303 and "invited=1" in sent.headers["location"]
    page = await admin.get(sent.headers["location"])
    assert 'data-testid="invite-sent"' in page.text and 'data-state="invited"' in page.text
    # The same form again (a reload, a double click): no second e-mail, a plain word instead.
    repeated = await admin.post(f"/console/customers/{web.student_id}/invite", data=form)
    assert repeated.status_code == 303 and "repeated=1" in repeated.headers["location"]
    again = await admin.get(repeated.headers["location"])
    assert 'data-testid="form-repeated"' in again.text
    assert len(outbox(web, "invite", await customer_email(web))) == 1
    # The page's new form sends a new invitation.
    fresh = {"csrf_token": token, "form_token": form_token_in(again.text, "invite-form")}
    await admin.post(f"/console/customers/{web.student_id}/invite", data=fresh)
    assert len(outbox(web, "invite", await customer_email(web))) == 2
    [first, *_] = await events(web, "account.invited")
    assert getattr(first, "actor", "").endswith("@example.com")

    customer, customer_token = await web.signed_in("customer")
    refused = await customer.post(
        f"/console/customers/{web.student_id}/invite", headers=csrf(customer_token)
    )
    assert refused.status_code == 403


async def test_without_the_consoles_address_no_link_is_made(
    database_url: str, tmp_path: Path
) -> None:
    unset = {"public_url": None, "gateway_public_url": None, "data_dir": tmp_path}
    async with web_sandbox(
        database_url, settings_overrides=unset, with_notion=False, sync=False
    ) as web:
        account, _ = await web.web.users.ensure_customer_account(
            web.student_id, await customer_email(web)
        )
        with pytest.raises(Exception) as raised:
            await web.web.invitations.send(account, "invite", actor=Actor.system("test"))
        assert getattr(raised.value, "code", None) == "public_url_missing"
        assert outbox(web, "invite", account.email) == []
