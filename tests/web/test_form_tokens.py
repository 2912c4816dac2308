"""One-time form tokens: a form that creates something creates it once, whatever is re-sent."""

from __future__ import annotations

import anyio
import httpx
import pytest
from sqlalchemy import select

from pmsgate.audit.actions import AuditAction
from pmsgate.gateway.scopes import TOOLS_READ
from pmsgate.storage.audit import AuditFilter
from pmsgate.storage.models import FormTokenUse
from pmsgate.web.form_tokens import FormTokenExpired, FormTokenRefused
from tests.conftest import database_url as database_url  # both databases: see conftest.py
from tests.web.support import WebSandbox, form_token_in, issued_form_token
from tests.web.test_console_keys import console_keys, raw_key_of

pytestmark = pytest.mark.anyio

SESSION = "a" * 64
OTHER_SESSION = "b" * 64


async def minted_events(web: WebSandbox) -> int:
    events = [e async for e in web.web.audit.export(AuditFilter())]
    return sum(
        1 for e in events if e.action == AuditAction.KEY_MINTED.value and e.actor_kind == "admin"
    )


async def test_a_token_is_spent_once_and_a_repeat_learns_where_the_first_use_went(
    web: WebSandbox,
) -> None:
    tokens = web.web.form_tokens
    token = tokens.issue("mint_key", SESSION)
    first = await tokens.spend(token, purpose="mint_key", session_hash=SESSION)
    assert not first.repeated
    await tokens.finish(first, result_path="/console/customers/x#keys")
    again = await tokens.spend(token, purpose="mint_key", session_hash=SESSION)
    assert again.repeated and again.result_path == "/console/customers/x#keys"


async def test_concurrent_spends_of_one_token_have_exactly_one_winner(web: WebSandbox) -> None:
    tokens = web.web.form_tokens
    token = tokens.issue("mint_key", SESSION)
    outcomes: list[bool] = []

    async def spend() -> None:
        spent = await tokens.spend(token, purpose="mint_key", session_hash=SESSION)
        outcomes.append(spent.repeated)

    async with anyio.create_task_group() as group:
        for _ in range(6):
            group.start_soon(spend)
    assert sorted(outcomes) == [False] + [True] * 5


async def test_a_token_expires_and_is_refused_for_another_form_or_session(web: WebSandbox) -> None:
    tokens = web.web.form_tokens
    token = tokens.issue("mint_key", SESSION)
    with pytest.raises(FormTokenRefused) as other_session:
        await tokens.spend(token, purpose="mint_key", session_hash=OTHER_SESSION)
    assert other_session.value.code == "form_token_invalid"
    with pytest.raises(FormTokenRefused):
        await tokens.spend(token, purpose="start_sync", session_hash=SESSION)
    with pytest.raises(FormTokenRefused):
        await tokens.spend(token + "x", purpose="mint_key", session_hash=SESSION)
    with pytest.raises(FormTokenRefused):
        await tokens.spend("", purpose="mint_key", session_hash=SESSION)
    web.enrolled.clock.advance(web.enrolled.settings.form_token_ttl_s + 1)
    with pytest.raises(FormTokenExpired) as expired:
        await tokens.spend(token, purpose="mint_key", session_hash=SESSION)
    assert expired.value.code == "form_expired"
    # Nothing of the refused attempts was spent: a fresh token still works.
    fresh = tokens.issue("mint_key", SESSION)
    assert not (await tokens.spend(fresh, purpose="mint_key", session_hash=SESSION)).repeated


async def test_a_hand_off_is_read_once_by_its_own_session_and_expires(web: WebSandbox) -> None:
    tokens = web.web.form_tokens
    spent = await tokens.spend(
        tokens.issue("mint_key", SESSION), purpose="mint_key", session_hash=SESSION
    )
    await tokens.finish(spent, result_path="/x", handoff="7:pmsk_secret")
    async with web.web.customers.sessions() as session:
        stored = (await session.scalars(select(FormTokenUse.handoff))).all()
    assert stored and all("pmsk_secret" not in (value or "") for value in stored)
    assert await tokens.take_handoff(spent.ref, session_hash=OTHER_SESSION) is None
    assert await tokens.take_handoff(spent.ref, session_hash=SESSION) == "7:pmsk_secret"
    assert await tokens.take_handoff(spent.ref, session_hash=SESSION) is None

    late = await tokens.spend(
        tokens.issue("mint_key", SESSION), purpose="mint_key", session_hash=SESSION
    )
    await tokens.finish(late, result_path="/x", handoff="8:pmsk_late")
    web.enrolled.clock.advance(web.enrolled.settings.key_handoff_ttl_s + 1)
    assert await tokens.take_handoff(late.ref, session_hash=SESSION) is None


async def test_reloading_after_a_mint_leaves_one_key_and_shows_it_once(web: WebSandbox) -> None:
    admin, csrf_token = await web.signed_in("admin")
    page = await admin.get(f"/console/customers/{web.student_id}")
    form = {
        "csrf_token": csrf_token,
        "form_token": form_token_in(page.text, "mint-key-form"),
        "label": "from the console",
        "scopes": TOOLS_READ,
    }
    path = f"/console/customers/{web.student_id}/keys"
    minted = await admin.post(path, data=form)
    assert minted.status_code == 303
    shown = await admin.get(minted.headers["location"])
    raw = raw_key_of(shown.text)
    assert raw not in minted.headers["location"]

    # The browser re-sends the POST (reload, back-and-resend): nothing is minted.
    resent = await admin.post(path, data=form)
    assert resent.status_code == 303 and "repeated=1" in resent.headers["location"]
    after = await admin.get(resent.headers["location"])
    assert 'data-testid="form-repeated"' in after.text
    assert raw not in after.text and 'data-testid="minted-key-gone"' in after.text
    # Reloading the result page does not show the key again either.
    reloaded = await admin.get(minted.headers["location"])
    assert raw not in reloaded.text and 'data-testid="minted-key-gone"' in reloaded.text
    assert len(await console_keys(web)) == 1
    assert await minted_events(web) == 1


async def admin_with_a_mint_form(web: WebSandbox) -> tuple[httpx.AsyncClient, dict[str, str]]:
    """A signed-in admin and the fields of the mint-key form its page would hold (no scopes)."""
    admin, csrf_token = await web.signed_in("admin")
    form = {
        "csrf_token": csrf_token,
        "form_token": issued_form_token(web, admin, "mint_key"),
        "label": "from the console",
    }
    return admin, form


async def test_a_double_click_on_mint_makes_one_key(web: WebSandbox) -> None:
    admin, form = await admin_with_a_mint_form(web)
    form["scopes"] = TOOLS_READ
    answers = []

    async def click() -> None:
        answers.append(await admin.post(f"/console/customers/{web.student_id}/keys", data=form))

    async with anyio.create_task_group() as group:
        group.start_soon(click)
        group.start_soon(click)
    assert [a.status_code for a in answers] == [303, 303]
    assert len(await console_keys(web)) == 1
    assert await minted_events(web) == 1


async def test_a_refused_mint_leaves_its_form_usable(web: WebSandbox) -> None:
    admin, form = await admin_with_a_mint_form(web)
    path = f"/console/customers/{web.student_id}/keys"
    refused = await admin.post(path, data={**form, "scopes": TOOLS_READ, "expires_in_days": "0"})
    assert refused.status_code == 422
    fixed = await admin.post(path, data={**form, "scopes": TOOLS_READ})
    assert fixed.status_code == 303 and "repeated" not in fixed.headers["location"]
    assert len(await console_keys(web)) == 1


async def test_a_form_without_its_token_or_with_another_sessions_creates_nothing(
    web: WebSandbox,
) -> None:
    admin, csrf_token = await web.signed_in("admin")
    other, _ = await web.signed_in("admin")
    path = f"/console/customers/{web.student_id}/keys"
    for token in ("", issued_form_token(web, other, "mint_key")):
        answer = await admin.post(
            path,
            data={"csrf_token": csrf_token, "form_token": token, "scopes": TOOLS_READ},
        )
        assert answer.status_code == 400
        assert 'data-code="form_token_invalid"' in answer.text
    assert await console_keys(web) == []


async def test_a_sync_form_sent_twice_starts_one_sync(web: WebSandbox) -> None:
    client, csrf_token = await web.signed_in("customer")
    form = {
        "csrf_token": csrf_token,
        "commit": "false",
        "form_token": issued_form_token(web, client, "start_sync"),
    }
    path = f"/console/customers/{web.student_id}/sync"
    first = await client.post(path, data=form)
    assert first.status_code == 303
    job = await web.web.sync_jobs.latest(web.student_id)
    assert job is not None
    await web.web.sync_jobs.wait(job.id)
    again = await client.post(path, data=form)
    assert again.status_code == 303 and "repeated=1" in again.headers["location"]
    page = await client.get(again.headers["location"])
    assert 'data-testid="form-repeated"' in page.text
    assert await web.web.sync_jobs.latest(web.student_id) == await web.web.sync_jobs.status(job.id)
    htmx = await client.post(path, data=form, headers={"HX-Request": "true"})
    assert htmx.status_code == 200 and 'id="knowledge"' in htmx.text
    assert (await web.web.sync_jobs.latest(web.student_id)).id == job.id  # type: ignore[union-attr]
