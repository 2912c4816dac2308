"""Migration 0007: keys minted before scopes hold only ``tools:read``; the audit table exists."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import bindparam, inspect, select, text

from pmsgate.storage.db import open_database, session_factory
from pmsgate.storage.models import GatewayKey, UtcDateTime
from tests.support.db import downgrade_to, insert_old_facility

pytestmark = pytest.mark.anyio
WHEN = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)


async def test_keys_minted_before_scopes_get_only_tools_read(database_url: str):
    async with open_database(database_url) as engine:
        async with engine.begin() as connection:
            await downgrade_to(connection, "0006")
        async with engine.begin() as connection:
            facility_id = await insert_old_facility(connection, WHEN)
        insert = text(
            "INSERT INTO gateway_keys (facility_id, prefix, key_hash, label, created_at) "
            "VALUES (:facility, 'pgw_abcdefgh', :hash, 'old', :now)"
        ).bindparams(bindparam("now", type_=UtcDateTime()))
        async with engine.begin() as connection:
            await connection.execute(
                insert, {"facility": facility_id, "hash": "a" * 64, "now": WHEN}
            )
            tables = await connection.run_sync(lambda c: inspect(c).get_table_names())
        assert "audit_events" not in tables
    async with open_database(database_url) as engine:
        async with session_factory(engine)() as session:
            key = (await session.execute(select(GatewayKey))).scalar_one()
        assert key.scopes == ["tools:read"]
        assert (key.expires_at, key.last_used_at) == (None, None)
        async with engine.connect() as connection:
            tables = await connection.run_sync(lambda c: inspect(c).get_table_names())
        assert "audit_events" in tables
