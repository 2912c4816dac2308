"""Console tests run on SQLite; the modules whose subject is what the database decides
run on PostgreSQL too.

A console page or form reads and writes through the storage repositories, and those
queries run on both databases where they are the subject: tests/storage, tests/e2e and the
service tests (customers, gateway, jobs, knowledge, onboarding, webhooks, oauth). Running
every page test a second time on PostgreSQL doubled the suite's most expensive folder
without adding a query. The modules that import ``database_url`` from tests/conftest.py
keep both databases: sign-in and sessions (e-mail matching, control characters that
PostgreSQL refuses in text, lifetimes), one-time form tokens spent once across replicas,
incidents reconciled by two replicas, the audit trail's and the tool-call log's filtered
pages, and the admin overview across customers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.web.support import WebSandbox, web_sandbox


@pytest.fixture
def database_url(sqlite_url: str) -> str:
    """A migrated, empty SQLite database of this test alone."""
    return sqlite_url


@pytest.fixture
async def web(database_url: str) -> AsyncIterator[WebSandbox]:
    """The web app over an enrolled sandbox, on this module's databases."""
    async with web_sandbox(database_url) as sandbox:
        yield sandbox
