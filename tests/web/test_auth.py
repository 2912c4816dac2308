"""Accounts and sessions of the web application: sign-in, cookies, CSRF, roles, throttling.

Endpoint tests go through httpx on the real app (``create_app`` with the real gateway
and web services on SQLite, and PostgreSQL when PMSGATE_TEST_DATABASE_URL is set),
with a customer enrolled on the in-process emulators. A few probe routes that use the
real dependencies stand in for "any cookie-authenticated write" and "any admin route".
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from http.cookies import SimpleCookie
from typing import Annotated, Any
from urllib.parse import quote

import anyio
import httpx
import pytest
import structlog
from argon2 import PasswordHasher
from fastapi import APIRouter, Form
from fastapi.staticfiles import StaticFiles
from pydantic import SecretStr
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.audit.actions import AuditAction
from pmsgate.clock import ManualClock
from pmsgate.config import Settings
from pmsgate.customers.registry import Customers
from pmsgate.errors import PmsgateError
from pmsgate.gateway.vault import generate_key_spec
from pmsgate.storage.audit import AuditFilter
from pmsgate.storage.customers import CustomerProfile
from pmsgate.storage.db import open_database, session_factory
from pmsgate.storage.users import UserRepository
from pmsgate.web.app import STATIC_DIR
from pmsgate.web.auth import (
    CSRF_FIELD,
    CSRF_HEADER,
    SESSION_COOKIE,
    Admin,
    AdminWrite,
    SignedIn,
    SignedInWrite,
    ensure_can_act_on,
    session_signer,
)
from pmsgate.web.users import (
    ARGON2_MEMORY_KIB,
    ARGON2_PARALLELISM,
    ARGON2_TIME_COST,
    KeyedLocks,
    UserService,
)
from tests.conftest import database_url as database_url  # both databases: see conftest.py
from tests.support.answers import assert_error

from ..gateway.facility_support import all_stored_text
from .support import DEFAULT_PASSWORD, WEB_URL, WebSandbox, login, web_sandbox

pytestmark = pytest.mark.anyio

MAX_FAILURES = 3  # one account from one address
ADDRESS_MAX_FAILURES = 8  # one address, whatever the accounts
ACCOUNT_MAX_FAILURES = 6  # one account, from every address
WINDOW_S = 600.0
WRONG_PASSWORD = "not the right password at all"
STUDENT = "stu-3001"

probe = APIRouter()


@probe.post("/probe/write")
async def probe_write(principal: SignedInWrite, note: Annotated[str, Form()] = "") -> Any:
    """A cookie-authenticated write that also reads its own form field."""
    return {"user": principal.email, "note": note}


@probe.post("/probe/json-write")
async def probe_json_write(principal: SignedInWrite, body: dict[str, Any]) -> Any:
    """A cookie-authenticated JSON write."""
    return {"user": principal.email, "body": body}


@probe.get("/probe/admin")
async def probe_admin(principal: Admin) -> Any:
    """An admin-only read."""
    return {"user": principal.email}


@probe.post("/probe/admin-write")
async def probe_admin_write(principal: AdminWrite) -> Any:
    """An admin-only write."""
    return {"user": principal.email}


@probe.get("/probe/customers/{student_id}")
async def probe_customer(student_id: str, principal: SignedIn) -> Any:
    """A read of one customer's data."""
    ensure_can_act_on(principal, student_id)
    return {"student_id": student_id}


@pytest.fixture
async def site(database_url: str) -> AsyncIterator[WebSandbox]:
    """The web app over an enrolled customer, with few allowed failures and the probes."""
    async with web_sandbox(
        database_url,
        settings_overrides={
            "login_max_failures": MAX_FAILURES,
            "login_address_max_failures": ADDRESS_MAX_FAILURES,
            "login_account_max_failures": ACCOUNT_MAX_FAILURES,
            "login_failure_window_s": WINDOW_S,
        },
        with_notion=False,
        sync=False,
    ) as web:
        web.app.include_router(probe)
        if not any(getattr(route, "name", None) == "static" for route in web.app.routes):
            # The sign-in page's base template links the console's static files.
            web.app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
        yield web


@pytest.fixture
async def sessions(database_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    """Sessions on a migrated database holding one customer (STUDENT)."""
    async with open_database(database_url) as engine:
        factory = session_factory(engine)
        await Customers(factory, ManualClock()).add(
            CustomerProfile(student_id=STUDENT, email="o@example.com", name="O", kind="partner")
        )
        yield factory


@pytest.fixture
def users(
    sessions: async_sessionmaker[AsyncSession], database_url: str, clock: ManualClock
) -> UserService:
    """The account service alone (no app, no emulators), in-memory throttling."""
    settings = Settings(
        database_url=database_url,
        login_max_failures=MAX_FAILURES,
        login_address_max_failures=ADDRESS_MAX_FAILURES,
        login_account_max_failures=ACCOUNT_MAX_FAILURES,
    )
    return UserService(sessions, clock=clock, settings=settings, redis=None)


async def signed_in_here(site: WebSandbox, role: str) -> tuple[str, str, str]:
    """A new user of ``role`` signed in on ``site.client``: its e-mail, password and CSRF token."""
    email, password = await site.add_user(role)
    return email, password, await login(site.client, email, password)


async def signed_in_with_its_cookie(site: WebSandbox, role: str) -> tuple[str, str]:
    """A new user of ``role`` signed in on ``site.client``: its CSRF token and session
    cookie."""
    _, _, token = await signed_in_here(site, role)
    return token, site.client.cookies[SESSION_COOKIE]


async def me_with(site: WebSandbox, cookie: str) -> httpx.Response:
    """``GET /api/auth/me`` on ``site.client`` with the session ``cookie``."""
    site.client.cookies.set(SESSION_COOKIE, cookie)
    return await site.client.get("/api/auth/me")


def error_code(answer: httpx.Response) -> str:
    """The code of an error answer."""
    code: str = answer.json()["error"]["code"]
    return code


def set_cookie(answer: httpx.Response) -> SimpleCookie:
    """The session cookie the answer sets, with its attributes."""
    headers = [h for h in answer.headers.get_list("set-cookie") if h.startswith(SESSION_COOKIE)]
    assert len(headers) == 1, answer.headers
    cookie: SimpleCookie = SimpleCookie()
    cookie.load(headers[0])
    return cookie


def raw_session_id(cookie_value: str) -> str:
    """The session id inside a signed cookie value (``id.timestamp.signature``)."""
    return cookie_value.split(".")[0]


async def sign_in_api(
    client: httpx.AsyncClient, email: str, password: str = DEFAULT_PASSWORD
) -> httpx.Response:
    return await client.post("/api/auth/login", json={"email": email, "password": password})


# --- sign-in -----------------------------------------------------------------------------------


async def test_a_request_without_a_session_cookie_is_refused_with_not_authenticated(
    site: WebSandbox,
) -> None:
    for answer in (
        await site.client.get("/api/auth/me"),
        await site.client.post("/probe/write", headers={CSRF_HEADER: "anything"}),
        await site.client.get("/probe/admin"),
    ):
        assert_error(answer, 401, "not_authenticated")


async def test_signing_in_answers_the_user_and_its_csrf_token_without_the_session_id(
    site: WebSandbox,
) -> None:
    email, _ = await site.add_user("customer")

    answer = await sign_in_api(site.client, email)

    assert answer.status_code == 200
    body = answer.json()
    assert body["user"] == {
        "id": body["user"]["id"],
        "email": email,
        "role": "customer",
        "studentId": site.student_id,
    }
    assert body["csrfToken"]
    raw = raw_session_id(site.client.cookies[SESSION_COOKIE])
    assert raw not in answer.text
    me = await site.client.get("/api/auth/me")
    assert me.status_code == 200
    assert me.json() == body
    assert answer.headers["cache-control"] == me.headers["cache-control"] == "no-store"
    assert raw not in me.text


async def test_a_wrong_password_is_refused_with_invalid_credentials_and_no_cookie(
    site: WebSandbox,
) -> None:
    email, _ = await site.add_user("admin")

    answer = await sign_in_api(site.client, email, WRONG_PASSWORD)

    assert_error(answer, 401, "invalid_credentials")
    assert "set-cookie" not in answer.headers


async def test_an_unknown_email_gets_exactly_the_answer_of_a_wrong_password(
    site: WebSandbox,
) -> None:
    email, _ = await site.add_user("admin")

    wrong_password = await sign_in_api(site.client, email, WRONG_PASSWORD)
    unknown_email = await sign_in_api(site.client, "nobody@example.com", WRONG_PASSWORD)

    assert unknown_email.status_code == wrong_password.status_code == 401
    assert unknown_email.json() == wrong_password.json()
    assert error_code(unknown_email) == "invalid_credentials"


async def test_the_email_is_matched_whatever_its_case_and_surrounding_spaces(
    site: WebSandbox,
) -> None:
    email, _ = await site.add_user("admin", email="Ops.Admin@Example.com")

    answer = await sign_in_api(site.client, f"  {email.upper()} ")

    assert answer.status_code == 200
    assert answer.json()["user"]["email"] == "ops.admin@example.com"


# --- throttling --------------------------------------------------------------------------------


async def test_failed_sign_ins_pause_that_account_from_that_address_until_the_window_passes(
    site: WebSandbox,
) -> None:
    email, password = await site.add_user("admin")
    for _ in range(MAX_FAILURES):
        assert error_code(await sign_in_api(site.client, email, WRONG_PASSWORD)) == (
            "invalid_credentials"
        )

    # Even the right password is refused now, from this address.
    refused = await sign_in_api(site.client, email, password)
    assert_error(refused, 429, "too_many_login_attempts")
    retry_after = int(refused.headers["Retry-After"])
    assert 0 < retry_after <= WINDOW_S + 1  # the window, rounded up to whole seconds
    assert "set-cookie" not in refused.headers

    # The same account from another address is not paused: the pair's ceiling is small.
    async with client_at(site, "203.0.113.9") as other:
        assert (await sign_in_api(other, email, password)).status_code == 200

    site.enrolled.clock.advance(retry_after)
    assert (await sign_in_api(site.client, email, password)).status_code == 200


async def test_a_customers_typos_from_the_teams_address_do_not_stop_an_admin(
    site: WebSandbox,
) -> None:
    customer, _ = await site.add_user("customer")
    admin, admin_password = await site.add_user("admin")
    for _ in range(MAX_FAILURES + 2):
        await sign_in_api(site.client, customer, WRONG_PASSWORD)
    assert error_code(await sign_in_api(site.client, customer, WRONG_PASSWORD)) == (
        "too_many_login_attempts"
    )

    assert (await sign_in_api(site.client, admin, admin_password)).status_code == 200


async def test_failed_sign_ins_from_one_client_address_are_throttled_at_the_address_ceiling(
    site: WebSandbox,
) -> None:
    email, password = await site.add_user("admin")
    for attempt in range(ADDRESS_MAX_FAILURES):
        await sign_in_api(site.client, f"guess-{attempt}@example.com", WRONG_PASSWORD)

    refused = await sign_in_api(site.client, email, password)
    assert_error(refused, 429, "too_many_login_attempts")

    # Another address is not concerned: failures, not users, are what is counted.
    async with client_at(site, "198.51.100.7") as other:
        assert (await sign_in_api(other, email, password)).status_code == 200


async def test_an_account_guessed_from_many_addresses_is_paused_at_its_own_ceiling(
    site: WebSandbox,
) -> None:
    email, password = await site.add_user("admin")
    for n in range(ACCOUNT_MAX_FAILURES):
        async with client_at(site, f"203.0.113.{n + 1}") as guesser:
            await sign_in_api(guesser, email, WRONG_PASSWORD)

    async with client_at(site, "198.51.100.7") as fresh:
        refused = await sign_in_api(fresh, email, password)
    assert error_code(refused) == "too_many_login_attempts"


async def test_a_lockout_and_its_scope_are_in_the_audit_trail(site: WebSandbox) -> None:
    email, _ = await site.add_user("customer")
    for _ in range(MAX_FAILURES + 1):
        await sign_in_api(site.client, email, WRONG_PASSWORD)

    events = [e async for e in site.web.audit.export(AuditFilter())]
    locked = [e for e in events if e.action == AuditAction.SIGNIN_LOCKED.value]
    assert len(locked) == 1
    assert locked[0].subject == f"user:{email}" and locked[0].details["scopes"] == ["pair"]
    assert locked[0].client_address == "127.0.0.1"
    refused = [e for e in events if e.details.get("reason") == "too_many_login_attempts"]
    assert refused and refused[-1].details["scope"] == "pair"


async def test_unlocking_an_account_or_an_address_lifts_its_pause(
    users: UserService, clock: ManualClock
) -> None:
    await users.add("ops@example.com", SecretStr(DEFAULT_PASSWORD), role="admin")

    async def fail(client: str, email: str = "ops@example.com") -> str:
        with pytest.raises(PmsgateError) as failed:
            await users.sign_in(email, SecretStr(WRONG_PASSWORD), client=client)
        return failed.value.code

    for _ in range(MAX_FAILURES):
        await fail("192.0.2.1")
    assert await fail("192.0.2.1") == "too_many_login_attempts"
    assert await users.unlock(email="OPS@example.com") > 0
    principal, _ = await users.sign_in(
        "ops@example.com", SecretStr(DEFAULT_PASSWORD), client="192.0.2.1"
    )
    assert principal.email == "ops@example.com"

    for n in range(ADDRESS_MAX_FAILURES):
        await fail("192.0.2.9", f"guess-{n}@example.com")
    assert await fail("192.0.2.9") == "too_many_login_attempts"
    assert await users.unlock(client="192.0.2.9") > 0
    principal, _ = await users.sign_in(
        "ops@example.com", SecretStr(DEFAULT_PASSWORD), client="192.0.2.9"
    )
    assert principal.email == "ops@example.com"
    assert await users.unlock(email="nobody@example.com") == 0


async def test_a_successful_sign_in_neither_counts_nor_resets_the_failures(
    site: WebSandbox,
) -> None:
    email, password = await site.add_user("admin")
    for _ in range(MAX_FAILURES - 1):
        await sign_in_api(site.client, email, WRONG_PASSWORD)
    for _ in range(3):
        assert (await sign_in_api(site.client, email, password)).status_code == 200

    await sign_in_api(site.client, email, WRONG_PASSWORD)

    assert (await sign_in_api(site.client, email, password)).status_code == 429


async def test_failures_older_than_the_window_no_longer_count(site: WebSandbox) -> None:
    email, password = await site.add_user("admin")
    for _ in range(MAX_FAILURES - 1):
        await sign_in_api(site.client, email, WRONG_PASSWORD)
    site.enrolled.clock.advance(WINDOW_S + 1)

    await sign_in_api(site.client, email, WRONG_PASSWORD)

    assert (await sign_in_api(site.client, email, password)).status_code == 200


PARALLEL_GUESSES = 20


def client_at(site: WebSandbox, address: str) -> httpx.AsyncClient:
    """A client on the app whose requests come from ``address``."""
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=site.app, client=(address, 4000)), base_url=WEB_URL
    )


def assert_paused_after(codes: list[str], ceiling: int) -> None:
    """Every one of the parallel guesses was refused: at most ``ceiling`` as wrong
    credentials, every other one as paused."""
    assert len(codes) == PARALLEL_GUESSES
    wrong = codes.count("invalid_credentials")
    assert wrong <= ceiling
    assert codes.count("too_many_login_attempts") == PARALLEL_GUESSES - wrong


async def parallel_codes(attempts: list[tuple[httpx.AsyncClient, str]]) -> list[str]:
    """Send every (client, e-mail) wrong sign-in at once; the error codes answered."""
    codes: list[str] = []

    async def attempt(client: httpx.AsyncClient, email: str) -> None:
        codes.append(error_code(await sign_in_api(client, email, WRONG_PASSWORD)))

    async with anyio.create_task_group() as group:
        for client, email in attempts:
            group.start_soon(attempt, client, email)
    return codes


async def test_parallel_wrong_passwords_for_one_account_are_throttled_after_the_limit(
    site: WebSandbox,
) -> None:
    email, password = await site.add_user("admin")
    # Each guess from its own address: only the account's count can stop them.
    clients = [client_at(site, f"203.0.113.{n + 1}") for n in range(PARALLEL_GUESSES)]
    try:
        codes = await parallel_codes([(client, email) for client in clients])
    finally:
        for client in clients:
            await client.aclose()

    assert_paused_after(codes, ACCOUNT_MAX_FAILURES)
    assert (await sign_in_api(site.client, email, password)).status_code == 429


async def test_parallel_guesses_from_one_client_address_are_throttled_after_the_limit(
    site: WebSandbox,
) -> None:
    email, password = await site.add_user("admin")
    guesses = [(site.client, f"guess-{n}@example.com") for n in range(PARALLEL_GUESSES)]

    codes = await parallel_codes(guesses)

    assert_paused_after(codes, ADDRESS_MAX_FAILURES)
    assert (await sign_in_api(site.client, email, password)).status_code == 429


async def test_the_sign_in_lock_table_forgets_a_key_once_nobody_holds_or_waits_for_it() -> None:
    locks = KeyedLocks()
    order: list[str] = []
    first_in = anyio.Event()
    release = anyio.Event()

    async def holder() -> None:
        async with locks.hold("k"):
            order.append("first")
            first_in.set()
            await release.wait()

    async def waiter() -> None:
        async with locks.hold("k"):
            order.append("second")

    async with anyio.create_task_group() as group:
        group.start_soon(holder)
        await first_in.wait()
        group.start_soon(waiter)
        await anyio.wait_all_tasks_blocked()
        assert (order, len(locks)) == (["first"], 1)  # the waiter is still shut out
        release.set()
    assert (order, len(locks)) == (["first", "second"], 0)

    # A waiter cancelled while it waits leaves nothing behind either.
    release = anyio.Event()
    first_in = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(holder)
        await first_in.wait()
        with anyio.move_on_after(0) as scope:
            async with locks.hold("k"):
                pytest.fail("the lock was held by the other task")
        assert scope.cancelled_caught and len(locks) == 1
        release.set()
    assert len(locks) == 0


@pytest.mark.parametrize(
    "email",
    [r"ops\u0000@example.com", r"\u0000", r"ops@exa\u001fmple.com", r"ops@example.com\u0085"],
)
async def test_an_email_with_a_control_character_is_answered_like_a_wrong_password(
    site: WebSandbox, email: str
) -> None:
    address, _ = await site.add_user("admin")
    wrong_password = await sign_in_api(site.client, address, WRONG_PASSWORD)

    # Raw JSON: the escapes reach the server as they are (a lone surrogate included).
    answer = await site.client.post(
        "/api/auth/login",
        content=f'{{"email": "{email}", "password": "{WRONG_PASSWORD}"}}'.encode(),
        headers={"Content-Type": "application/json"},
    )
    typed = email.encode().decode("unicode_escape").encode()
    form = await site.client.post(
        "/login",
        content=f"email={quote(typed)}&password=x".encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )

    assert answer.status_code == 401, answer.text
    assert answer.json() == wrong_password.json()
    assert form.status_code == 401, form.text
    assert 'data-code="invalid_credentials"' in form.text


@pytest.mark.parametrize("email", ["ops\x00@example.com", "ops\ud800@example.com"])
async def test_the_service_answers_a_control_character_email_with_invalid_credentials(
    users: UserService, email: str
) -> None:
    await users.add("ops@example.com", SecretStr(DEFAULT_PASSWORD), role="admin")

    with pytest.raises(PmsgateError) as refused:
        await users.sign_in(email, SecretStr(DEFAULT_PASSWORD), client="192.0.2.1")

    assert (refused.value.code, refused.value.status) == ("invalid_credentials", 401)


async def test_a_password_with_a_lone_surrogate_is_a_wrong_password_not_an_error(
    site: WebSandbox,
) -> None:
    email, _ = await site.add_user("admin")

    answer = await site.client.post(
        "/api/auth/login",
        content=f'{{"email": "{email}", "password": "pass\\ud800word-long-enough"}}'.encode(),
        headers={"Content-Type": "application/json"},
    )

    assert_error(answer, 401, "invalid_credentials")


async def test_replicas_sharing_redis_share_the_failure_count(
    database_url: str, redis_url: str, redis_namespace: str, clock: ManualClock
) -> None:
    settings = Settings(
        database_url=database_url,
        redis_url=redis_url,
        redis_namespace=redis_namespace,
        login_max_failures=MAX_FAILURES,
        login_failure_window_s=WINDOW_S,
    )
    async with open_database(database_url) as engine:
        clients = [Redis.from_url(redis_url) for _ in range(2)]
        try:
            first, second = (
                UserService(session_factory(engine), clock=clock, settings=settings, redis=r)
                for r in clients
            )
            await first.add("ops@example.com", SecretStr(DEFAULT_PASSWORD), role="admin")
            for replica in (first, second, first):
                with pytest.raises(PmsgateError) as failed:
                    await replica.sign_in(
                        "ops@example.com", SecretStr(WRONG_PASSWORD), client="192.0.2.1"
                    )
                assert failed.value.code == "invalid_credentials"

            for replica in (second, first):
                with pytest.raises(PmsgateError) as refused:
                    await replica.sign_in(
                        "ops@example.com", SecretStr(DEFAULT_PASSWORD), client="192.0.2.1"
                    )
                assert refused.value.code == "too_many_login_attempts"
                assert 0 < int(refused.value.headers["Retry-After"]) <= WINDOW_S + 1

            # One replica's unlock lifts the pause for every replica.
            assert await first.unlock(email="ops@example.com") > 0
            principal, _ = await second.sign_in(
                "ops@example.com", SecretStr(DEFAULT_PASSWORD), client="192.0.2.1"
            )
            assert principal.email == "ops@example.com"
            for replica in (first, second, first):
                with pytest.raises(PmsgateError):
                    await replica.sign_in(
                        "ops@example.com", SecretStr(WRONG_PASSWORD), client="192.0.2.1"
                    )

            clock.advance(WINDOW_S + 1)
            principal, _ = await second.sign_in(
                "ops@example.com", SecretStr(DEFAULT_PASSWORD), client="192.0.2.1"
            )
            assert principal.email == "ops@example.com"
            keys = [key async for key in clients[0].scan_iter(match=f"{redis_namespace}:*")]
            # Key names are hashes: no e-mail or client address in Redis.
            assert keys and not any(b"example.com" in key or b"192.0.2" in key for key in keys)
        finally:
            for client in clients:
                await client.aclose()


# --- the cookie --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cookie_secure", "secure_over"),
    [
        ("auto", {"http": False, "https": True}),
        ("always", {"http": True}),
        ("never", {"https": False}),
    ],
)
async def test_the_session_cookie_is_http_only_same_site_lax_and_secure_behind_https(
    database_url: str, cookie_secure: str, secure_over: dict[str, bool]
) -> None:
    async with web_sandbox(
        database_url,
        settings_overrides={"cookie_secure": cookie_secure},
        with_notion=False,
        sync=False,
    ) as site:
        email, password = await site.add_user("admin")
        for scheme, secure in secure_over.items():
            client = httpx.AsyncClient(
                transport=httpx.ASGITransport(app=site.app), base_url=f"{scheme}://pmsgate.test"
            )
            async with client:
                answer = await sign_in_api(client, email, password)

            assert answer.status_code == 200
            morsel = set_cookie(answer)[SESSION_COOKIE]
            assert morsel["httponly"] is True
            assert morsel["samesite"].lower() == "lax"
            assert morsel["path"] == "/"
            assert int(morsel["max-age"]) == int(site.web.settings.session_ttl_s)
            assert bool(morsel["secure"]) is secure, scheme


async def test_a_tampered_or_foreign_cookie_is_refused(site: WebSandbox) -> None:
    await signed_in_here(site, "admin")
    genuine = site.client.cookies[SESSION_COOKIE]
    raw, stamp, signature = genuine.split(".")
    forged_signature = ("A" if signature[0] != "A" else "B") + signature[1:]
    # Another id under this deployment's key, and this id under another deployment's key.
    unknown_id = session_signer(site.web.settings, site.web.clock).sign("x" * len(raw)).decode()
    elsewhere = Settings(secret_keys=SecretStr(generate_key_spec("t2")))
    foreign = session_signer(elsewhere, site.web.clock).sign(raw).decode()

    for value in (
        f"{raw}.{stamp}.{forged_signature}",
        f"{'x' * len(raw)}.{stamp}.{signature}",
        unknown_id,
        raw,
        foreign,
        "",
    ):
        site.client.cookies.set(SESSION_COOKIE, value)
        answer = await site.client.get("/api/auth/me")
        assert_error(answer, 401, "not_authenticated")
    site.client.cookies.set(SESSION_COOKIE, genuine)
    assert (await site.client.get("/api/auth/me")).status_code == 200


async def test_a_session_ends_after_its_lifetime(site: WebSandbox) -> None:
    await signed_in_here(site, "admin")

    site.enrolled.clock.advance(site.web.settings.session_ttl_s - 60)
    assert (await site.client.get("/api/auth/me")).status_code == 200
    site.enrolled.clock.advance(61)

    answer = await site.client.get("/api/auth/me")
    assert_error(answer, 401, "not_authenticated")


# --- sign-out and password changes -------------------------------------------------------------


async def test_signing_out_ends_the_session_so_the_old_cookie_is_refused(
    site: WebSandbox,
) -> None:
    token, old_cookie = await signed_in_with_its_cookie(site, "customer")

    answer = await site.client.post("/api/auth/logout", headers={CSRF_HEADER: token})

    assert answer.status_code == 204
    assert set_cookie(answer)[SESSION_COOKIE].value == ""
    assert_error(await me_with(site, old_cookie), 401, "not_authenticated")


async def test_signing_out_needs_the_csrf_token(site: WebSandbox) -> None:
    await signed_in_here(site, "customer")

    answer = await site.client.post("/api/auth/logout")

    assert_error(answer, 403, "csrf_failed")
    assert (await site.client.get("/api/auth/me")).status_code == 200


async def test_the_sign_out_form_ends_the_session_and_returns_to_the_sign_in_page(
    site: WebSandbox,
) -> None:
    token, old_cookie = await signed_in_with_its_cookie(site, "admin")

    answer = await site.client.post("/logout", data={CSRF_FIELD: token})

    assert answer.status_code == 303
    assert answer.headers["location"] == "/login"
    assert (await me_with(site, old_cookie)).status_code == 401


async def test_a_password_change_or_removal_ends_the_users_sessions(site: WebSandbox) -> None:
    email, password, _ = await signed_in_here(site, "admin")
    await site.web.users.set_password(email, SecretStr("a brand new passphrase"))

    assert (await site.client.get("/api/auth/me")).status_code == 401
    assert error_code(await sign_in_api(site.client, email, password)) == "invalid_credentials"
    await login(site.client, email, "a brand new passphrase")
    await site.web.users.remove(email)

    assert (await site.client.get("/api/auth/me")).status_code == 401
    assert error_code(await sign_in_api(site.client, email, password)) == "invalid_credentials"


# --- CSRF --------------------------------------------------------------------------------------


async def test_a_cookie_authenticated_write_needs_the_sessions_csrf_token(
    site: WebSandbox,
) -> None:
    email, _, token = await signed_in_here(site, "customer")
    _, other_token = await site.signed_in("customer")
    assert other_token != token

    missing = await site.client.post("/probe/write", data={"note": "hello"})
    wrong = await site.client.post("/probe/write", headers={CSRF_HEADER: "x" * len(token)})
    others = await site.client.post("/probe/write", data={"note": "hi", CSRF_FIELD: other_token})
    empty = await site.client.post("/probe/write", headers={CSRF_HEADER: ""})
    for answer in (missing, wrong, others, empty):
        assert_error(answer, 403, "csrf_failed")

    header = await site.client.post("/probe/write", headers={CSRF_HEADER: token})
    assert header.status_code == 200
    assert header.json()["user"] == email
    # The form field works too, and the route still reads the rest of the form.
    form = await site.client.post("/probe/write", data={"note": "hello", CSRF_FIELD: token})
    assert form.status_code == 200
    assert form.json() == {"user": email, "note": "hello"}
    multipart = await site.client.post(
        "/probe/write", data={"note": "multi", CSRF_FIELD: token}, files={"f": ("a.txt", b"x")}
    )
    assert multipart.json() == {"user": email, "note": "multi"}
    as_json = await site.client.post(
        "/probe/json-write", json={"commit": False}, headers={CSRF_HEADER: token}
    )
    assert as_json.json() == {"user": email, "body": {"commit": False}}


# --- roles -------------------------------------------------------------------------------------


async def test_a_customer_is_forbidden_on_admin_routes_and_an_admin_is_let_in(
    site: WebSandbox,
) -> None:
    customer, customer_token = await site.signed_in("customer")
    admin, admin_token = await site.signed_in("admin")

    for answer in (
        await customer.get("/probe/admin"),
        await customer.post("/probe/admin-write", headers={CSRF_HEADER: customer_token}),
    ):
        assert_error(answer, 403, "forbidden")

    assert (await admin.get("/probe/admin")).status_code == 200
    assert (
        await admin.post("/probe/admin-write", headers={CSRF_HEADER: admin_token})
    ).status_code == 200
    refused = await admin.post("/probe/admin-write")
    assert_error(refused, 403, "csrf_failed")


async def test_a_customer_acts_only_on_its_own_customer_and_an_admin_on_any(
    site: WebSandbox,
) -> None:
    customer, _ = await site.signed_in("customer")
    admin, _ = await site.signed_in("admin")

    assert (await customer.get(f"/probe/customers/{site.student_id}")).status_code == 200
    other = await customer.get("/probe/customers/stu-someone-else")
    assert_error(other, 403, "forbidden")
    for student_id in (site.student_id, "stu-someone-else"):
        assert (await admin.get(f"/probe/customers/{student_id}")).status_code == 200


# --- the HTML sign-in page ---------------------------------------------------------------------


async def test_the_sign_in_page_is_a_plain_form_with_test_ids(site: WebSandbox) -> None:
    page = await site.client.get("/login")

    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    html = page.text
    assert re.search(r'<form method="post" action="/login"', html)
    for test_id in ("login-email", "login-password", "login-submit"):
        assert f'data-testid="{test_id}"' in html
    assert page.headers["x-frame-options"] == "DENY"


async def test_the_sign_in_form_redirects_to_the_console_or_a_local_next_page(
    site: WebSandbox,
) -> None:
    email, password = await site.add_user("admin")

    plain = await site.client.post("/login", data={"email": email, "password": password})
    assert plain.status_code == 303
    assert plain.headers["location"] == "/console"
    assert set_cookie(plain)[SESSION_COOKIE]["httponly"] is True
    assert (await site.client.get("/api/auth/me")).status_code == 200

    for next_url, expected in (
        ("/console/customers/stu-1?tab=pms", "/console/customers/stu-1?tab=pms"),
        ("https://evil.example/steal", "/console"),
        ("//evil.example/steal", "/console"),
        ("/\\evil.example", "/console"),
        ("javascript:alert(1)", "/console"),
    ):
        answer = await site.client.post(
            "/login", data={"email": email, "password": password, "next": next_url}
        )
        assert answer.status_code == 303
        assert answer.headers["location"] == expected, next_url


async def test_a_signed_in_user_opening_the_sign_in_page_goes_straight_on(
    site: WebSandbox,
) -> None:
    await signed_in_here(site, "admin")

    answer = await site.client.get("/login", params={"next": "/console/customers/x"})

    assert answer.status_code == 303
    assert answer.headers["location"] == "/console/customers/x"


async def test_a_failed_form_sign_in_shows_the_form_again_with_the_error(
    site: WebSandbox,
) -> None:
    email, password = await site.add_user("admin")

    failed = await site.client.post(
        "/login", data={"email": email, "password": WRONG_PASSWORD, "next": "/console/x"}
    )

    assert failed.status_code == 401
    assert 'data-code="invalid_credentials"' in failed.text
    assert 'name="next" value="/console/x"' in failed.text
    assert f'value="{email}"' in failed.text
    assert WRONG_PASSWORD not in failed.text
    assert "set-cookie" not in failed.headers
    for _ in range(MAX_FAILURES - 1):
        await site.client.post("/login", data={"email": email, "password": WRONG_PASSWORD})

    throttled = await site.client.post("/login", data={"email": email, "password": password})
    assert throttled.status_code == 429
    assert 'data-code="too_many_login_attempts"' in throttled.text
    assert int(throttled.headers["Retry-After"]) > 0


async def test_the_sign_out_form_without_a_session_just_returns_to_the_sign_in_page(
    site: WebSandbox,
) -> None:
    answer = await site.client.post("/logout")

    assert answer.status_code == 303
    assert answer.headers["location"] == "/login"


# --- secrets -----------------------------------------------------------------------------------


async def test_passwords_and_session_ids_never_reach_the_database_or_the_logs(
    site: WebSandbox,
) -> None:
    password = "an unguessable passphrase 7"
    with structlog.testing.capture_logs() as logs:
        email, _ = await site.add_user("customer", password=password)
        await sign_in_api(site.client, email, WRONG_PASSWORD)
        # A password typed into the e-mail field must not be logged either.
        await sign_in_api(site.client, password, password)
        token = await login(site.client, email, password)
        cookie = site.client.cookies[SESSION_COOKIE]
        await site.client.get("/api/auth/me")
        await site.client.post("/probe/write", headers={CSRF_HEADER: token})
        await site.web.users.set_password(email, SecretStr(password + " changed"))

    secrets = [password, WRONG_PASSWORD, raw_session_id(cookie), cookie, token]
    stored = await all_stored_text(site.enrolled.settings.effective_database_url)
    logged = repr(logs)
    assert logs, "the sign-ins were logged"
    for secret in secrets[:4]:
        assert secret not in stored
    for secret in secrets:
        assert secret not in logged
    assert "$argon2id$" in stored
    principal = await site.web.users.principal(raw_session_id(cookie))
    assert principal is None  # the password change ended it
    views = await site.web.users.list()
    assert all("argon2" not in repr(view) for view in views)


async def test_a_principal_repr_does_not_show_its_csrf_token(users: UserService) -> None:
    await users.add("ops@example.com", SecretStr(DEFAULT_PASSWORD), role="admin")
    principal, raw = await users.sign_in(
        "ops@example.com", SecretStr(DEFAULT_PASSWORD), client="test"
    )

    assert principal.csrf_token not in repr(principal)
    assert raw not in repr(principal)


# --- the account rules -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("email", "password", "role", "student_id", "code"),
    [
        ("a@example.com", "short", "admin", None, "password_too_short"),
        ("a@example.com", "x" * 1025, "admin", None, "password_too_long"),
        ("not-an-address", DEFAULT_PASSWORD, "admin", None, "invalid_email"),
        ("a\x00b@example.com", DEFAULT_PASSWORD, "admin", None, "invalid_email"),
        ("a@example.com", DEFAULT_PASSWORD, "customer", "stu\x00-1", "invalid_student_id"),
        ("a@example.com", DEFAULT_PASSWORD, "owner", None, "invalid_role"),
        ("a@example.com", DEFAULT_PASSWORD, "customer", None, "student_id_required"),
        ("a@example.com", DEFAULT_PASSWORD, "admin", "stu-1", "student_id_not_allowed"),
        ("a@example.com", DEFAULT_PASSWORD, "customer", "stu-missing", "customer_not_found"),
    ],
)
async def test_an_account_breaking_a_rule_is_refused_with_its_code(
    users: UserService,
    email: str,
    password: str,
    role: str,
    student_id: str | None,
    code: str,
) -> None:
    with pytest.raises(PmsgateError) as refused:
        await users.add(email, SecretStr(password), role=role, student_id=student_id)

    assert refused.value.code == code
    assert await users.list() == []


async def test_a_second_account_with_the_same_email_in_another_case_is_refused(
    users: UserService,
) -> None:
    await users.add("ops@example.com", SecretStr(DEFAULT_PASSWORD), role="admin")

    with pytest.raises(PmsgateError) as refused:
        await users.add(" OPS@example.com", SecretStr(DEFAULT_PASSWORD), role="admin")

    assert refused.value.code == "user_exists"


async def test_a_hash_made_with_older_argon2_parameters_is_upgraded_at_sign_in(
    users: UserService, sessions: async_sessionmaker[AsyncSession], clock: ManualClock
) -> None:
    weak = PasswordHasher(time_cost=1, memory_cost=8192, parallelism=1).hash(DEFAULT_PASSWORD)
    async with sessions.begin() as session:
        await UserRepository(session, clock).add(
            "old@example.com", password_hash=weak, role="admin", student_id=None
        )

    await users.sign_in("old@example.com", SecretStr(DEFAULT_PASSWORD), client="t")

    async with sessions() as session:
        stored = await UserRepository(session, clock).by_email("old@example.com")
    assert stored is not None and stored.password_hash != weak
    current = PasswordHasher(
        time_cost=ARGON2_TIME_COST, memory_cost=ARGON2_MEMORY_KIB, parallelism=ARGON2_PARALLELISM
    )
    assert not current.check_needs_rehash(stored.password_hash)
    assert stored.last_login_at == clock.now()
    # The new hash verifies the same password.
    await users.sign_in("old@example.com", SecretStr(DEFAULT_PASSWORD), client="t")
