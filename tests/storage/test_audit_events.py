"""The audit_events repository: append, filtered newest-first reads with keyset pages, purge.

Every test runs on SQLite and, when PMSGATE_TEST_DATABASE_URL is set, on PostgreSQL.
The repository works in one session the test opens (it never commits).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from pmsgate.storage.audit import AuditFilter, AuditRepository, Owner
from pmsgate.storage.db import open_database, session_factory
from pmsgate.storage.keyset import parse_cursor

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)


@pytest.fixture
async def session(database_url: str) -> AsyncIterator[AsyncSession]:
    async with open_database(database_url) as engine, session_factory(engine)() as session:
        yield session


async def _add(
    repo: AuditRepository,
    minutes: int,
    action: str,
    *,
    outcome: str = "success",
    customer_id: int | None = None,
    facility_id: int | None = None,
    actor: str = "ops@example.com",
) -> int:
    event = await repo.append(
        occurred_at=T0 + timedelta(minutes=minutes),
        actor_kind="admin",
        actor=actor,
        action=action,
        subject=f"thing-{minutes}",
        outcome=outcome,
        customer_id=customer_id,
        facility_id=facility_id,
        request_id=f"r{minutes}",
        client_address="192.0.2.1",
        details={"minute": minutes, "nested": {"ok": True}},
    )
    return event.id


async def test_appended_events_come_back_newest_first_with_every_field(
    session: AsyncSession,
) -> None:
    repo = AuditRepository(session)
    await _add(repo, 1, "key.minted", customer_id=3, facility_id=4)
    await _add(repo, 2, "signin.failed", outcome="failure")

    page = await repo.query(AuditFilter())

    assert [e.action for e in page.events] == ["signin.failed", "key.minted"]
    minted = page.events[1]
    assert (minted.occurred_at, minted.customer_id, minted.facility_id) == (
        T0 + timedelta(minutes=1),
        3,
        4,
    )
    assert (minted.request_id, minted.client_address, minted.actor_kind) == (
        "r1",
        "192.0.2.1",
        "admin",
    )
    assert minted.details == {"minute": 1, "nested": {"ok": True}}
    assert page.next_cursor is None


async def test_filters_combine_time_action_prefix_outcome_actor_and_facility(
    session: AsyncSession,
) -> None:
    repo = AuditRepository(session)
    await _add(repo, 1, "key.minted", facility_id=1)
    await _add(repo, 2, "key.revoked", facility_id=2, outcome="refused")
    await _add(repo, 3, "keyring.other", facility_id=1)  # `key.` is a prefix with its dot
    await _add(repo, 4, "signin.failed", outcome="failure", actor="x@example.com")
    await _add(repo, 5, "key.used_for_write", facility_id=1)

    async def actions(where: AuditFilter) -> list[str]:
        return [e.action for e in (await repo.query(where)).events]

    assert await actions(AuditFilter(action_prefix="key.")) == [
        "key.used_for_write",
        "key.revoked",
        "key.minted",
    ]
    assert await actions(AuditFilter(action_prefix="key_")) == []  # `_` is no wildcard
    assert await actions(AuditFilter(outcome="refused")) == ["key.revoked"]
    assert await actions(AuditFilter(actor="x@example.com")) == ["signin.failed"]
    assert await actions(AuditFilter(facility_ids=(1,), action_prefix="key.")) == [
        "key.used_for_write",
        "key.minted",
    ]
    assert await actions(AuditFilter(facility_ids=())) == []
    window = AuditFilter(since=T0 + timedelta(minutes=2), until=T0 + timedelta(minutes=4))
    assert await actions(window) == ["keyring.other", "key.revoked"]


async def test_an_owner_sees_events_naming_it_or_its_facilities_and_nothing_else(
    session: AsyncSession,
) -> None:
    repo = AuditRepository(session)
    await _add(repo, 1, "console.action", customer_id=10)
    await _add(repo, 2, "key.used_for_write", facility_id=20)
    await _add(repo, 3, "console.action", customer_id=11)
    await _add(repo, 4, "key.used_for_write", facility_id=21)
    await _add(repo, 5, "signin.failed")

    mine = await repo.query(AuditFilter(owner=Owner(customer_id=10, facility_ids=(20,))))
    nobody = await repo.query(AuditFilter(owner=Owner(customer_id=None)))

    assert [e.subject for e in mine.events] == ["thing-2", "thing-1"]
    assert nobody.events == []


async def test_pages_follow_the_cursor_without_gaps_or_repeats_even_for_equal_times(
    session: AsyncSession,
) -> None:
    repo = AuditRepository(session)
    ids = [await _add(repo, minute // 3, "key.minted") for minute in range(11)]

    seen: list[int] = []
    after: str | None = None
    pages = 0
    while True:
        page = await repo.query(AuditFilter(), limit=4, after=after)
        seen += [e.id for e in page.events]
        pages += 1
        if page.next_cursor is None:
            break
        after = page.next_cursor
        # An event added meanwhile (newer) never shifts the pages still to read.
        await _add(repo, 100 + pages, "key.revoked")

    expected = sorted(ids, key=lambda i: ((i - ids[0]) // 3, i), reverse=True)
    assert seen == expected
    assert pages == 3


async def test_a_malformed_cursor_reads_from_the_newest_event(session: AsyncSession) -> None:
    repo = AuditRepository(session)
    await _add(repo, 1, "key.minted")
    assert parse_cursor("not-a-cursor") is None
    assert parse_cursor("99999999999999999999.1") is None  # out of range, not a crash
    page = await repo.query(AuditFilter(), after="1; DROP TABLE audit_events")
    assert [e.action for e in page.events] == ["key.minted"]


async def test_purge_removes_only_events_before_the_cutoff(session: AsyncSession) -> None:
    repo = AuditRepository(session)
    for minute in range(5):
        await _add(repo, minute, "key.minted")

    removed = await repo.purge_before(T0 + timedelta(minutes=3))

    assert removed == 3
    assert [e.subject for e in (await repo.query(AuditFilter())).events] == ["thing-4", "thing-3"]
