"""Migration 0007: keys minted before scopes hold only ``tools:read``; the audit table exists."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import inspect, select

from pmsgate.storage.db import open_database, session_factory
from pmsgate.storage.models import GatewayKey
from tests.support.db import execute_at, facility_in_old_schema

pytestmark = pytest.mark.anyio
WHEN = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)


async def test_keys_minted_before_scopes_get_only_tools_read(database_url: str):
    async with open_database(database_url) as engine:
        facility_id = await facility_in_old_schema(engine, "0006", WHEN)
        await execute_at(
            engine,
            "INSERT INTO gateway_keys (facility_id, prefix, key_hash, label, created_at) "
            "VALUES (:facility, 'pgw_abcdefgh', :hash, 'old', :now)",
            WHEN,
            facility=facility_id,
            hash="a" * 64,
        )
        async with engine.connect() as connection:
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
