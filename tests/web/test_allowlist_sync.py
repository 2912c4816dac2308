"""The knowledge allowlist is enforced where a sync starts (spec §4.3 step 2, issue 16).

Every sync job — the JSON API's, the console's, the CLI's foreground run — is created
by ``SyncJobs``, which checks the customer's registered e-mail against the allowlist on
every start. Through HTTP on the emulators: a customer off the list gets 403
``not_on_allowlist`` (no job), an admin acting on that customer too, and removing the
entry takes effect on the very next request.
"""

from __future__ import annotations

import pytest

from pmsgate.errors import PmsgateError
from tests.customers.support import profile_of
from tests.web.support import WebSandbox, csrf, login, post_sync, sync_knowledge, web_sandbox

pytestmark = pytest.mark.anyio


async def test_the_api_refuses_a_customer_removed_from_the_allowlist_at_once(
    web: WebSandbox,
) -> None:
    client, token = await web.signed_in("customer")
    url = f"/api/{web.assistant}/sync-knowledge"
    allowed = await client.post(url, json={"commit": False}, headers=csrf(token))
    assert allowed.status_code == 200, allowed.text
    jobs_before = await web.web.sync_jobs.repo.jobs_of(web.student_id, limit=50)

    email = profile_of(web.enrolled.facility).email
    await web.web.customers.allowlist.remove(email)
    refused = await client.post(url, json={"commit": True}, headers=csrf(token))

    assert refused.status_code == 403, refused.text
    error = refused.json()["error"]
    assert error["code"] == "not_on_allowlist"
    assert email in error["message"] and "allowlist" in error["hint"]
    # No job was recorded for the refused start.
    assert await web.web.sync_jobs.repo.jobs_of(web.student_id, limit=50) == jobs_before
    assert await web.web.customers.allowlist.customer_allowed(web.student_id) is False

    # Put back: the very next start is accepted (nothing cached either way).
    await web.web.customers.allowlist.put(email)
    again = await client.post(url, json={"commit": False}, headers=csrf(token))
    assert again.status_code == 200, again.text


async def test_an_admin_acting_on_a_customer_off_the_list_is_refused_too(
    database_url: str,
) -> None:
    async with web_sandbox(database_url, allowlisted=False) as web:
        admin_email, password = await web.add_user("admin")
        admin = await web.new_client()
        token = await login(admin, admin_email, password)
        # The admin's own address on the list changes nothing: the customer's entry counts.
        await web.web.customers.allowlist.put(admin_email)

        refused = await sync_knowledge(admin, web.assistant, token)

        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["code"] == "not_on_allowlist"
        # The admin's console form too, with the address to put on the list.
        page = await post_sync(web, admin, token)
        assert page.status_code == 403, page.text
        assert profile_of(web.enrolled.facility).email in page.text
        assert "allowlist" in page.text
        assert await web.web.sync_jobs.latest(web.student_id) is None


async def test_the_console_shows_the_refusal_as_a_clear_message(database_url: str) -> None:
    async with web_sandbox(database_url, allowlisted=False) as web:
        client, token = await web.signed_in("customer")

        page = await post_sync(web, client, token)

        assert page.status_code == 403, page.text
        # In words (the customer's page says knowledge updates are not open to it yet).
        assert "not open" in page.text
        assert await web.web.sync_jobs.latest(web.student_id) is None

        # Added to the list: the same form starts the sync.
        email = profile_of(web.enrolled.facility).email
        await web.web.customers.allowlist.put(email)
        started = await post_sync(web, client, token, follow_redirects=False)
        assert started.status_code == 303, started.text
        assert await web.web.sync_jobs.latest(web.student_id) is not None


async def test_a_foreground_run_is_refused_the_same_way(database_url: str) -> None:
    async with web_sandbox(database_url, allowlisted=False) as web:
        with pytest.raises(PmsgateError) as refused:
            await web.web.sync_jobs.run(web.student_id, commit=False)
        assert refused.value.code == "not_on_allowlist" and refused.value.status == 403
        assert await web.web.sync_jobs.latest(web.student_id) is None
