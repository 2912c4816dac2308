"""`pmsgate audit export|list` through the real command line (SQLite, and PostgreSQL in CI)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import Result

from pmsgate.audit import Actor, AuditAction, AuditTrail, Outcome
from pmsgate.clock import ManualClock
from pmsgate.customers.registry import Customers
from pmsgate.gateway.vault import generate_key_spec
from pmsgate.storage.customers import CustomerProfile
from pmsgate.storage.db import open_database, session_factory
from tests.cli_support import CliRecorder
from tests.support.cli import cli_environment

pytestmark = pytest.mark.anyio

NOV_1 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def cli_env(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    keys = generate_key_spec("a1")
    with cli_environment(monkeypatch, PMSGATE_DATABASE_URL=database_url, PMSGATE_SECRET_KEYS=keys):
        yield database_url


@pytest.fixture
async def recorded(cli_env: str) -> None:
    """Events on 31 October and on 1-3 November, of two customers and of nobody."""
    clock = ManualClock(NOV_1 - timedelta(days=1))
    async with open_database(cli_env) as engine:
        sessions = session_factory(engine)
        customers = Customers(sessions, clock)
        for student in ("stu-a", "stu-b"):
            await customers.add(
                CustomerProfile(student_id=student, email="o@example.com", name="O", kind="partner")
            )
        trail = AuditTrail(sessions, clock, retention_days=400)
        await trail.record(
            AuditAction.KEY_MINTED, actor=Actor.cli(), subject="old", student_id="stu-a"
        )
        for day in range(3):
            clock.set(NOV_1 + timedelta(days=day))
            await trail.record(
                AuditAction.KEY_MINTED, actor=Actor.cli(), subject=f"a{day}", student_id="stu-a"
            )
            await trail.record(
                AuditAction.SIGNIN_FAILED,
                actor=Actor.system(),
                subject=f"s{day}",
                outcome=Outcome.FAILURE,
            )
            await trail.record(
                AuditAction.CONSOLE_ACTION,
                actor=Actor.customer_user("b@example.com"),
                subject=f"b{day}",
                student_id="stu-b",
            )


async def pmsgate(*args: str) -> Result:
    return await CliRecorder().run(*args)


def subjects(result: Result) -> list[str]:
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return [json.loads(line)["subject"] for line in result.stdout.splitlines()]


async def test_export_writes_json_lines_newest_first_from_since(recorded: None) -> None:
    result = await pmsgate("audit", "export", "--since", "2026-11-01")
    assert subjects(result) == ["b2", "s2", "a2", "b1", "s1", "a1", "b0", "s0", "a0"]
    first = json.loads(result.stdout.splitlines()[0])
    assert set(first) == {
        "id",
        "occurred_at",
        "actor_kind",
        "actor",
        "action",
        "subject",
        "outcome",
        "customer_id",
        "facility_id",
        "request_id",
        "client_address",
        "details",
    }
    assert "9 events" in result.stderr


async def test_export_filters_by_until_customer_action_and_outcome(recorded: None) -> None:
    until = await pmsgate("audit", "export", "--since", "2026-11-01", "--until", "2026-11-02")
    assert subjects(until) == ["b0", "s0", "a0"]
    customer = await pmsgate("audit", "export", "--since", "2026-10-01", "--customer", "stu-a")
    assert subjects(customer) == ["a2", "a1", "a0", "old"]
    action = await pmsgate("audit", "export", "--since", "2026-11-01", "--action", "signin.")
    assert subjects(action) == ["s2", "s1", "s0"]
    outcome = await pmsgate(
        "audit", "export", "--since", "2026-11-01T00:00:00+00:00", "--outcome", "failure"
    )
    assert subjects(outcome) == ["s2", "s1", "s0"]
    unknown = await pmsgate("audit", "export", "--since", "2026-11-01", "--facility", "H-none")
    assert subjects(unknown) == []


async def test_export_refuses_a_date_it_cannot_read(recorded: None) -> None:
    result = await pmsgate("audit", "export", "--since", "last tuesday")
    assert result.exit_code == 2
    assert "error invalid_date:" in result.stderr


async def test_list_shows_the_newest_events_as_a_table(recorded: None) -> None:
    result = await pmsgate("audit", "list", "--limit", "2")
    assert result.exit_code == 0, result.stderr
    assert "b2" in result.stdout and "s2" in result.stdout and "a2" not in result.stdout
    assert "console.action" in result.stdout
