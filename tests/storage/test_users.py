"""Console accounts and sessions in the database: the ``users`` and ``web_sessions`` repositories.

Both work in one session the test opens (they never commit); the caller-facing errors
(user_exists, user_not_found, customer_not_found) are the service's, tested in tests/web.
Every test runs on SQLite and, when PMSGATE_TEST_DATABASE_URL is set, on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import ManualClock
from pmsgate.customers.registry import Customers
from pmsgate.storage.customers import CustomerProfile
from pmsgate.storage.users import UserRepository, WebSessionRepository

pytestmark = pytest.mark.anyio

STUDENT = "stu-2001"
HASH = "$argon2id$v=19$m=65536,t=3,p=4$c29tZXNhbHQ$not-a-real-hash"


@pytest.fixture
async def session(
    sessions: async_sessionmaker[AsyncSession], clock: ManualClock
) -> AsyncIterator[AsyncSession]:
    await Customers(sessions, clock).add(
        CustomerProfile(
            student_id=STUDENT, email="owner@example.test", name="Owner", kind="partner"
        )
    )
    async with sessions() as session:
        yield session


@pytest.fixture
def users(session: AsyncSession, clock: ManualClock) -> UserRepository:
    return UserRepository(session, clock)


@pytest.fixture
def web_sessions(session: AsyncSession) -> WebSessionRepository:
    return WebSessionRepository(session)


async def _open_session(
    web_sessions: WebSessionRepository, clock: ManualClock, user_id: int, name: str
) -> None:
    now = clock.now()
    await web_sessions.create(
        id_hash=name.ljust(64, "0"),
        user_id=user_id,
        csrf_token=f"csrf-{name}",
        created_at=now,
        expires_at=now + timedelta(hours=1),
    )


async def test_added_users_are_listed_by_email_with_their_role_and_customer(
    users: UserRepository,
) -> None:
    await users.add("zed@example.test", password_hash=HASH, role="admin", student_id=None)
    await users.add("amy@example.test", password_hash=HASH, role="customer", student_id=STUDENT)

    listed = await users.all()

    assert [(u.email, u.role, u.student_id) for u in listed] == [
        ("amy@example.test", "customer", STUDENT),
        ("zed@example.test", "admin", None),
    ]
    assert all(u.last_login_at is None for u in listed)


async def test_a_second_user_with_the_same_email_breaks_the_unique_constraint(
    users: UserRepository,
) -> None:
    await users.add("amy@example.test", password_hash=HASH, role="admin", student_id=None)

    with pytest.raises(IntegrityError):
        await users.add("amy@example.test", password_hash=HASH, role="admin", student_id=None)


async def test_the_customer_of_a_customer_user_is_looked_up(users: UserRepository) -> None:
    assert await users.customer_exists(STUDENT)
    assert not await users.customer_exists("stu-missing")


async def test_nothing_is_committed_until_the_caller_commits(
    sessions: async_sessionmaker[AsyncSession], users: UserRepository, clock: ManualClock
) -> None:
    await users.add("amy@example.test", password_hash=HASH, role="admin", student_id=None)

    async with sessions() as other:
        assert await UserRepository(other, clock).all() == []


async def test_the_user_repr_never_shows_the_password_hash(users: UserRepository) -> None:
    record = await users.add("amy@example.test", password_hash=HASH, role="admin", student_id=None)

    assert HASH not in repr(record)


async def test_a_live_session_is_found_with_its_user_until_it_expires(
    users: UserRepository, web_sessions: WebSessionRepository, clock: ManualClock
) -> None:
    user = await users.add("amy@example.test", password_hash=HASH, role="admin", student_id=None)
    await _open_session(web_sessions, clock, user.id, "a")

    found = await web_sessions.live("a".ljust(64, "0"), clock.now())
    assert found is not None
    assert (found[0].user_id, found[1].email, found[0].csrf_token) == (
        user.id,
        "amy@example.test",
        "csrf-a",
    )

    clock.advance(3600)
    assert await web_sessions.live("a".ljust(64, "0"), clock.now()) is None
    assert await web_sessions.delete_expired(clock.now()) == 1


async def test_changing_the_password_hash_ends_every_session_of_that_user_only(
    users: UserRepository, web_sessions: WebSessionRepository, clock: ManualClock
) -> None:
    amy = await users.add("amy@example.test", password_hash=HASH, role="admin", student_id=None)
    bob = await users.add("bob@example.test", password_hash=HASH, role="admin", student_id=None)
    for name in ("a1", "a2"):
        await _open_session(web_sessions, clock, amy.id, name)
    await _open_session(web_sessions, clock, bob.id, "b1")

    await users.set_password_hash("amy@example.test", HASH + "-new")

    assert await web_sessions.count_for(amy.id, clock.now()) == 0
    assert await web_sessions.count_for(bob.id, clock.now()) == 1
    stored = await users.by_email("amy@example.test")
    assert stored is not None and stored.password_hash == HASH + "-new"


async def test_removing_a_user_deletes_it_and_its_sessions(
    users: UserRepository, web_sessions: WebSessionRepository, clock: ManualClock
) -> None:
    amy = await users.add("amy@example.test", password_hash=HASH, role="admin", student_id=None)
    await _open_session(web_sessions, clock, amy.id, "a1")

    await users.remove("amy@example.test")

    assert await users.by_email("amy@example.test") is None
    assert await web_sessions.live("a1".ljust(64, "0"), clock.now()) is None


async def test_removing_or_changing_an_unknown_user_changes_nothing(
    users: UserRepository,
) -> None:
    assert not await users.remove("nobody@example.test")
    assert not await users.set_password_hash("nobody@example.test", HASH)
    assert await users.all() == []


async def test_a_rehash_does_not_overwrite_a_password_changed_meanwhile(
    users: UserRepository,
) -> None:
    amy = await users.add("amy@example.test", password_hash=HASH, role="admin", student_id=None)
    await users.set_password_hash("amy@example.test", HASH + "-changed")

    await users.rehash(amy.id, old_hash=HASH, new_hash=HASH + "-rehashed")

    stored = await users.by_email("amy@example.test")
    assert stored is not None and stored.password_hash == HASH + "-changed"
