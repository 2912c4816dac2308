"""The console's "Gateway keys" panel: admins mint, revoke and change scopes; customers read."""

from __future__ import annotations

import re

import httpx
import pytest
from sqlalchemy import select

from pmsgate.audit.actions import AuditAction
from pmsgate.gateway.facilities import KeyView
from pmsgate.gateway.scopes import OPERATIONS_READ, TOOLS_READ, all_scopes
from pmsgate.storage.audit import AuditFilter
from pmsgate.storage.models import GatewayKey
from tests.support.answers import assert_error
from tests.web.support import WebSandbox, csrf, form_token_of

pytestmark = pytest.mark.anyio

TOOL = "/v1/tools/get-in-house-guests"


def keys_path(web: WebSandbox, student_id: str | None = None) -> str:
    return f"/console/customers/{student_id or web.student_id}/keys"


def key_rows(page: str) -> dict[int, str]:
    """Key id -> its table row on the page."""
    rows = re.findall(r'(<tr data-testid="key" data-key-id="(\d+)".*?</tr>)', page, re.DOTALL)
    return {int(key_id): row for row, key_id in rows}


async def stored_hashes(web: WebSandbox) -> list[str]:
    """Every key hash in the database (none may ever appear on a page)."""
    async with web.web.customers.sessions() as session:
        return list((await session.scalars(select(GatewayKey.key_hash))).all())


async def assert_no_secret(web: WebSandbox, page: str, *raw_keys: str) -> None:
    for raw in raw_keys:
        assert raw not in page
    for key_hash in await stored_hashes(web):
        assert key_hash not in page


async def console_keys(web: WebSandbox) -> list[KeyView]:
    """The keys the tests minted through the console (by the label :func:`mint` gives)."""
    keys = await web.gateway.facilities.list_keys(web.hotel_id)
    return [key for key in keys if key.label == "from the console"]


def raw_key_of(page: str) -> str:
    found = re.findall(r'data-testid="minted-raw-key">([^<]+)<', page)
    assert len(found) == 1, page
    return found[0]


async def call_tool(web: WebSandbox, raw: str) -> httpx.Response:
    return await web.client.post(TOOL, json={}, headers={"Authorization": f"Bearer {raw}"})


async def mint(
    web: WebSandbox, admin: httpx.AsyncClient, token: str, **form: str | list[str]
) -> httpx.Response:
    """Mint through the page's form, as a browser does: the page after the redirect."""
    form_token = await form_token_of(admin, f"/console/customers/{web.student_id}", "mint-key-form")
    data: dict[str, str | list[str]] = {
        "csrf_token": token,
        "label": "from the console",
        "form_token": form_token,
    }
    data.update(form)
    answer = await admin.post(keys_path(web), data=data)
    if answer.status_code != 303:
        return answer
    assert "form_token" not in answer.headers["location"]
    return await admin.get(answer.headers["location"])


async def test_the_admin_sees_every_key_of_the_facility_without_hash_or_raw_key(
    web: WebSandbox,
) -> None:
    facilities = web.gateway.facilities
    keys = await facilities.list_keys(web.hotel_id)
    revoked, raw = await facilities.mint_key(web.hotel_id, "old one")
    await facilities.revoke_key(web.hotel_id, revoked.id)
    admin, _ = await web.signed_in("admin")
    page = (await admin.get(f"/console/customers/{web.student_id}")).text
    rows = key_rows(page)
    assert set(rows) == {k.id for k in keys} | {revoked.id}
    assert 'data-testid="key-state">revoked<' in rows[revoked.id]
    assert f"{revoked.prefix}…" in rows[revoked.id] and "old one" in rows[revoked.id]
    for key in keys:
        assert 'data-testid="key-state">active<' in rows[key.id]
        for scope in key.scopes:
            assert f"<code>{scope}</code>" in rows[key.id]
    assert raw not in page and raw[len(revoked.prefix) :] not in page
    assert 'data-testid="minted-raw-key"' not in page
    await assert_no_secret(web, page, raw)
    assert 'data-testid="minted-raw-key"' not in page
    assert 'data-testid="mint-key-form"' in page and 'data-testid="key-revoke-form"' in page


async def test_a_minted_key_is_shown_once_works_and_holds_only_its_scopes(web: WebSandbox) -> None:
    admin, token = await web.signed_in("admin")
    answer = await mint(web, admin, token, scopes=[TOOLS_READ], expires_in_days="30")
    assert answer.status_code == 200, answer.text
    assert "Copy it now" in answer.text
    raw = raw_key_of(answer.text)
    assert (await call_tool(web, raw)).status_code == 200

    minted = await console_keys(web)
    assert len(minted) == 1 and minted[0].label == "from the console"
    key = minted[0]
    assert key.scopes == [TOOLS_READ]
    assert key.expires_at is not None
    assert (key.expires_at - key.created_at).days == 30
    assert raw.startswith(key.prefix)

    # Shown once: the page read again lists the key by its prefix only.
    again = (await admin.get(f"/console/customers/{web.student_id}")).text
    assert f"{key.prefix}…" in key_rows(again)[key.id]
    assert 'data-testid="minted-raw-key"' not in again
    await assert_no_secret(web, again, raw)
    await assert_no_secret(web, answer.text.replace(raw, ""))  # no hash beside it

    # A key minted with operations:read alone may not call a tool.
    reader = await mint(web, admin, token, scopes=[OPERATIONS_READ], label="reads")
    refused = await call_tool(web, raw_key_of(reader.text))
    assert_error(refused, 403, "scope_missing")

    trail = [e async for e in web.web.audit.export(AuditFilter())]
    mints = [e for e in trail if e.action == AuditAction.KEY_MINTED.value]
    console_mints = [m for m in mints if m.actor_kind == "admin"]
    assert len(console_mints) == 2
    assert all(raw not in str(e.details) for e in trail)


@pytest.mark.parametrize(
    ("form", "code"),
    [
        ({"scopes": ["tools:everything"]}, "invalid_scope"),
        ({}, "invalid_scope"),
        ({"scopes": [TOOLS_READ], "expires_in_days": "0"}, "invalid_expiry"),
        ({"scopes": [TOOLS_READ], "expires_in_days": "3651"}, "invalid_expiry"),
        ({"scopes": [TOOLS_READ], "expires_in_days": "soon"}, "invalid_expiry"),
        ({"scopes": [TOOLS_READ], "label": "x" * 101}, "invalid_label"),
    ],
)
async def test_a_bad_mint_shows_its_error_and_mints_nothing(
    web: WebSandbox, form: dict[str, str | list[str]], code: str
) -> None:
    before = await web.gateway.facilities.list_keys(web.hotel_id)
    admin, token = await web.signed_in("admin")
    answer = await mint(web, admin, token, **form)
    assert answer.status_code == 422
    assert f'data-testid="keys-error" data-code="{code}"' in answer.text
    assert "Nothing was changed." in answer.text
    assert 'data-testid="minted-raw-key"' not in answer.text
    assert await web.gateway.facilities.list_keys(web.hotel_id) == before


async def test_revoking_from_the_console_needs_the_confirmation_and_stops_the_key(
    web: WebSandbox,
) -> None:
    admin, token = await web.signed_in("admin")
    raw = raw_key_of((await mint(web, admin, token, scopes=[TOOLS_READ])).text)
    key = (await console_keys(web))[0]
    path = f"{keys_path(web)}/{key.id}/revoke"

    unconfirmed = await admin.post(path, data={"csrf_token": token})
    assert unconfirmed.status_code == 422
    assert 'data-code="confirmation_required"' in unconfirmed.text
    assert (await call_tool(web, raw)).status_code == 200

    done = await admin.post(path, data={"csrf_token": token, "confirm": "yes"})
    assert done.status_code == 303
    assert done.headers["location"] == f"/console/customers/{web.student_id}#keys"
    assert (await call_tool(web, raw)).status_code == 401
    page = (await admin.get(done.headers["location"])).text
    row = key_rows(page)[key.id]
    assert 'data-testid="key-state">revoked<' in row
    assert "key-revoke-form" not in row and "key-scopes-form" not in row
    await assert_no_secret(web, page, raw)

    events = [e async for e in web.web.audit.export(AuditFilter())]
    revoked = [e for e in events if e.action == AuditAction.KEY_REVOKED.value]
    assert [(e.actor_kind, e.subject) for e in revoked] == [("admin", f"key:{key.prefix}")]

    # Another facility's or an unknown key id: an error on the page, never a 500.
    unknown = await admin.post(
        f"{keys_path(web)}/999999/revoke", data={"csrf_token": token, "confirm": "yes"}
    )
    assert unknown.status_code == 404
    assert 'data-code="gateway_key_not_found"' in unknown.text


async def test_changing_a_keys_scopes_from_the_console_is_enforced_at_once(web: WebSandbox) -> None:
    admin, token = await web.signed_in("admin")
    raw = raw_key_of((await mint(web, admin, token, scopes=[TOOLS_READ])).text)
    key = (await console_keys(web))[0]
    path = f"{keys_path(web)}/{key.id}/scopes"
    assert (await call_tool(web, raw)).status_code == 200

    changed = await admin.post(path, data={"csrf_token": token, "scopes": [OPERATIONS_READ]})
    assert changed.status_code == 303
    assert (await call_tool(web, raw)).status_code == 403
    page = (await admin.get(f"/console/customers/{web.student_id}")).text
    assert f"<code>{OPERATIONS_READ}</code>" in key_rows(page)[key.id].split("<details>")[0]

    for bad in ({}, {"scopes": ["no:such-scope"]}):
        refused = await admin.post(path, data={"csrf_token": token, **bad})
        assert refused.status_code == 422
        assert 'data-testid="keys-error" data-code="invalid_scope"' in refused.text
    after = (await console_keys(web))[0]
    assert after.scopes == [OPERATIONS_READ]

    events = [e async for e in web.web.audit.export(AuditFilter())]
    changes = [e for e in events if e.action == AuditAction.KEY_SCOPES_CHANGED.value]
    assert len(changes) == 1 and changes[0].actor_kind == "admin"


async def test_key_forms_without_the_csrf_token_change_nothing(web: WebSandbox) -> None:
    before = await web.gateway.facilities.list_keys(web.hotel_id)
    key = before[0]
    admin, _ = await web.signed_in("admin")
    for path, data in (
        (keys_path(web), {"scopes": [TOOLS_READ]}),
        (f"{keys_path(web)}/{key.id}/revoke", {"confirm": "yes"}),
        (f"{keys_path(web)}/{key.id}/scopes", {"scopes": list(all_scopes())}),
    ):
        answer = await admin.post(path, data=data)
        assert answer.status_code == 403
        assert 'data-code="csrf_failed"' in answer.text
        assert "minted-raw-key" not in answer.text
    assert await web.gateway.facilities.list_keys(web.hotel_id) == before


async def test_a_customer_reads_its_own_keys_and_may_change_none(web: WebSandbox) -> None:
    before = await web.gateway.facilities.list_keys(web.hotel_id)
    key = before[0]
    customer, token = await web.signed_in("customer")
    page = (await customer.get(f"/console/customers/{web.student_id}")).text
    assert set(key_rows(page)) == {k.id for k in before}
    assert "mint-key-form" not in page and "key-revoke-form" not in page
    assert "key-scopes-form" not in page
    await assert_no_secret(web, page)
    for path, data in (
        (keys_path(web), {"scopes": [TOOLS_READ]}),
        (f"{keys_path(web)}/{key.id}/revoke", {"confirm": "yes"}),
        (f"{keys_path(web)}/{key.id}/scopes", {"scopes": list(all_scopes())}),
    ):
        for headers in ({}, {"HX-Request": "true", **csrf(token)}):
            answer = await customer.post(path, data={"csrf_token": token, **data}, headers=headers)
            assert answer.status_code == 403
            assert "minted-raw-key" not in answer.text
    assert await web.gateway.facilities.list_keys(web.hotel_id) == before


async def test_a_customer_never_sees_or_touches_another_customers_keys(web: WebSandbox) -> None:
    keys = await web.gateway.facilities.list_keys(web.hotel_id)
    other = await web.second_customer()
    intruder, token = await web.signed_in("customer", student_id=other)
    own = (await intruder.get(f"/console/customers/{other}")).text
    assert key_rows(own) == {}
    # Editing the id in the URL: refused, and nothing of the other facility's keys shown.
    seen = await intruder.get(f"/console/customers/{web.student_id}")
    assert seen.status_code == 403
    for key in keys:
        assert key.prefix not in seen.text
    assert 'data-testid="keys"' not in seen.text
    for target in (web.student_id, other):
        answer = await intruder.post(
            f"{keys_path(web, target)}/{keys[0].id}/revoke",
            data={"csrf_token": token, "confirm": "yes"},
        )
        assert answer.status_code == 403
        assert keys[0].prefix not in answer.text
    assert await web.gateway.facilities.list_keys(web.hotel_id) == keys


async def test_key_routes_for_a_customer_without_facility_or_a_bad_key_id_answer_pages(
    web: WebSandbox,
) -> None:
    other = await web.second_customer()
    admin, token = await web.signed_in("admin")
    page = (await admin.get(f"/console/customers/{other}")).text
    assert "no gateway keys" in page and "mint-key-form" not in page
    unlinked = await admin.post(
        keys_path(web, other), data={"csrf_token": token, "scopes": [TOOLS_READ]}
    )
    assert unlinked.status_code == 404
    assert 'data-code="facility_not_found"' in unlinked.text
    not_a_number = await admin.post(
        f"{keys_path(web)}/first/revoke", data={"csrf_token": token, "confirm": "yes"}
    )
    assert not_a_number.status_code == 422
    assert not_a_number.text.lstrip().lower().startswith("<!doctype html>")  # a page
    unknown_customer = await admin.post(
        keys_path(web, "no-such-customer"), data={"csrf_token": token, "scopes": [TOOLS_READ]}
    )
    assert unknown_customer.status_code == 404
    assert len(await web.gateway.facilities.list_keys(web.hotel_id)) == 1
