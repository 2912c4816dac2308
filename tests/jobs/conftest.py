"""The jobs tests' run records."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from pmsgate.clock import ManualClock
from pmsgate.jobs.runs import JobRuns
from pmsgate.storage.db import open_database, session_factory


@pytest.fixture
async def runs(database_url: str, clock: ManualClock) -> AsyncIterator[JobRuns]:
    """The job-run records on the test database, timed by the test's ``clock``."""
    async with open_database(database_url) as engine:
        yield JobRuns(session_factory(engine), clock)
