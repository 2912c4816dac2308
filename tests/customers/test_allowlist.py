"""The knowledge allowlist as a service: addresses, comments, conflicts and errors.

Every test runs on SQLite and, when PMSGATE_TEST_DATABASE_URL is set, on PostgreSQL.
"""

from __future__ import annotations

from datetime import date

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import ManualClock
from pmsgate.customers.allowlist import Allowlist
from pmsgate.errors import PmsgateError
from pmsgate.storage.allowlist import AllowlistComment

from .records_support import code_of

pytestmark = pytest.mark.anyio


async def test_allowlist_entries_take_effect_at_once_and_keep_their_comment(
    sessions: async_sessionmaker[AsyncSession], clock: ManualClock
):
    allowlist = Allowlist(sessions, clock)
    assert not await allowlist.find("owner@example.test")

    entry = await allowlist.add(
        "Owner@Example.TEST",
        AllowlistComment(
            contract="C-2026-01", workspace="acme-rentals", apartments=12, subscription="active"
        ),
    )

    assert await allowlist.find("OWNER@example.test")
    assert entry.email == "owner@example.test"
    assert entry.added_on == clock.now().date()
    assert entry.comment == (
        f"{clock.now().date().isoformat()} · contract C-2026-01 · workspace acme-rentals"
        " · 12 apartments · subscription active"
    )
    assert await allowlist.get("owner@example.test") == entry
    assert [e.email for e in await allowlist.all()] == ["owner@example.test"]

    await allowlist.remove("owner@EXAMPLE.test")

    assert not await allowlist.find("owner@example.test")
    assert await allowlist.all() == []


async def test_an_address_already_on_the_allowlist_is_a_conflict_whatever_its_case(
    sessions: async_sessionmaker[AsyncSession],
):
    allowlist = Allowlist(sessions)
    await allowlist.add("owner@example.test")

    with pytest.raises(PmsgateError) as excinfo:
        await allowlist.add("OWNER@example.test")

    assert code_of(excinfo) == "allowlist_entry_exists"
    assert excinfo.value.status == 409


async def test_put_admits_an_address_or_replaces_its_comment(
    sessions: async_sessionmaker[AsyncSession], clock: ManualClock
):
    allowlist = Allowlist(sessions, clock)
    first = await allowlist.put("owner@example.test", AllowlistComment(apartments=3))
    clock.advance(3600)

    second = await allowlist.put(
        "owner@example.test",
        AllowlistComment(added_on=date(2026, 12, 1), apartments=5, subscription="active"),
    )

    assert second.created_at == first.created_at
    assert (second.added_on, second.apartments, second.subscription) == (
        date(2026, 12, 1),
        5,
        "active",
    )
    assert len(await allowlist.all()) == 1


async def test_allowlist_errors_name_the_missing_entry_and_the_bad_address(
    sessions: async_sessionmaker[AsyncSession],
):
    allowlist = Allowlist(sessions)

    with pytest.raises(PmsgateError) as missing:
        await allowlist.remove("nobody@example.test")
    with pytest.raises(PmsgateError) as unreadable:
        await allowlist.get("nobody@example.test")
    with pytest.raises(PmsgateError) as invalid:
        await allowlist.add("not an address")

    assert code_of(missing) == code_of(unreadable) == "allowlist_entry_not_found"
    assert code_of(invalid) == "invalid_email"
