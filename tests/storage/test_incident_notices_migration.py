"""Migration 0009: facilities registered before it get ``status_changed_at`` (their last
update); the incident-notice and sign-in-link tables exist; a notice is planned once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import inspect, select

from pmsgate.storage.db import open_database, session_factory
from pmsgate.storage.models import Facility
from pmsgate.storage.notices import IncidentNoticeRepository
from tests.support.db import downgrade_to, insert_old_facility

pytestmark = pytest.mark.anyio
WHEN = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)


async def test_existing_facilities_get_their_last_update_as_status_change(database_url: str):
    async with open_database(database_url) as engine, engine.begin() as connection:
        await downgrade_to(connection, "0008")
        tables = await connection.run_sync(lambda c: inspect(c).get_table_names())
        assert "incident_notices" not in tables and "login_links" not in tables
        await insert_old_facility(
            connection, WHEN, status="error", created_at=WHEN - timedelta(days=3)
        )
    async with open_database(database_url) as engine:  # migrated on to head
        sessions = session_factory(engine)
        async with sessions() as session:
            facility = (await session.execute(select(Facility))).scalar_one()
        assert facility.status_changed_at == WHEN
        async with sessions.begin() as session:
            notices = IncidentNoticeRepository(session)
            [state] = await notices.facility_states()
            assert (state.status, state.status_changed_at, state.student_id) == (
                "error",
                WHEN,
                None,
            )
            plans = [
                await notices.plan(
                    facility_id=facility.id,
                    incident_at=WHEN,
                    kind="error",
                    channel="team",
                    recipient="ops@example.com",
                    student_id=None,
                    now=WHEN,
                )
                for _ in range(2)
            ]
        assert plans == [True, False]  # the unique key keeps one notice
