"""The platform-side records' migrations (spec §2.4): created at head, downgraded and
upgraded again.

Every test runs on SQLite and, when PMSGATE_TEST_DATABASE_URL is set, on PostgreSQL.
"""

from __future__ import annotations

import pytest
from sqlalchemy import inspect

from pmsgate.storage.db import alembic_config, current_revision, open_database
from tests.support.db import downgrade_to

pytestmark = pytest.mark.anyio

ASSISTANT_TABLES = {
    "customers",
    "workspace_configurations",
    "pms_integrations",
    "apartments",
    "usage_snapshots",
    "knowledge_allowlist",
}


def head_revision() -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


async def test_migrations_at_head_create_every_assistant_table(database_url: str):
    async with open_database(database_url) as engine:
        assert await current_revision(engine) == head_revision()
        async with engine.connect() as connection:
            tables = await connection.run_sync(lambda sync: set(inspect(sync).get_table_names()))
    assert tables >= ASSISTANT_TABLES


async def test_assistant_migration_downgrades_to_the_gateway_schema_and_upgrades_again(
    database_url: str,
):

    async with open_database(database_url) as engine:
        async with engine.begin() as connection:
            await downgrade_to(connection, "0001")
        async with engine.connect() as connection:
            tables = await connection.run_sync(lambda sync: set(inspect(sync).get_table_names()))
        assert not tables & ASSISTANT_TABLES
        assert "facilities" in tables
    async with open_database(database_url) as engine:
        assert await current_revision(engine) == head_revision()
