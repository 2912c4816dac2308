"""The audit trail in the web application: sign-in events, console actions, the trail's pages
and export, and who sees what (through HTTP, on the sandbox)."""

from __future__ import annotations

import json

import pytest

from pmsgate.audit import Actor, AuditAction
from pmsgate.storage.audit import AuditEventView, AuditFilter
from tests.conftest import database_url as database_url  # both databases: see conftest.py
from tests.web.support import (
    DEFAULT_PASSWORD,
    WebSandbox,
    csrf,
    login,
    post_reconnect,
    post_sync,
    web_sandbox,
)

pytestmark = pytest.mark.anyio


async def events(web: WebSandbox) -> list[AuditEventView]:
    return [e async for e in web.web.audit.export(AuditFilter())]


async def test_sign_ins_are_recorded_with_client_and_name_but_never_the_password(
    web: WebSandbox,
) -> None:
    email, password = await web.add_user("customer")
    wrong = "hunter2-not-the-password"
    refused = await web.client.post("/api/auth/login", json={"email": email, "password": wrong})
    assert refused.status_code == 401
    # A password typed into the address field is never recorded as the user name.
    await web.client.post("/api/auth/login", json={"email": password, "password": "x"})
    form = await web.client.post("/login", data={"email": email, "password": wrong})
    assert form.status_code == 401
    await login(web.client, email, password)

    found = await events(web)
    signins = [e for e in found if e.action.startswith("signin.")]
    assert [(e.action, e.outcome, e.subject) for e in signins] == [
        ("signin.succeeded", "success", f"user:{email}"),
        ("signin.failed", "failure", f"user:{email}"),
        ("signin.failed", "failure", "user:(not an e-mail address)"),
        ("signin.failed", "failure", f"user:{email}"),
    ]
    assert {e.client_address for e in signins} == {"127.0.0.1"}
    assert signins[0].actor_kind == "customer_user" and signins[0].actor == email
    assert signins[0].customer_id is not None
    assert signins[1].details == {"reason": "invalid_credentials"}
    assert all(e.request_id for e in signins)
    text = repr(found)
    assert wrong not in text and password not in text


async def test_throttled_sign_ins_are_recorded_as_refused(database_url: str) -> None:
    async with web_sandbox(database_url, settings_overrides={"login_max_failures": 1}) as web:
        email, _ = await web.add_user("admin")
        for _ in range(2):
            await web.client.post("/api/auth/login", json={"email": email, "password": "nope"})
        outcomes = [e.outcome for e in await events(web) if e.action == "signin.failed"]
        assert outcomes == ["refused", "failure"]


async def test_console_actions_are_recorded_with_the_customer_user_as_actor(
    web: WebSandbox,
) -> None:
    await web.enrolled.break_kross()
    client, token = await web.signed_in("customer")
    wrong = "certainly-not-the-password"
    answer = await post_reconnect(
        web, client, token, wrong, headers={"X-Request-ID": "req-reconnect-1"}
    )
    assert answer.status_code == 422
    assert answer.headers["x-request-id"] == "req-reconnect-1"
    started = await post_sync(web, client, token)
    assert started.status_code == 303

    actions = [e for e in await events(web) if e.action == "console.action"]
    assert [(e.details["operation"], e.outcome) for e in actions] == [
        ("knowledge.sync", "success"),
        ("kross.reconnect", "failure"),
    ]
    reconnect = actions[1]
    assert reconnect.actor_kind == "customer_user"
    assert reconnect.request_id == "req-reconnect-1"
    assert reconnect.subject == f"customer:{web.student_id}"
    assert reconnect.customer_id is not None
    assert "error" in reconnect.details
    assert wrong not in repr(actions)
    job = await web.web.sync_jobs.latest(web.student_id)
    assert job is not None
    await web.web.sync_jobs.wait(job.id)


async def test_web_api_reconnect_is_recorded(web: WebSandbox) -> None:
    client, token = await web.signed_in("admin")
    answer = await client.put(
        "/api/admin/kross/connect",
        json={
            "studentId": web.student_id,
            "username": web.enrolled.facility["username"],
            "password": "wrong-password-for-the-api",
        },
        headers=csrf(token),
    )
    assert answer.status_code >= 400
    [event] = [e for e in await events(web) if e.action == "console.action"]
    assert (event.actor_kind, event.outcome) == ("admin", "failure")
    assert event.details["operation"] == "kross.reconnect"
    assert "wrong-password-for-the-api" not in repr(event)


async def test_an_admin_sees_every_event_filters_them_and_exports_them(web: WebSandbox) -> None:
    other = await web.second_customer()
    theirs, _ = await web.add_user("customer", student_id=other)
    ours, _ = await web.add_user("customer")
    for email in (theirs, ours):
        await login(await web.new_client(), email, DEFAULT_PASSWORD)
    admin, _ = await web.signed_in("admin")

    page = await admin.get("/console/audit")
    assert page.status_code == 200
    assert f"user:{theirs}" in page.text and f"user:{ours}" in page.text
    assert page.headers["cache-control"] == "no-store"

    only_other = await admin.get("/console/audit", params={"customer": other})
    assert f"user:{theirs}" in only_other.text and f"user:{ours}" not in only_other.text
    failures = await admin.get("/console/audit", params={"outcome": "failure"})
    assert 'data-testid="audit-empty"' in failures.text

    export = await admin.get("/console/audit/export.jsonl", params={"action": "signin."})
    assert export.status_code == 200
    assert export.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in export.text.splitlines()]
    assert {line["action"] for line in lines} == {"signin.succeeded"}
    assert {line["subject"] for line in lines} >= {f"user:{theirs}", f"user:{ours}"}

    bad = await admin.get("/console/audit", params={"since": "yesterday"})
    assert bad.status_code == 422 and 'data-code="invalid_since"' in bad.text


async def test_a_customer_never_sees_another_customers_events(web: WebSandbox) -> None:
    other = await web.second_customer()
    theirs, _ = await web.add_user("customer", student_id=other)
    await login(await web.new_client(), theirs, DEFAULT_PASSWORD)
    # Their facility's events (its own keys' key.minted are the customer's to see).
    their_subject = f"facility:{web.enrolled.sandbox.kross.facility_summaries()[1]['hotel_id']}"
    await web.web.audit.record(
        AuditAction.KEY_MINTED, actor=Actor.cli(), subject=their_subject, student_id=other
    )
    client, _ = await web.signed_in("customer")

    for params in ({}, {"customer": other}, {"customer": ""}, {"action": "signin."}):
        page = await client.get("/console/audit", params=params)
        assert page.status_code == 200
        assert theirs not in page.text and their_subject not in page.text
        export = await client.get("/console/audit/export.jsonl", params=params)
        assert export.status_code == 200
        for line in export.text.splitlines():
            event = json.loads(line)
            assert theirs not in event["subject"] and event["subject"] != their_subject
    own = await client.get("/console/audit")
    assert "signin.succeeded" in own.text  # its own sign-in is there
    # A cursor of another listing cannot widen the scope either.
    every = [e async for e in web.web.audit.export(AuditFilter())]
    cursor = every[-1].cursor
    paged = await client.get("/console/audit", params={"after": cursor, "customer": other})
    assert theirs not in paged.text


async def test_the_trail_needs_a_sign_in(web: WebSandbox) -> None:
    page = await web.client.get("/console/audit")
    export = await web.client.get("/console/audit/export.jsonl")
    assert page.status_code == export.status_code == 303
    assert page.headers["location"].startswith("/login")


async def test_no_event_holds_a_secret_after_a_scenario(web: WebSandbox) -> None:
    email, password = await web.add_user("customer")
    await web.client.post("/api/auth/login", json={"email": email, "password": "bad-" + password})
    client = await web.new_client()
    token = await login(client, email, password)
    cookie = client.cookies.get("pmsgate_session")
    await web.enrolled.break_kross()
    new_password = "the-new-api-password-7"
    web.enrolled.sandbox.kross.change_password(web.hotel_id, new_password)
    for attempt in ("wrong-one-" + new_password, new_password):
        await client.put(
            f"/api/{web.assistant}/kross/connect",
            json={"username": web.enrolled.facility["username"], "password": attempt},
            headers=csrf(token),
        )
    secrets = [
        password,
        "bad-" + password,
        new_password,
        token,
        cookie,
        web.enrolled._original_password,
    ]
    found = await events(web)
    assert {e.action for e in found} >= {"signin.failed", "signin.succeeded", "console.action"}
    text = "\n".join(json.dumps(e.as_json()) for e in found)
    for secret in secrets:
        assert secret and secret not in text


async def test_the_admin_filters_by_actor_kind_and_last_day_and_an_unknown_customer_is_named(
    web: WebSandbox,
) -> None:
    client, _ = await web.signed_in("admin")
    teammate = Actor.admin("teammate@platform.example")
    await web.web.audit.record(
        AuditAction.CONSOLE_ACTION,
        actor=teammate,
        subject=f"customer:{web.student_id}",
        details={"operation": "check-now"},
        student_id=web.student_id,
    )
    page = await client.get("/console/audit", params={"actor": teammate.name})
    assert page.status_code == 200
    assert page.text.count('data-testid="audit-event"') == 1
    # The actor picker offers who acted lately; the customer picker every customer.
    assert f'<option value="{teammate.name}">admin</option>' in page.text
    assert f'<option value="{web.student_id}">' in page.text

    by_cli = [e for e in await events(web) if e.actor_kind == "cli"]  # the enrolment's
    assert by_cli
    by_kind = await client.get("/console/audit", params={"actor_kind": "cli"})
    assert by_kind.text.count('data-testid="audit-event"') == min(50, len(by_cli))
    bad_kind = await client.get("/console/audit", params={"actor_kind": "robot"})
    assert bad_kind.status_code == 422 and "invalid_actor_kind_filter" in bad_kind.text

    # "to" is the last day included: yesterday's selection holds nothing recorded today.
    today = web.web.clock.now().date()
    until_today = await client.get("/console/audit", params={"until": today.isoformat()})
    assert until_today.text.count('data-testid="audit-event"') >= 1
    yesterday = today.fromordinal(today.toordinal() - 1).isoformat()
    empty = await client.get("/console/audit", params={"until": yesterday})
    assert 'data-testid="audit-empty"' in empty.text

    unknown = await client.get("/console/audit", params={"customer": "nobody"})
    assert unknown.status_code == 422 and "unknown_customer_filter" in unknown.text

    export = await client.get("/console/audit/export.jsonl", params={"actor": teammate.name})
    assert [json.loads(line)["actor"] for line in export.text.splitlines()] == [teammate.name]
