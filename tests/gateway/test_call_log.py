"""The tool-call log: every call that reached a facility, over HTTP and MCP, as stored rows.

The app is the one ``pmsgate serve`` runs (``tests.web.support.web_sandbox``: the real
container on the booking-system emulator and a ManualClock); calls go through the real
routes with a minted gateway key, the MCP ones through the official MCP client. The rows
are read back from the database after the usage-flush tick wrote them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from sqlalchemy import select

from pmsgate.catalogue.loader import load_tools
from pmsgate.clock import ManualClock
from pmsgate.gateway.call_log import CallLog, argument_shape
from pmsgate.gateway.scopes import OPERATIONS_READ, TOOLS_READ
from pmsgate.jobs.usage import flush_gateway_usage, purge_tool_calls
from pmsgate.storage.db import create_engine, open_database, session_factory
from pmsgate.storage.models import Facility, ToolCall
from pmsgate.storage.tool_calls import ToolCallFilter, ToolCallView
from tests.web.support import WebSandbox, web_sandbox

pytestmark = pytest.mark.anyio

LABEL = "assistant (production)"
GUEST_RESERVATION = 918273


async def mint(web: WebSandbox, *scopes: str, label: str = LABEL) -> str:
    _, raw = await web.gateway.facilities.mint_key(
        web.hotel_id, label, scopes=scopes or (TOOLS_READ,)
    )
    return raw


def bearer(raw: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {raw}"}


async def logged(web: WebSandbox) -> list[ToolCallView]:
    """The facility's logged calls, oldest first, after the usage-flush tick wrote them."""
    await flush_gateway_usage(web.gateway)
    facility = await web.gateway.facilities.get(web.hotel_id)
    page = await web.gateway.gateway.call_log.page(ToolCallFilter(facility.id), limit=500)
    return list(reversed(page.calls))


async def stored_rows(web: WebSandbox) -> list[dict[str, Any]]:
    """Every column of every stored row, as the database holds it."""
    async with web.web.customers.sessions() as session:
        rows = (await session.scalars(select(ToolCall))).all()
    return [{c.name: getattr(row, c.name) for c in ToolCall.__table__.columns} for row in rows]


def dates(web: WebSandbox, ahead: int, nights: int) -> tuple[str, str]:
    today = web.enrolled.clock.now().date()
    return (
        (today + timedelta(days=ahead)).isoformat(),
        (today + timedelta(days=ahead + nights)).isoformat(),
    )


@asynccontextmanager
async def mcp_client(web: WebSandbox, raw: str) -> AsyncIterator[Client]:
    transport = httpx2.ASGITransport(app=web.app)
    async with (
        web.app.router.lifespan_context(web.app),  # the MCP session manager runs in it
        httpx2.AsyncClient(
            transport=transport, base_url="http://gateway.test", headers=bearer(raw)
        ) as http,
        Client(streamable_http_client("http://gateway.test/mcp", http_client=http)) as client,
    ):
        yield client


async def test_a_tool_call_over_http_is_logged_with_its_freshness_and_caller_and_no_guest_data(
    database_url: str,
) -> None:
    async with web_sandbox(database_url) as web:
        raw = await mint(web)
        arrival, departure = dates(web, 10, 3)
        arguments = {"arrival": arrival, "departure": departure, "apartment_id": 4}
        first = await web.client.post(
            "/v1/tools/check-availability", json=arguments, headers=bearer(raw)
        )
        web.enrolled.clock.advance(42)
        second = await web.client.post(
            "/v1/tools/check-availability", json=arguments, headers=bearer(raw)
        )
        status = await web.client.post(
            "/v1/tools/get-reservation-status",
            json={"reservation_id": GUEST_RESERVATION},
            headers=bearer(raw),
        )
        assert first.status_code == second.status_code == 200, first.text
        assert second.json()["meta"]["source"] == "cache"

        calls = await logged(web)

    assert [(c.name, c.transport, c.kind) for c in calls] == [
        ("check-availability", "http", "tool"),
        ("check-availability", "http", "tool"),
        ("get-reservation-status", "http", "tool"),
    ]
    fresh, cached, looked_up = calls
    assert (fresh.outcome, fresh.source, fresh.age_s) == ("ok", "upstream", 0.0)
    assert (cached.outcome, cached.source, cached.age_s) == ("ok", "cache", 42.0)
    assert cached.at - fresh.at == timedelta(seconds=42)
    # Dates and the apartment are kept (they name no one); the reservation id never.
    assert fresh.arguments == arguments
    assert looked_up.arguments == {}
    assert looked_up.status == status.status_code
    for call in calls:
        assert call.key_label == LABEL
        assert call.key_prefix == raw[:12]
        assert call.latency_ms >= 0
    # Nothing of the answers is stored, and no column holds the key or the reservation.
    rows = await stored_rows_after(database_url)
    text = json.dumps(rows, default=str)
    assert raw not in text
    assert str(GUEST_RESERVATION) not in text
    answer = json.dumps(first.json()["data"])
    for value in _strings(first.json()["data"]):
        if len(value) > 3 and value not in (arrival, departure):
            assert value not in text, f"answer content {value!r} stored"
    assert answer  # the answer had content to leak


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


async def stored_rows_after(database_url: str) -> list[dict[str, Any]]:
    async with open_database(database_url) as engine, session_factory(engine)() as session:
        rows = (await session.scalars(select(ToolCall))).all()
    return [{c.name: getattr(row, c.name) for c in ToolCall.__table__.columns} for row in rows]


async def test_a_tool_call_over_mcp_is_logged_as_mcp_with_its_key_label(
    database_url: str,
) -> None:
    async with web_sandbox(database_url) as web:
        raw = await mint(web, label="mcp assistant")
        night = dates(web, 0, 1)[0]
        async with mcp_client(web, raw) as client:
            result = await client.call_tool("get-in-house-guests", {"date": night})
            refused = await client.call_tool("check-availability", {"arrival": "tomorrow"})
        assert not result.is_error
        assert refused.is_error

        calls = await logged(web)

    assert [(c.name, c.transport, c.outcome) for c in calls] == [
        ("get-in-house-guests", "mcp", "ok"),
        ("check-availability", "mcp", "error"),
    ]
    answered, failed = calls
    assert answered.source == "upstream"
    assert answered.arguments == {"date": night}
    assert (answered.key_label, answered.key_prefix) == ("mcp assistant", raw[:12])
    assert (failed.error_code, failed.status, failed.source) == ("invalid_arguments", 422, None)
    assert failed.arguments == {}  # "tomorrow" is not a date: not kept


async def test_errors_and_stale_answers_are_logged_with_their_code_and_age(
    database_url: str,
) -> None:
    async with web_sandbox(database_url) as web:
        raw = await mint(web, TOOLS_READ, OPERATIONS_READ)
        await web.client.post("/v1/tools/get-in-house-guests", json={}, headers=bearer(raw))
        bad = await web.client.post(
            "/v1/tools/get-in-house-guests", content=b"[1]", headers=bearer(raw)
        )
        read = await web.client.post(
            "/v1/operations/reservations/get-list", json={}, headers=bearer(raw)
        )
        # The booking system refuses the password: a cached answer is served, marked stale.
        web.enrolled.clock.advance(30)
        await web.gateway.facilities.mark_error(web.hotel_id, "password changed")
        stale = await web.client.post("/v1/tools/get-in-house-guests", json={}, headers=bearer(raw))
        assert bad.status_code == 422
        assert read.status_code == 200, read.text
        assert stale.json()["meta"]["stale"] is True

        calls = await logged(web)

    assert [(c.name, c.kind, c.outcome, c.error_code) for c in calls] == [
        ("get-in-house-guests", "tool", "ok", None),
        ("get-in-house-guests", "tool", "error", "invalid_json"),
        ("reservations/get-list", "operation", "ok", None),
        ("get-in-house-guests", "tool", "stale", None),
    ]
    assert calls[2].source == "upstream" and calls[2].arguments == {}
    assert (calls[3].source, calls[3].age_s) == ("cache", 30.0)


async def test_upstream_successes_and_failures_reach_the_health_table(database_url: str) -> None:
    async with web_sandbox(database_url) as web:
        raw = await mint(web)
        await web.client.post("/v1/tools/get-in-house-guests", json={}, headers=bearer(raw))
        succeeded_at = web.enrolled.clock.now()
        await flush_gateway_usage(web.gateway)
        facility = await web.gateway.facilities.get(web.hotel_id)
        health = await web.gateway.gateway.call_log.upstream_health(facility.id)
    assert health is not None
    assert health.last_success_at == succeeded_at
    assert health.last_failure_at is None


def _tools() -> dict[str, Any]:
    return load_tools()


def test_only_dates_and_the_apartment_id_are_kept_of_a_tools_arguments() -> None:
    tools = _tools()
    assert argument_shape(
        tools["check-availability"],
        {"arrival": "2026-12-01", "departure": "2026-12-04", "apartment_id": 7, "guest": "Ada"},
    ) == {"arrival": "2026-12-01", "departure": "2026-12-04", "apartment_id": 7}
    assert argument_shape(tools["get-reservation-status"], {"reservation_id": 5}) == {}
    assert (
        argument_shape(
            tools["get-checkin-instructions"], {"reservation_id": 5, "apartment_id": True}
        )
        == {}
    )
    assert argument_shape(tools["get-in-house-guests"], {"date": "Mario Rossi"}) == {}


# --- retention and bounds -------------------------------------------------------------------


async def add_facility_row(sessions: Any, now: datetime) -> int:
    async with sessions.begin() as session:
        row = Facility(
            hotel_id=f"9{uuid.uuid4().int % 10**8}",
            username="api12345",
            kind="partner",
            password_enc="v1:x",
            integration_id=str(uuid.uuid4()),
            created_at=now,
            updated_at=now,
        )
        session.add(row)
        await session.flush()
        return row.id


def record(log: CallLog, facility_id: int, name: str = "get-in-house-guests") -> None:
    call = log.start(
        facility_id, kind="tool", name=name, transport="http", key_prefix="pgw_abcdefgh"
    )
    log.answered(call, {"source": "cache", "age_s": 3.0, "stale": False})


async def test_the_purge_removes_calls_past_the_retention_and_beyond_each_facilitys_bound(
    database_url: str,
) -> None:
    async with web_sandbox(database_url) as web:
        clock = web.enrolled.clock
        facility_id, call_log = await web.facility_id_and_call_log()
        record(call_log, facility_id)
        clock.advance(31 * 86400)  # past the default 30 days
        record(call_log, facility_id, "check-availability")
        await call_log.flush()

        purged = await purge_tool_calls(web.gateway)

        assert purged == {
            "expired": 1,
            "trimmed": 0,
            "retention_days": 30,
            "max_per_facility": 100_000,
        }
        assert [c.name for c in (await call_log.page(ToolCallFilter(facility_id))).calls] == [
            "check-availability"
        ]
        # A facility's bound: the oldest calls beyond it go first.
        bounded = CallLog(clock, web.web.customers.sessions, max_rows_per_facility=2)
        for name in ("a", "b", "c"):
            clock.advance(1)
            record(bounded, facility_id, name)
        await bounded.flush()
        assert await bounded.purge(clock.now()) == {"expired": 0, "trimmed": 2}
        kept = (await bounded.page(ToolCallFilter(facility_id))).calls
        assert [c.name for c in kept] == ["c", "b"]


async def test_a_failed_flush_keeps_the_calls_and_the_buffer_drops_its_oldest_beyond_its_bound(
    tmp_path: Any,
) -> None:
    clock = ManualClock(datetime(2026, 11, 26, 9, 0, tzinfo=UTC))
    # A database without the tables: every write fails.
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}")
    try:
        call_log = CallLog(clock, session_factory(engine), max_pending=3)
        for name in ("a", "b", "c", "d"):
            record(call_log, 1, name)
        assert [c.name for c in call_log.pending()] == ["b", "c", "d"]
        with pytest.raises(Exception, match="no such table"):
            await call_log.flush()
        # Back in memory for the next flush, with what came since (still within the bound).
        record(call_log, 1, "e")
        assert [c.name for c in call_log.pending()] == ["c", "d", "e"]
    finally:
        await engine.dispose()


# --- several replicas on one PostgreSQL database --------------------------------------------


@pytest.mark.postgres
async def test_replicas_write_their_own_rows_and_the_latest_upstream_outcome_wins(
    postgres_url: str,
) -> None:
    clock = ManualClock(datetime(2026, 11, 26, 9, 0, tzinfo=UTC))
    async with open_database(postgres_url) as first, open_database(postgres_url) as second:
        facility_id = await add_facility_row(session_factory(first), clock.now())
        one = CallLog(clock, session_factory(first))
        two = CallLog(clock, session_factory(second))
        record(one, facility_id, "from-one")
        one.upstream_succeeded(facility_id)
        clock.advance(5)
        record(two, facility_id, "from-two")
        two.upstream_succeeded(facility_id)
        two.upstream_failed(facility_id, "pms_unavailable")
        later = clock.now()
        # The later replica flushes first: the earlier success must not overwrite it.
        assert (await two.flush()).calls == 1
        assert (await one.flush()).calls == 1
        calls = (await one.page(ToolCallFilter(facility_id))).calls
        health = await one.upstream_health(facility_id)
    assert [c.name for c in calls] == ["from-two", "from-one"]
    assert health is not None
    assert (health.last_success_at, health.last_failure_at) == (later, later)
    assert health.last_failure_code == "pms_unavailable"
