"""Moving a test database to an older (or newer) schema, and rows written in an old one."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from alembic import command
from sqlalchemy import bindparam, insert, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker

from pmsgate.storage.db import alembic_config
from pmsgate.storage.models import Facility, UtcDateTime


async def downgrade_to(connection: AsyncConnection, revision: str) -> None:
    """Migrate the database down to ``revision`` (the schema a release of then had)."""
    await connection.run_sync(lambda sync: command.downgrade(alembic_config(sync), revision))


async def upgrade_to(connection: AsyncConnection, revision: str) -> None:
    """Migrate the database up to ``revision`` (not further)."""
    await connection.run_sync(lambda sync: command.upgrade(alembic_config(sync), revision))


STORED_AT = datetime(2026, 11, 22, tzinfo=UTC)
# A partner facility's columns (its password as the vault would store it, unreadable here).
FACILITY_ROW: dict[str, Any] = {
    "hotel_id": "1001",
    "username": "api10001",
    "kind": "partner",
    "password_enc": "v1:x",
    "integration_id": "int-1",
}


async def store_as_is(
    sessions: async_sessionmaker[AsyncSession],
    model: type[Any],
    *,
    when: datetime = STORED_AT,
    **columns: Any,
) -> None:
    """A ``model`` row of ``columns``, created and updated ``when``, stored past the services'
    checks: only the database's own constraints apply."""
    async with sessions.begin() as session:
        session.add(model(created_at=when, updated_at=when, **columns))


async def facility_in_old_schema(engine: AsyncEngine, revision: str, when: datetime) -> int:
    """The database moved down to ``revision`` with one facility stored (see
    :func:`insert_old_facility`); its id."""
    async with engine.begin() as connection:
        await downgrade_to(connection, revision)
    async with engine.begin() as connection:
        return await insert_old_facility(connection, when)


async def execute_at(engine: AsyncEngine, sql: str, now: datetime, **params: Any) -> None:
    """Run ``sql`` in a transaction of its own, ``:now`` bound to ``now`` as times are
    stored, the other parameters from ``params``."""
    statement = text(sql).bindparams(bindparam("now", type_=UtcDateTime()))
    async with engine.begin() as connection:
        await connection.execute(statement, {"now": now, **params})


async def insert_old_facility(connection: AsyncConnection, when: datetime, **columns: Any) -> int:
    """A partner facility stored as an older schema holds it; its id.

    Core, not the ORM: the model has columns the old schema does not have yet.
    """
    values: dict[str, Any] = {**FACILITY_ROW, "created_at": when, "updated_at": when, **columns}
    table = Facility.__table__
    inserted = await connection.execute(insert(table).values(values).returning(table.c.id))
    return int(inserted.scalar_one())
