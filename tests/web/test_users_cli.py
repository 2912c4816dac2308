"""`pmsgate users …` through the real command line, on SQLite (and PostgreSQL in CI)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import SecretStr
from typer.testing import Result

from pmsgate.clock import ManualClock
from pmsgate.config import get_settings
from pmsgate.customers.registry import Customers
from pmsgate.errors import PmsgateError
from pmsgate.storage.customers import CustomerProfile
from pmsgate.storage.db import open_database, session_factory
from pmsgate.web.users import UserService
from tests.cli_support import assert_failed_with, pmsgate
from tests.support.cli import database_cli

from ..gateway.facility_support import all_stored_text

pytestmark = pytest.mark.anyio

STUDENT = "stu-4001"
PASSWORD = "a long enough passphrase"


@pytest.fixture
def cli_env(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The CLI's configuration in the environment; the settings cache and logging restored."""
    with database_cli(monkeypatch, database_url, "u1") as url:
        yield url


@pytest.fixture
async def customer(cli_env: str) -> str:
    """A registered customer's student_id."""
    async with open_database(cli_env) as engine:
        await Customers(session_factory(engine), ManualClock()).add(
            CustomerProfile(student_id=STUDENT, email="o@example.com", name="O", kind="partner")
        )
    return STUDENT


async def add_user(
    email: str = "ops@example.com",
    role: str = "admin",
    *extra: str,
    input: str = PASSWORD + "\n",
) -> Result:
    """`pmsgate users add --email <email> --role <role> <extra> --password-stdin`."""
    return await pmsgate(
        "users", "add", "--email", email, "--role", role, *extra, "--password-stdin", input=input
    )


async def sign_in(database_url: str, email: str, password: str) -> str:
    """Sign in with the real service; the principal's e-mail (raises when refused)."""
    async with open_database(database_url) as engine:
        users = UserService(
            session_factory(engine),
            clock=ManualClock(),
            settings=get_settings(),
            redis=None,
        )
        principal, _ = await users.sign_in(email, SecretStr(password), client="cli-test")
    return principal.email


async def listed(*extra: str) -> list[dict[str, Any]]:
    """The users `users list --json` prints."""
    result = await pmsgate("users", "list", "--json", *extra)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    users: list[dict[str, Any]] = json.loads(result.stdout)["users"]
    return users


async def test_users_add_with_password_stdin_creates_a_user_that_can_sign_in(
    cli_env: str, customer: str
) -> None:
    result = await add_user("Owner@Example.com", "customer", "--student-id", customer)

    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "owner@example.com" in result.stdout
    assert await sign_in(cli_env, "owner@example.com", PASSWORD) == "owner@example.com"
    [user] = await listed()
    assert (user["email"], user["role"], user["student_id"]) == (
        "owner@example.com",
        "customer",
        customer,
    )
    assert user["last_login_at"] is not None
    assert PASSWORD not in result.stdout + result.stderr
    assert PASSWORD not in await all_stored_text(cli_env)


async def test_users_add_prompts_twice_for_a_hidden_password(cli_env: str) -> None:
    result = await pmsgate(
        "users",
        "add",
        "--email",
        "ops@example.com",
        "--role",
        "admin",
        input=f"{PASSWORD}\n{PASSWORD}\n",
    )

    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "Password" in result.stderr
    assert PASSWORD not in result.stdout + result.stderr
    assert await sign_in(cli_env, "ops@example.com", PASSWORD) == "ops@example.com"


async def test_a_short_password_is_refused_with_exit_2_and_nothing_is_stored(
    cli_env: str,
) -> None:
    result = await add_user(input="short\n")

    assert_failed_with(result, "password_too_short")
    assert await listed() == []


async def test_a_customer_user_with_an_unknown_student_id_is_refused_with_customer_not_found(
    cli_env: str,
) -> None:
    result = await add_user("owner@example.com", "customer", "--student-id", "stu-nobody")

    assert_failed_with(result, "customer_not_found")
    assert await listed() == []


async def test_adding_the_same_email_twice_is_refused_with_user_exists(cli_env: str) -> None:
    assert (await add_user()).exit_code == 0

    assert_failed_with(await add_user(), "user_exists")


async def test_set_password_replaces_the_password(cli_env: str) -> None:
    await add_user()

    result = await pmsgate(
        "users", "set-password", "OPS@example.com", "--password-stdin", input="another passphrase\n"
    )

    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "another passphrase" not in result.stdout + result.stderr
    assert await sign_in(cli_env, "ops@example.com", "another passphrase") == "ops@example.com"
    with pytest.raises(PmsgateError) as refused:
        await sign_in(cli_env, "ops@example.com", PASSWORD)
    assert refused.value.code == "invalid_credentials"


async def test_remove_deletes_the_user_and_an_unknown_one_is_user_not_found(
    cli_env: str,
) -> None:
    await add_user()

    removed = await pmsgate("users", "remove", "ops@example.com")

    assert removed.exit_code == 0, (removed.stdout, removed.stderr)
    assert await listed() == []
    assert_failed_with(await pmsgate("users", "remove", "ops@example.com"), "user_not_found")
    assert_failed_with(
        await pmsgate("users", "set-password", "x@example.com", "--password-stdin", input=PASSWORD),
        "user_not_found",
    )


async def test_users_list_shows_a_table_without_any_hash(cli_env: str, customer: str) -> None:
    for email, role, extra in (
        ("ops@example.com", "admin", ()),
        ("owner@example.com", "customer", ("--student-id", customer)),
    ):
        await add_user(email, role, *extra)

    table = await pmsgate("users", "list")

    assert table.exit_code == 0, (table.stdout, table.stderr)
    for text in ("ops@example.com", "admin", "owner@example.com", customer, "never"):
        assert text in table.stdout
    assert "argon2" not in table.stdout
    assert [u["email"] for u in await listed()] == ["ops@example.com", "owner@example.com"]


async def test_users_unlock_without_redis_says_to_unlock_from_the_console(cli_env: str) -> None:
    assert_failed_with(
        await pmsgate("users", "unlock", "ops@example.com"), "unlock_needs_shared_state"
    )


async def test_users_unlock_lifts_a_pause_on_every_replica_and_is_audited(
    cli_env: str,
    redis_url: str,
    redis_namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from redis.asyncio import Redis

    from pmsgate.audit.trail import AuditTrail
    from pmsgate.storage.audit import AuditFilter

    monkeypatch.setenv("PMSGATE_REDIS_URL", redis_url)
    monkeypatch.setenv("PMSGATE_REDIS_NAMESPACE", redis_namespace)
    get_settings.cache_clear()
    settings = get_settings()
    clock = ManualClock()
    redis = Redis.from_url(redis_url)
    try:
        async with open_database(cli_env) as engine:
            users = UserService(
                session_factory(engine), clock=clock, settings=settings, redis=redis
            )
            await users.add("ops@example.com", SecretStr(PASSWORD), role="admin")
            for _ in range(settings.login_max_failures + 1):
                with pytest.raises(PmsgateError):
                    await users.sign_in(
                        "ops@example.com", SecretStr("wrong password here"), client="192.0.2.5"
                    )
            with pytest.raises(PmsgateError) as paused:
                await users.sign_in("ops@example.com", SecretStr(PASSWORD), client="192.0.2.5")
            assert paused.value.code == "too_many_login_attempts"

            result = await pmsgate("users", "unlock", "ops@example.com", "--address", "192.0.2.5")
            assert result.exit_code == 0, (result.stdout, result.stderr)
            assert "unlocked" in result.stdout

            principal, _ = await users.sign_in(
                "ops@example.com", SecretStr(PASSWORD), client="192.0.2.5"
            )
            assert principal.email == "ops@example.com"
            trail = AuditTrail(session_factory(engine), clock, retention_days=30)
            events = [e async for e in trail.export(AuditFilter(action_prefix="signin.unlocked"))]
            assert [(e.actor_kind, e.subject) for e in events] == [("cli", "user:ops@example.com")]
            assert events[0].details["address"] == "192.0.2.5"
            refused = await pmsgate("users", "unlock", "--address", "not-an-ip")
            assert_failed_with(refused, "invalid_address")
    finally:
        await redis.aclose()
