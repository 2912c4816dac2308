"""Idempotency records: migration 0006 keeps existing records; changes need the owner."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pmsgate.gateway.write_records import WriteRecords
from pmsgate.storage.db import current_revision, open_database, session_factory
from tests.storage.test_assistant_migrations import head_revision
from tests.support.db import execute_at, facility_in_old_schema

pytestmark = pytest.mark.anyio
WHEN = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)
# A record as the 0005 schema stored it (no owner column yet).
OLD_RECORD = (
    "INSERT INTO idempotency_records (facility_id, key, operation, body_hash, state, "
    "created_at, updated_at) VALUES (:facility, 'k', 'check-in-guest', 'h', 'unknown', "
    ":now, :now)"
)


async def test_records_written_before_0006_stay_readable_and_unowned(database_url: str):
    async with open_database(database_url) as engine:
        facility_id = await facility_in_old_schema(engine, "0005", WHEN)
        await execute_at(engine, OLD_RECORD, WHEN, facility=facility_id)
    async with open_database(database_url) as engine:
        assert await current_revision(engine) == head_revision()  # migrated on to head
        records = WriteRecords(session_factory(engine))
        record = await records.get(facility_id=facility_id, key="k")
        assert record is not None
        assert (record.state, record.owner, record.read_before) == ("unknown", None, None)
        # A process takes it over; one that no longer owns it cannot settle it.
        assert await records.take_over(record, owner="p1", now=WHEN)
        assert not await records.take_over(record, owner="p2", now=WHEN)
        done = {"state": "done", "status_code": 200, "response": {}, "now": WHEN}
        assert not await records.finish(record.id, owner="p2", **done)
        assert await records.finish(record.id, owner="p1", **done)
