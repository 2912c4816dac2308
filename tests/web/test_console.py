"""The console's pages and forms, through HTTP (the browser tests drive the same in Chromium)."""

from __future__ import annotations

import re

import pytest

from tests.support.answers import assert_error
from tests.web.support import WebSandbox, post_reconnect, post_sync, sync_form, web_sandbox

pytestmark = pytest.mark.anyio


async def test_a_visitor_without_a_session_is_sent_to_the_login_page(web: WebSandbox) -> None:
    answer = await web.client.get(f"/console/customers/{web.student_id}")
    assert answer.status_code == 303
    assert answer.headers["location"] == f"/login?next=/console/customers/{web.student_id}"
    assert (await web.client.get("/")).headers["location"] == "/console"


async def test_the_admin_home_lists_every_customer_with_its_state(web: WebSandbox) -> None:
    other = await web.second_customer()
    await web.enrolled.break_kross()
    admin, _ = await web.signed_in("admin")
    page = (await admin.get("/console")).text
    rows = re.findall(r'data-student-id="([^"]+)"', page)
    assert sorted(rows) == sorted([web.student_id, other])
    mine = page.split(f'data-student-id="{web.student_id}"', 1)[1].split("</tr>", 1)[0]
    assert 'data-testid="pms-status">error<' in mine
    theirs = page.split(f'data-student-id="{other}"', 1)[1].split("</tr>", 1)[0]
    assert 'data-testid="pms-status">not linked<' in theirs
    assert "/ 5,000" in mine  # the daily budget (requests in the last 24 hours)


async def test_a_customer_is_sent_to_its_own_page_and_refused_another(web: WebSandbox) -> None:
    other = await web.second_customer()
    client, _ = await web.signed_in("customer")
    home = await client.get("/console")
    assert home.status_code == 303
    assert home.headers["location"] == f"/console/customers/{web.student_id}"
    own = await client.get(home.headers["location"])
    assert own.status_code == 200
    assert 'data-testid="answers"' in own.text  # the plain page (customer_home.html)
    assert 'data-testid="checklist"' not in own.text
    refused = await client.get(f"/console/customers/{other}")
    assert refused.status_code == 403
    assert 'data-code="forbidden"' in refused.text
    other_name = web.enrolled.sandbox.kross.facility_summaries()[1]["name"]
    assert other_name not in refused.text


async def test_pages_load_nothing_from_another_origin_and_forbid_framing(web: WebSandbox) -> None:
    admin, _ = await web.signed_in("admin")
    answer = await admin.get(f"/console/customers/{web.student_id}")
    assert answer.status_code == 200
    assert answer.headers["x-frame-options"] == "DENY"
    assert "script-src 'self'" in answer.headers["content-security-policy"]
    assert answer.headers["cache-control"] == "no-store"
    external = re.findall(r'(?:src|href)="(https?://[^"]+)"', answer.text)
    assert external == []
    assert "<script" not in answer.text.split("</head>", 1)[1]  # charts carry no script
    assert answer.text.count('data-testid="chart-') >= 2
    assert (await admin.get("/static/htmx.min.js")).status_code == 200


async def test_a_console_form_without_the_csrf_token_is_refused(web: WebSandbox) -> None:
    client, _ = await web.signed_in("customer")
    answer = await client.post(
        f"/console/customers/{web.student_id}/sync", data={"commit": "false"}
    )
    assert answer.status_code == 403
    assert 'data-code="csrf_failed"' in answer.text  # a page, for a person
    assert await web.web.sync_jobs.latest(web.student_id) is None
    # htmx (a page older than its session's token): the page is reloaded.
    stale = await client.post(
        f"/console/customers/{web.student_id}/sync",
        data=sync_form(web, client, commit="false"),
        headers={"HX-Request": "true", "X-CSRF-Token": "an-old-token"},
    )
    assert (stale.status_code, stale.headers.get("hx-refresh")) == (200, "true")
    assert await web.web.sync_jobs.latest(web.student_id) is None


async def test_a_dry_run_from_the_page_shows_its_counters_once_finished(web: WebSandbox) -> None:
    client, token = await web.signed_in("customer")
    started = await post_sync(web, client, token)
    assert started.status_code == 303
    job = await web.web.sync_jobs.latest(web.student_id)
    assert job is not None
    finished = await web.web.sync_jobs.wait(job.id)
    assert finished.status == "succeeded"
    panel = await client.get(
        f"/console/customers/{web.student_id}/sync", headers={"HX-Request": "true"}
    )
    apartments = len(web.enrolled.facility["apartments"])
    assert 'data-status="succeeded"' in panel.text
    assert f"{apartments} apartments checked; nothing was changed." in panel.text
    assert "sync-counters" not in panel.text  # a customer reads words, not counters
    assert "hx-trigger" not in panel.text  # finished: the panel stops polling


async def test_an_htmx_sync_answers_the_live_panel_that_polls_while_running(
    web: WebSandbox,
) -> None:
    client, token = await web.signed_in("customer")
    web.sleep.close()  # hold the sync at its first throttle wait
    answer = await post_sync(web, client, token, commit=True, htmx=True)
    assert answer.status_code == 200
    assert answer.text.lstrip().startswith('<section class="card" id="knowledge"')
    assert 'hx-trigger="every 1s"' in answer.text
    assert 'data-testid="sync-progress"' in answer.text
    web.sleep.open()
    job = await web.web.sync_jobs.latest(web.student_id)
    assert job is not None
    assert (await web.web.sync_jobs.wait(job.id)).status == "succeeded"


async def test_wrong_credentials_in_the_reconnect_form_change_nothing(web: WebSandbox) -> None:
    await web.enrolled.break_kross()
    client, token = await web.signed_in("customer")
    before = await web.gateway.facilities.get(web.hotel_id)
    answer = await post_reconnect(web, client, token, "certainly-not-the-password")
    assert answer.status_code == 422
    assert 'data-testid="reconnect-error"' in answer.text
    assert "certainly-not-the-password" not in answer.text
    after = await web.gateway.facilities.get(web.hotel_id)
    assert (after.status, after.updated_at) == (before.status, before.updated_at)
    ctx = await web.web.customers.context(web.student_id)
    assert ctx.kross is not None and ctx.kross.status == "error"


async def test_the_reconnect_form_with_the_new_password_brings_the_integration_back(
    web: WebSandbox,
) -> None:
    await web.enrolled.break_kross()
    new_password = "the-new-api-password-1"
    web.enrolled.sandbox.kross.change_password(web.hotel_id, new_password)
    client, token = await web.signed_in("customer")
    answer = await post_reconnect(web, client, token, new_password, headers={"HX-Request": "true"})
    assert answer.status_code == 200
    assert 'data-testid="reconnect-result"' in answer.text
    assert 'data-testid="pms-status">connected<' in answer.text
    assert new_password not in answer.text
    ctx = await web.web.customers.context(web.student_id)
    assert ctx.kross is not None and ctx.kross.status == "connected"


async def test_a_sync_that_cannot_run_is_refused_on_the_page_without_a_job(
    database_url: str,
) -> None:
    async with web_sandbox(database_url, with_notion=False) as web:
        client, token = await web.signed_in("customer")
        answer = await post_sync(web, client, token, commit=True)
        assert answer.status_code == 409
        assert 'data-code="notes_not_connected"' in answer.text
        assert await web.web.sync_jobs.latest(web.student_id) is None


@pytest.mark.parametrize("htmx", [False, True])
async def test_a_customer_posting_to_another_customers_page_sees_nothing_of_it(
    web: WebSandbox, htmx: bool
) -> None:
    other = await web.second_customer()
    owner, owner_token = await web.signed_in("customer")
    await post_sync(web, owner, owner_token)
    job = await web.web.sync_jobs.latest(web.student_id)
    assert job is not None
    await web.web.sync_jobs.wait(job.id)

    intruder, token = await web.signed_in("customer", student_id=other)
    headers = {"HX-Request": "true"} if htmx else {}
    for target in (web.student_id, "no-such-customer"):
        answer = await intruder.post(
            f"/console/customers/{target}/sync",
            data=sync_form(web, intruder, commit="false", csrf_token=token),
            headers=headers,
        )
        assert answer.status_code == 403
        assert 'data-code="forbidden"' in answer.text
        assert job.id not in answer.text and "sync-counters" not in answer.text
    assert (await web.web.sync_jobs.latest(web.student_id)) == (
        await web.web.sync_jobs.status(job.id)
    )


async def test_a_console_form_sent_after_the_session_ended_goes_to_the_login_page(
    web: WebSandbox,
) -> None:
    path = f"/console/customers/{web.student_id}/sync"
    plain = await web.client.post(path, data={"commit": "false"})
    assert plain.status_code == 303
    assert plain.headers["location"] == f"/login?next={path}"
    htmx = await web.client.get(path, headers={"HX-Request": "true"})
    assert (htmx.status_code, htmx.headers["hx-redirect"]) == (200, f"/login?next={path}")


async def test_an_unknown_console_page_is_a_page_and_an_unknown_api_route_is_json(
    web: WebSandbox,
) -> None:
    admin, _ = await web.signed_in("admin")
    page = await admin.get("/console/nothing-here")
    assert page.status_code == 404
    assert 'data-code="not_found"' in page.text
    api = await admin.get("/api/nothing/here/at/all")
    assert_error(api, 404, "not_found")
