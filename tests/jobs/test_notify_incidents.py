"""notify-incidents: a changed booking-system password is *told*, once, and so is the recovery.

The whole path through real clients on the in-process emulators: the password changes in
the booking-system emulator, check-connections puts the facility in ``error``, the job
(run on two containers over one database — two replicas — and twice each) sends exactly
one customer e-mail, one team e-mail and one webhook POST to a real HTTP server on
127.0.0.1; the customer's one-time link signs in and lands on the reconnect form, spent
once; reconnecting with the new password brings exactly one recovery notice per channel.
Time is the sandbox's ManualClock; nothing sleeps.
"""

from __future__ import annotations

import email.policy
import json
import re
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from datetime import timedelta
from email.message import EmailMessage
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from pydantic import SecretStr

from pmsgate.app import create_app
from pmsgate.container import Container, open_container
from pmsgate.jobs.connections import CHECK_CONNECTIONS
from pmsgate.jobs.notify import MAX_ATTEMPTS, NOTIFY_INCIDENTS
from pmsgate.jobs.scheduler import Scheduler, build_scheduler
from pmsgate.storage.audit import AuditFilter
from tests.customers.support import SANDBOX_URL, EnrolledSandbox, enrolled_sandbox, profile_of
from tests.e2e.processes import free_port
from tests.jobs.support import OnEnrolled, job_stack

pytestmark = pytest.mark.anyio

TEAM = "ops@platform.example"
PUBLIC = "https://console.example.com"
NEW_PASSWORD = "changed-by-the-customer-77"
WEB_URL = "http://pmsgate.test"


@dataclass
class Hook:
    """A real HTTP server on 127.0.0.1 recording the JSON bodies POSTed to it."""

    server: ThreadingHTTPServer
    bodies: list[dict[str, Any]] = field(default_factory=list)
    fail_next: int = 0  # answer 500 to this many POSTs first

    @property
    def base(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"


@pytest.fixture
def hook() -> Iterator[Hook]:
    holder: dict[str, Hook] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            size = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(size))
            found = holder["hook"]
            if found.fail_next > 0:
                found.fail_next -= 1
                self.send_response(500)
            else:
                found.bodies.append(body)
                self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    holder["hook"] = Hook(server)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield holder["hook"]
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Replicas(OnEnrolled):
    """The enrolled sandbox and two more containers over its database (two replicas)."""

    replicas: list[Container]
    schedulers: list[Scheduler]
    app_client: httpx.AsyncClient
    outbox: Path
    stack: AsyncExitStack

    async def new_client(self) -> httpx.AsyncClient:
        app = create_app(self.enrolled.settings, container=self.replicas[0])
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=WEB_URL)
        return await self.stack.enter_async_context(client)

    def messages(self) -> dict[str, EmailMessage]:
        found: dict[str, EmailMessage] = {}
        for path in sorted(self.outbox.glob("incident-*.eml")):
            with path.open("rb") as handle:
                parsed = BytesParser(policy=email.policy.default).parse(handle)
            assert isinstance(parsed, EmailMessage)
            found[path.name] = parsed
        return found

    async def notify_everywhere(self, times: int = 2) -> None:
        for _ in range(times):
            for scheduler in self.schedulers:
                await scheduler.run_once(NOTIFY_INCIDENTS)


def _routing_factory(enrolled: EnrolledSandbox, hook: Hook) -> Any:
    """Upstream clients on the sandbox app, except the loopback webhook (real network)."""

    def factory() -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=enrolled.app),
            base_url=SANDBOX_URL,
            mounts={hook.base: httpx.AsyncHTTPTransport()},
        )

    return factory


@pytest.fixture
async def replicas(database_url: str, tmp_path: Path, hook: Hook) -> AsyncIterator[Replicas]:
    overrides = {
        "data_dir": tmp_path,
        "notify_team_email": TEAM,
        "notify_webhook_url": SecretStr(f"{hook.base}/hooks/T0123/secret-path"),
        "public_url": PUBLIC,
    }
    async with (
        enrolled_sandbox(database_url, settings_overrides=overrides) as enrolled,
        AsyncExitStack() as stack,
    ):
        # These tests read the English notices (a customer without a language reads Italian).
        await enrolled.container.customers.customers.upsert(
            replace(profile_of(enrolled.facility), language="en")
        )
        containers = [
            await stack.enter_async_context(
                open_container(
                    enrolled.settings,
                    http_factory=_routing_factory(enrolled, hook),
                    clock=enrolled.clock,
                    sleep=enrolled.sleep,
                )
            )
            for _ in range(2)
        ]
        app = create_app(enrolled.settings, container=containers[0])
        client = await stack.enter_async_context(
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=WEB_URL)
        )
        yield Replicas(
            enrolled=enrolled,
            replicas=containers,
            schedulers=[build_scheduler(c.web, sleep=enrolled.sleep) for c in containers],
            app_client=client,
            outbox=tmp_path / "outbox",
            stack=stack,
        )


def _customer_email(r: Replicas) -> str:
    return f"owner-{r.hotel_id}@example.com"


async def _break_password(r: Replicas) -> None:
    scheduler = r.schedulers[0]
    await scheduler.run_once(CHECK_CONNECTIONS)  # a token is held from now on
    r.enrolled.sandbox.kross.change_password(r.hotel_id, NEW_PASSWORD)
    run = await scheduler.run_once(CHECK_CONNECTIONS)
    assert run.detail is not None and run.detail["now_in_error"], run.detail
    assert (await r.replicas[0].gateway.facilities.get(r.hotel_id)).status == "error"


async def _break_a_signed_up_customers_password(r: Replicas, *, then_ticks: int) -> None:
    """The customer gets a console user (the notice's link signs it in); then its password
    changes upstream; then every replica runs the notices job ``then_ticks`` times."""
    await r.replicas[0].web.users.add(
        _customer_email(r),
        SecretStr("a customer password"),
        role="customer",
        student_id=r.student_id,
    )
    await _break_password(r)
    await r.notify_everywhere(times=then_ticks)


def _link_of(message: EmailMessage) -> str:
    body = message.get_body(preferencelist=("plain",))
    assert body is not None
    found = re.search(re.escape(PUBLIC) + r"(/login/link/[A-Za-z0-9_-]+)", body.get_content())
    assert found, body.get_content()
    return found.group(1)


def _text(message: EmailMessage) -> str:
    body = message.get_body(preferencelist=("plain",))
    assert body is not None
    return str(body.get_content())


async def _audit(r: Replicas, prefix: str) -> list[Any]:
    page = await r.replicas[0].audit.page(AuditFilter(action_prefix=prefix), limit=200)
    return list(page.events)


async def test_a_changed_password_is_told_once_per_channel_and_the_link_leads_to_reconnect(
    replicas: Replicas, hook: Hook
) -> None:
    r = replicas
    # Two replicas, each ticking twice: one message per channel.
    await _break_a_signed_up_customers_password(r, then_ticks=2)

    messages = r.messages()
    assert len(messages) == 2, list(messages)
    [customer] = [m for m in messages.values() if m["To"] == _customer_email(r)]
    [team] = [m for m in messages.values() if m["To"] == TEAM]
    assert len(hook.bodies) == 1
    assert set(hook.bodies[0]) == {"text"}
    assert r.hotel_id in hook.bodies[0]["text"]

    # The customer's words: plain, no internal ids, no secrets; a link to the reconnect form.
    customer_text = _text(customer)
    assert customer["Subject"] == "Action needed: reconnect your booking system"
    for internal in (r.hotel_id, r.student_id, "pms_auth_failed", NEW_PASSWORD):
        assert internal not in customer_text
        assert internal not in str(customer["Subject"])
    link = _link_of(customer)
    assert "works once" in customer_text
    # The team's: the ids an operator searches by, never the customer's link or a secret.
    team_text = _text(team)
    assert r.hotel_id in team_text and r.student_id in team_text
    assert "/login/link/" not in team_text
    for raw in (team_text, json.dumps(hook.bodies), customer_text):
        assert NEW_PASSWORD not in raw
        assert "secret-path" not in raw
        assert str(r.enrolled.facility["password"]) not in raw

    sent = await _audit(r, "notice.sent")
    assert sorted(e.details["channel"] for e in sent) == ["customer", "team", "webhook"]
    assert all("/login/link/" not in json.dumps(e.details) for e in sent)
    # The customer's trail shows its facility's events: the team's address stays out of it.
    assert {e.details["channel"]: e.details["recipient"] for e in sent} == {
        "customer": _customer_email(r),
        "team": "team",
        "webhook": "webhook",
    }
    assert all(TEAM not in json.dumps(e.details) for e in sent)

    # The link: a page first (a GET never spends it), then signed in on the reconnect form.
    client = await r.new_client()
    page = await client.get(link)
    assert page.status_code == 200
    assert 'data-testid="login-link-continue"' in page.text
    answer = await client.post(link)
    assert answer.status_code == 303
    assert answer.headers["location"] == f"/console/customers/{r.student_id}#reconnect"
    console = await client.get(answer.headers["location"])
    assert console.status_code == 200
    assert 'id="reconnect"' in console.text
    [used] = await _audit(r, "signin.link_used")
    assert used.actor == _customer_email(r)

    # Spent: a clear page with the way to sign in, never a 500; a stranger's try is audited.
    stranger = await r.new_client()
    again = await stranger.post(link)
    assert again.status_code == 410
    assert 'data-state="used"' in again.text
    assert 'href="/login' in again.text
    assert (await stranger.get(link)).status_code == 410
    assert (await stranger.get("/login/link/not-a-real-token")).status_code == 410
    refused = await _audit(r, "signin.failed")
    assert any(e.details.get("reason") == "login_link_invalid" for e in refused)

    # Reconnect with the new password, signed in through the link: one recovery notice each.
    me = (await client.get("/api/auth/me")).json()
    reconnected = await client.put(
        f"/api/sandbox-{r.hotel_id}/kross/connect",
        json={"username": r.enrolled.facility["username"], "password": NEW_PASSWORD},
        headers={"X-CSRF-Token": me["csrfToken"]},
    )
    assert reconnected.status_code == 200, reconnected.text
    await r.notify_everywhere(times=2)

    messages = r.messages()
    assert len(messages) == 4, list(messages)
    recovered = [m for m in messages.values() if "connected again" in str(m["Subject"])]
    assert [m["To"] for m in recovered] == [_customer_email(r)]
    assert any(str(m["Subject"]).startswith("[pmsgate] Reconnected") for m in messages.values())
    assert len(hook.bodies) == 2
    assert hook.bodies[1]["text"].startswith(":white_check_mark:")
    sent = await _audit(r, "notice.sent")
    assert sorted((e.details["kind"], e.details["channel"]) for e in sent) == [
        ("error", "customer"),
        ("error", "team"),
        ("error", "webhook"),
        ("recovered", "customer"),
        ("recovered", "team"),
        ("recovered", "webhook"),
    ]


async def test_an_expired_link_is_refused_with_a_page_and_a_new_incident_is_told_again(
    replicas: Replicas, hook: Hook
) -> None:
    r = replicas
    await _break_a_signed_up_customers_password(r, then_ticks=1)
    [customer] = [m for m in r.messages().values() if m["To"] == _customer_email(r)]
    link = _link_of(customer)

    r.enrolled.clock.advance(timedelta(hours=24, seconds=1).total_seconds())
    client = await r.new_client()
    page = await client.get(link)
    assert page.status_code == 410
    assert 'data-state="expired"' in page.text
    assert (await client.post(link)).status_code == 410
    assert "pmsgate_session" not in client.cookies

    # Reconnected by an operator, then broken again: a second incident, told again.
    await r.replicas[0].gateway.facilities.mark_connected(r.hotel_id)
    await r.notify_everywhere(times=1)
    r.enrolled.clock.advance(60)
    await r.replicas[0].gateway.facilities.mark_error(r.hotel_id, "refused again")
    await r.notify_everywhere(times=2)
    to_customer = [m for m in r.messages().values() if m["To"] == _customer_email(r)]
    subjects = sorted(str(m["Subject"]) for m in to_customer)
    assert subjects == [
        "Action needed: reconnect your booking system",
        "Action needed: reconnect your booking system",
        "Your booking system is connected again",
    ]
    assert len(hook.bodies) == 3


async def test_a_failed_webhook_is_retried_on_the_next_tick_and_recorded(
    replicas: Replicas, hook: Hook
) -> None:
    r = replicas
    hook.fail_next = 1
    await _break_password(r)

    first = await r.schedulers[0].run_once(NOTIFY_INCIDENTS)
    assert first.status == "failed"
    assert first.detail is not None
    assert first.detail["retrying"] == [
        {"hotel_id": r.hotel_id, "kind": "error", "channel": "webhook"}
    ]
    assert hook.bodies == []
    # No console login for this customer: the notice says how to get help, no link.
    [customer] = [m for m in r.messages().values() if m["To"] == _customer_email(r)]
    assert "/login/link/" not in _text(customer)
    assert "reply to this message" in _text(customer)

    second = await r.schedulers[1].run_once(NOTIFY_INCIDENTS)
    assert second.status == "succeeded", second.detail
    assert len(hook.bodies) == 1
    failed = await _audit(r, "notice.failed")
    assert [(e.details["channel"], e.details["code"], e.details["retried"]) for e in failed] == [
        ("webhook", "webhook_failed", True)
    ]
    assert len(r.messages()) == 2  # the e-mails went out once, on the first tick


async def test_a_webhook_that_keeps_failing_is_given_up_after_the_last_attempt(
    replicas: Replicas, hook: Hook
) -> None:
    r = replicas
    hook.fail_next = MAX_ATTEMPTS + 5
    await _break_password(r)
    for tick in range(MAX_ATTEMPTS + 2):
        run = await r.schedulers[tick % 2].run_once(NOTIFY_INCIDENTS)
        assert run.detail is not None
        if tick < MAX_ATTEMPTS - 1:
            assert run.detail["retrying"], run.detail
        elif tick == MAX_ATTEMPTS - 1:
            assert run.detail["failed"] == [
                {"hotel_id": r.hotel_id, "kind": "error", "channel": "webhook"}
            ]
        else:  # given up: no more attempts, the tick is clean again
            assert run.status == "succeeded", run.detail
    assert hook.fail_next == 5  # exactly MAX_ATTEMPTS POSTs were tried
    failed = await _audit(r, "notice.failed")
    assert sorted(e.details["retried"] for e in failed) == [False] + [True] * (MAX_ATTEMPTS - 1)


async def test_two_uses_of_one_link_at_once_sign_in_once(replicas: Replicas) -> None:
    r = replicas
    await _break_a_signed_up_customers_password(r, then_ticks=1)
    [customer] = [m for m in r.messages().values() if m["To"] == _customer_email(r)]
    link = _link_of(customer)
    clients = [await r.new_client(), await r.new_client()]
    answers: list[int] = []

    async def use(client: httpx.AsyncClient) -> None:
        answers.append((await client.post(link)).status_code)

    async with anyio.create_task_group() as group:
        for client in clients:
            group.start_soon(use, client)
    assert sorted(answers) == [303, 410]


async def test_a_customer_who_reads_italian_is_told_in_italian(replicas: Replicas) -> None:
    r = replicas
    customers = r.replicas[0].customers.customers
    await customers.upsert(replace(profile_of(r.enrolled.facility), language="it"))
    assert (await customers.get(r.student_id)).language == "it"
    # An upsert that does not name a language keeps the stored one.
    await customers.upsert(profile_of(r.enrolled.facility))
    assert (await customers.get(r.student_id)).language == "it"
    await _break_password(r)
    await r.notify_everywhere(times=1)
    [customer] = [m for m in r.messages().values() if m["To"] == _customer_email(r)]
    [team] = [m for m in r.messages().values() if m["To"] == TEAM]
    assert customer["Subject"] == "Azione richiesta: ricollega il tuo gestionale"
    assert customer["Content-Language"] == "it"
    assert "gestionale delle prenotazioni" in _text(customer)
    assert str(team["Subject"]).startswith("[pmsgate] Booking system disconnected")


async def test_an_unreachable_mail_server_is_retried_and_nothing_is_recorded_as_sent(
    database_url: str, tmp_path: Path
) -> None:
    closed = free_port()  # nothing listens there: the connection is refused at once
    overrides = {
        "data_dir": tmp_path,
        "notify_team_email": TEAM,
        "smtp_url": SecretStr(f"smtp://mailer:mail-password-1@127.0.0.1:{closed}"),
    }
    async with job_stack(database_url, settings_overrides=overrides) as stack:
        await stack.run(CHECK_CONNECTIONS)
        stack.enrolled.sandbox.kross.change_password(stack.hotel_id, NEW_PASSWORD)
        await stack.run(CHECK_CONNECTIONS)
        run = await stack.run(NOTIFY_INCIDENTS)
        assert run.status == "failed"
        assert run.detail is not None
        assert sorted(item["channel"] for item in run.detail["retrying"]) == ["customer", "team"]
        assert "mail-password-1" not in json.dumps(run.detail)
        assert not list((tmp_path / "outbox").glob("incident-*.eml"))  # nothing went out
        page = await stack.web.audit.page(AuditFilter(action_prefix="notice."), limit=50)
        assert {(e.action, e.details["code"]) for e in page.events} == {
            ("notice.failed", "smtp_failed")
        }
        assert all("mail-password-1" not in json.dumps(e.details) for e in page.events)
        again = await stack.run(NOTIFY_INCIDENTS)  # the next tick tries again
        assert again.detail is not None and len(again.detail["retrying"]) == 2
