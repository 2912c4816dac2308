"""Moving a test database to an older (or newer) schema, and rows written in an old one."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from alembic import command
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from pmsgate.storage.db import alembic_config
from pmsgate.storage.models import Facility


async def downgrade_to(connection: AsyncConnection, revision: str) -> None:
    """Migrate the database down to ``revision`` (the schema a release of then had)."""
    await connection.run_sync(lambda sync: command.downgrade(alembic_config(sync), revision))


async def upgrade_to(connection: AsyncConnection, revision: str) -> None:
    """Migrate the database up to ``revision`` (not further)."""
    await connection.run_sync(lambda sync: command.upgrade(alembic_config(sync), revision))


async def insert_old_facility(connection: AsyncConnection, when: datetime, **columns: Any) -> int:
    """A partner facility stored as an older schema holds it; its id.

    Core, not the ORM: the model has columns the old schema does not have yet.
    """
    values: dict[str, Any] = {
        "hotel_id": "1001",
        "username": "api1",
        "kind": "partner",
        "password_enc": "v1:x",
        "integration_id": "int-1",
        "created_at": when,
        "updated_at": when,
        **columns,
    }
    table = Facility.__table__
    inserted = await connection.execute(insert(table).values(values).returning(table.c.id))
    return int(inserted.scalar_one())
