"""The web application on the in-process emulators, for endpoint, console and browser tests.

``web_sandbox(database_url, …)`` builds on :func:`tests.customers.support.enrolled_sandbox`
(one seeded facility enrolled as a customer through the real services) and adds:

- a container (:func:`pmsgate.container.open_container`, as the app's process builds
  it) whose upstream clients talk to the sandbox app, on the sandbox's ManualClock,
  waiting through :class:`GatedSleep` (moves the ManualClock, and can be held closed
  to keep a background sync running while a test looks at it);
- the app (:func:`pmsgate.app.create_app` on it: the gateway, its admin API and the
  web application — accounts, JSON API, console, ``/static``);
- ``client``: an httpx client on the app (``base_url`` :data:`WEB_URL`, its own cookies).

Helpers: :meth:`WebSandbox.add_user` creates an account (a customer's defaults to the
enrolled customer), :func:`login` signs a client in and returns its CSRF token,
:meth:`WebSandbox.signed_in` does both on a fresh client (one cookie jar per user), and
:meth:`WebSandbox.new_client` opens more clients (closed with the sandbox).

Example::

    async with web_sandbox(database_url) as web:
        client, csrf = await web.signed_in("admin")
        answer = await client.post(f"/api/{web.assistant}/sync-knowledge",
                                   json={"commit": False}, headers={"X-CSRF-Token": csrf})
"""

from __future__ import annotations

import html
import re
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
from fastapi import FastAPI
from pydantic import SecretStr

from pmsgate.app import create_app
from pmsgate.clock import ManualClock
from pmsgate.container import open_container
from pmsgate.customers.service import register_customer
from pmsgate.gateway.call_log import CallLog
from pmsgate.gateway.context import GatewayServices
from pmsgate.onboarding.records import OnboardingRecords
from pmsgate.storage.customers import CustomerProfile
from pmsgate.storage.onboarding import NewStepResult
from pmsgate.web.context import WebServices
from pmsgate.web.users import session_id_hash
from tests.customers.support import (
    ClockSleep,
    EnrolledSandbox,
    enrolled_sandbox,
    profile_of,
    sandbox_http_factory,
    student_id_of,
)

WEB_URL = "http://pmsgate.test"
# The tests written against the English pages ask for English, as a browser would; a
# customer whose record has a language still reads its own (tests of Italian pages ask
# for it with ``it``).
ENGLISH = {"Accept-Language": "en"}
CSRF_HEADER = "X-CSRF-Token"
DEFAULT_PASSWORD = "correct horse battery staple"


class GatedSleep(ClockSleep):
    """A ClockSleep that a test can hold shut: every wait blocks until :meth:`open` is called.

    A knowledge sync waits on the notes throttle (~3 requests/second) within its first
    requests, so with the gate shut a background sync is reliably still running.
    """

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self._gate = anyio.Event()
        self._gate.set()

    def close(self) -> None:
        """Hold every later wait until :meth:`open`."""
        if self._gate.is_set():
            self._gate = anyio.Event()

    def open(self) -> None:
        """Let every held and later wait go on."""
        self._gate.set()

    async def __call__(self, seconds: float) -> None:
        await self._gate.wait()
        await super().__call__(seconds)


@dataclass
class WebSandbox:
    """The enrolled sandbox, the gateway and web services on it, the app and a client."""

    enrolled: EnrolledSandbox
    gateway: GatewayServices
    web: WebServices
    app: FastAPI
    client: httpx.AsyncClient
    sleep: GatedSleep
    _stack: AsyncExitStack = field(repr=False)

    @property
    def student_id(self) -> str:
        """The enrolled customer's student_id."""
        return self.enrolled.student_id

    @property
    def assistant(self) -> str:
        """The enrolled customer's ``{assistant}`` path segment (its workspace slug)."""
        return f"sandbox-{self.enrolled.hotel_id}"

    @property
    def hotel_id(self) -> str:
        """The enrolled customer's facility."""
        return self.enrolled.hotel_id

    async def new_client(self) -> httpx.AsyncClient:
        """Another client on the app with its own cookie jar (closed with the sandbox)."""
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app), base_url=WEB_URL, headers=ENGLISH
        )
        return await self._stack.enter_async_context(client)

    async def add_user(
        self,
        role: str = "customer",
        *,
        email: str | None = None,
        password: str = DEFAULT_PASSWORD,
        student_id: str | None = None,
    ) -> tuple[str, str]:
        """Create an account (a customer's is the enrolled customer's unless told); its login."""
        if role == "customer" and student_id is None:
            student_id = self.student_id
        address = email or f"{role}-{uuid.uuid4().hex[:8]}@example.com"
        await self.web.users.add(address, SecretStr(password), role=role, student_id=student_id)
        return address, password

    async def signed_in(
        self, role: str = "customer", *, student_id: str | None = None
    ) -> tuple[httpx.AsyncClient, str]:
        """A fresh client signed in as a new user of this role, and its CSRF token."""
        email, password = await self.add_user(role, student_id=student_id)
        client = await self.new_client()
        return client, await login(client, email, password)

    async def facility_id_and_call_log(self) -> tuple[int, CallLog]:
        """The enrolled facility's row id and the gateway's call log."""
        facility = await self.gateway.facilities.get(self.hotel_id)
        return facility.id, self.gateway.gateway.call_log

    async def second_customer(self, index: int = 1) -> str:
        """Register another of the sandbox's facilities as a customer; its student_id."""
        facility = self.enrolled.sandbox.kross.facility_summaries()[index]
        await register_customer(self.web.customers, profile_of(facility))
        return student_id_of(facility)

    async def bare_customer(self, student_id: str) -> None:
        """A customer with no integrations, which the enrolled one's users must not reach."""
        await register_customer(
            self.web.customers,
            CustomerProfile(
                student_id=student_id,
                email="other@example.com",
                name="Another operator",
                kind="partner",
            ),
        )


async def login(client: httpx.AsyncClient, email: str, password: str) -> str:
    """Sign ``client`` in through ``POST /api/auth/login``; the session's CSRF token."""
    answer = await client.post("/api/auth/login", json={"email": email, "password": password})
    assert answer.status_code == 200, answer.text
    assert client.cookies.get("pmsgate_session"), "the session cookie was not set"
    token: str = answer.json()["csrfToken"]
    return token


def csrf(token: str) -> dict[str, str]:
    """The header a cookie-authenticated write carries."""
    return {CSRF_HEADER: token}


def form_token_in(page: str, form_testid: str) -> str:
    """The one-time form token of the form ``data-testid=form_testid`` on ``page``."""
    start = page.index(f'data-testid="{form_testid}"')
    found = re.search(r'name="form_token" value="([^"]+)"', page[start:])
    assert found is not None, f"no form token in {form_testid}"
    return html.unescape(found.group(1))


def issued_form_token(web: WebSandbox, client: httpx.AsyncClient, purpose: str) -> str:
    """A one-time form token for ``purpose`` issued to ``client``'s session (as a page would)."""
    cookie = client.cookies.get("pmsgate_session")
    assert cookie, "the client is not signed in"
    raw_session_id = cookie.split(".", 1)[0]  # itsdangerous: value.timestamp.signature
    return web.web.form_tokens.issue(purpose, session_id_hash(raw_session_id))


def sync_form(web: WebSandbox, client: httpx.AsyncClient, **fields: str) -> dict[str, str]:
    """The knowledge-sync form's fields with its one-time token (``commit``, ``csrf_token``)."""
    return {**fields, "form_token": issued_form_token(web, client, "start_sync")}


async def post_sync(
    web: WebSandbox,
    client: httpx.AsyncClient,
    token: str,
    *,
    commit: bool = False,
    htmx: bool = False,
    student_id: str | None = None,
    **request: Any,
) -> httpx.Response:
    """Send a customer page's knowledge-sync form as the page does, with its one-time token.

    Without htmx the CSRF token is the form's field (a plain HTML form); htmx sends it as
    the ``X-CSRF-Token`` header.
    """
    fields = {"commit": "true" if commit else "false"}
    if not htmx:
        fields["csrf_token"] = token
    return await client.post(
        f"/console/customers/{student_id or web.student_id}/sync",
        data=sync_form(web, client, **fields),
        headers={"HX-Request": "true", **csrf(token)} if htmx else {},
        **request,
    )


async def post_reconnect(
    web: WebSandbox, client: httpx.AsyncClient, token: str, password: str, **request: Any
) -> httpx.Response:
    """Send the customer page's reconnect form (the facility's user name, ``password``)."""
    return await client.post(
        f"/console/customers/{web.student_id}/reconnect",
        data={
            "csrf_token": token,
            "username": web.enrolled.facility["username"],
            "password": password,
        },
        **request,
    )


async def sync_knowledge(
    client: httpx.AsyncClient, assistant: str, token: str | None = None, *, commit: bool = False
) -> httpx.Response:
    """``POST /api/{assistant}/sync-knowledge`` (with the CSRF header when ``token`` is given)."""
    return await client.post(
        f"/api/{assistant}/sync-knowledge",
        json={"commit": commit},
        headers=csrf(token) if token is not None else {},
    )


async def form_token_of(client: httpx.AsyncClient, path: str, form_testid: str) -> str:
    """A fresh one-time token of a form on the page ``path`` (as the browser shows it)."""
    page = await client.get(path)
    assert page.status_code == 200, page.text
    return form_token_in(page.text, form_testid)


@asynccontextmanager
async def web_sandbox(
    database_url: str,
    *,
    settings_overrides: Mapping[str, Any] | None = None,
    **enrolment: Any,
) -> AsyncIterator[WebSandbox]:
    """The web app over an enrolled sandbox (``enrolment`` goes to ``enrolled_sandbox``)."""
    async with (
        enrolled_sandbox(
            database_url, settings_overrides=settings_overrides, **enrolment
        ) as enrolled,
        AsyncExitStack() as stack,
    ):
        sleep = GatedSleep(enrolled.clock)
        container = await stack.enter_async_context(
            open_container(
                enrolled.settings,
                http_factory=sandbox_http_factory(enrolled.app),
                clock=enrolled.clock,
                sleep=sleep,
            )
        )
        app = create_app(enrolled.settings, container=container)
        transport = httpx.ASGITransport(app=app)
        client = await stack.enter_async_context(
            httpx.AsyncClient(transport=transport, base_url=WEB_URL, headers=ENGLISH)
        )
        sandbox = WebSandbox(
            enrolled, container.gateway, container.web, app, client, sleep, _stack=stack
        )
        try:
            yield sandbox
        finally:
            # A test that left the gate shut must not hang the background jobs' shutdown.
            sleep.open()


async def record_route(
    web: WebSandbox, route: str, *, live: bool, student_id: str | None = None
) -> None:
    """Record an onboarding run on ``route`` (and step 16 done when ``live``) for the
    enrolled customer, or ``student_id``."""
    student = student_id or web.student_id
    records = OnboardingRecords(web.web.customers.sessions, web.enrolled.clock)
    run = await records.start_run(student, dry_run=False)
    if live:
        await records.record(
            NewStepResult(
                student_id=student,
                step_id="onboarding-message",
                number=16,
                kind="auto",
                status="done",
                done=True,
                evidence={},
                run_id=run.id,
            )
        )
    await records.finish_run(run.id, "succeeded", route=route)
