"""The storage base: migrations apply on SQLite and PostgreSQL, and are idempotent."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from pmsgate.storage.db import current_revision, open_database, session_factory
from pmsgate.storage.models import Facility
from tests.support.db import FACILITY_ROW, store_as_is

pytestmark = pytest.mark.anyio


async def test_migrations_reach_head_and_a_second_upgrade_changes_nothing(database_url: str):
    async with open_database(database_url) as engine:
        first = await current_revision(engine)
    async with open_database(database_url) as engine:
        second = await current_revision(engine)
    assert first is not None
    assert first == second


async def test_timestamps_round_trip_as_timezone_aware_utc(database_url: str):
    when = datetime(2026, 11, 22, 9, 30, tzinfo=UTC)
    async with open_database(database_url) as engine:
        sessions = session_factory(engine)
        await store_as_is(
            sessions,
            Facility,
            when=when,
            **FACILITY_ROW,
        )
        async with sessions() as session:
            stored = (await session.execute(select(Facility))).scalar_one()
    assert stored.created_at == when
    assert stored.created_at.tzinfo is not None


async def test_sqlite_database_file_is_created_under_a_new_data_directory(tmp_path):
    url = f"sqlite+aiosqlite:///{tmp_path / 'nested' / 'dir' / 'pmsgate.db'}"
    async with open_database(url) as engine:
        assert await current_revision(engine) is not None
    assert (tmp_path / "nested" / "dir" / "pmsgate.db").exists()
