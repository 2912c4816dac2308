"""AuditTrail: events recorded in their own transaction or the caller's, never with a secret.

On SQLite and, when PMSGATE_TEST_DATABASE_URL is set, PostgreSQL.
"""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.audit import Actor, AuditAction, AuditDetailsError, AuditTrail, Outcome
from pmsgate.clock import ManualClock
from pmsgate.customers.registry import Customers
from pmsgate.gateway.http_front import HttpFrontMiddleware
from pmsgate.request_context import current_request_id
from pmsgate.storage.audit import AuditFilter
from pmsgate.storage.customers import CustomerProfile

pytestmark = pytest.mark.anyio

ADMIN = Actor.admin("ops@example.com")


@pytest.fixture
def trail(sessions: async_sessionmaker[AsyncSession], clock: ManualClock) -> AuditTrail:
    return AuditTrail(sessions, clock, retention_days=30)


async def _all(trail: AuditTrail) -> list[str]:
    return [e.action for e in (await trail.page(AuditFilter(), limit=500)).events]


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "new_password",
        "token",
        "access_token",
        "api_key",
        "apiKey",
        "secret",
        "client_secret",
        "Authorization",
        "cookie",
    ],
)
async def test_a_details_key_that_looks_like_a_secret_is_a_programming_error(
    trail: AuditTrail, key: str
) -> None:
    with pytest.raises(AuditDetailsError):
        await trail.record(
            AuditAction.CREDENTIALS_CHANGED, actor=ADMIN, subject="facility:H1", details={key: "x"}
        )
    with pytest.raises(AuditDetailsError):
        await trail.record(
            AuditAction.CREDENTIALS_CHANGED,
            actor=ADMIN,
            subject="facility:H1",
            details={"outer": [{key: "x"}]},
        )
    assert await _all(trail) == []  # refused before anything was written


async def test_values_are_scrubbed_and_bounded(trail: AuditTrail) -> None:
    raw_key = "pgw_" + "A" * 43
    event = await trail.record(
        AuditAction.KEY_USED_FOR_WRITE,
        actor=Actor.gateway_key(raw_key[:12]),
        subject="facility:H1\x00\nforged line",
        details={
            "header": "Bearer abc.def.ghi",
            "basic": "Basic dXNlcjpwYXNz",
            "key": raw_key,
            "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
            "long": "y" * 5000,
            "many": list(range(80)),
            "operation": "reservations/add-payment",
            "idempotency_key": "idem-1",
        },
    )
    assert event is not None
    text = repr(event)
    assert "abc.def.ghi" not in text and "dXNlcjpwYXNz" not in text
    assert raw_key not in text and "c2lnbmF0dXJl" not in text
    assert "\x00" not in event.subject and "\n" not in event.subject
    assert len(event.details["long"]) <= 300
    assert len(event.details["many"]) == 51
    assert event.details["operation"] == "reservations/add-payment"
    assert event.details["idempotency_key"] == "idem-1"


async def test_details_that_are_not_json_values_are_refused(trail: AuditTrail) -> None:
    with pytest.raises(AuditDetailsError):
        await trail.record(
            AuditAction.ADMIN_ACTION, actor=ADMIN, subject="x", details={"what": object()}
        )
    with pytest.raises(AuditDetailsError):
        deep: dict[str, object] = {"a": {"b": {"c": {"d": {"e": 1}}}}}
        await trail.record(AuditAction.ADMIN_ACTION, actor=ADMIN, subject="x", details=deep)


async def test_record_in_rolls_back_with_the_caller_and_record_stands_on_its_own(
    trail: AuditTrail, sessions: async_sessionmaker[AsyncSession]
) -> None:
    with pytest.raises(RuntimeError):
        async with sessions.begin() as session:
            await trail.record_in(session, AuditAction.KEY_MINTED, actor=ADMIN, subject="key:a")
            raise RuntimeError("the operation failed")
    # After the failed unit of work (never inside a write transaction: SQLite has one writer).
    await trail.record(
        AuditAction.KEY_MINTED,
        actor=ADMIN,
        subject="key:a",
        outcome=Outcome.FAILURE,
        details={"error": "boom"},
    )
    async with sessions.begin() as session:
        await trail.record_in(session, AuditAction.KEY_REVOKED, actor=ADMIN, subject="key:b")

    events = (await trail.page(AuditFilter())).events
    assert [(e.action, e.outcome) for e in events] == [
        ("key.revoked", "success"),
        ("key.minted", "failure"),
    ]


async def test_customer_and_facility_are_resolved_by_name(
    trail: AuditTrail, sessions: async_sessionmaker[AsyncSession], clock: ManualClock
) -> None:
    await Customers(sessions, clock).add(
        CustomerProfile(student_id="stu-9", email="o@example.com", name="O", kind="partner")
    )
    event = await trail.record(
        AuditAction.CONSOLE_ACTION,
        actor=Actor.customer_user("o@example.com"),
        subject="customer:stu-9",
        student_id="stu-9",
    )
    assert event is not None and event.customer_id is not None
    owner = await trail.owner("stu-9")
    assert owner.customer_id == event.customer_id
    assert [e.id for e in (await trail.page(AuditFilter(owner=owner))).events] == [event.id]


async def test_an_event_recorded_while_serving_a_request_carries_its_id_and_client(
    trail: AuditTrail,
) -> None:
    app = FastAPI()

    @app.post("/act")
    async def act() -> dict[str, str | None]:
        await trail.record(AuditAction.ADMIN_ACTION, actor=ADMIN, subject="thing")
        return {"rid": current_request_id()}

    app.add_middleware(HttpFrontMiddleware, metrics=lambda: None, tracing=lambda: None)
    transport = httpx.ASGITransport(app=app, client=("198.51.100.7", 5000))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        given = await client.post("/act", headers={"X-Request-ID": "abc-123"})
        made = await client.post("/act", headers={"X-Request-ID": "bad id\twith junk"})

    assert given.headers["x-request-id"] == "abc-123" == given.json()["rid"]
    assert made.headers["x-request-id"] != "bad id\twith junk"
    events = (await trail.page(AuditFilter())).events
    assert [e.request_id for e in events] == [made.headers["x-request-id"], "abc-123"]
    assert {e.client_address for e in events} == {"198.51.100.7"}
    assert current_request_id() is None  # nothing leaks out of the request


async def test_purge_expired_keeps_the_retention_period_and_records_itself(
    trail: AuditTrail, clock: ManualClock
) -> None:
    await trail.record(AuditAction.SIGNIN_FAILED, actor=Actor.system(), subject="user:a")
    clock.advance(timedelta(days=31).total_seconds())
    await trail.record(AuditAction.SIGNIN_SUCCEEDED, actor=ADMIN, subject="user:b")

    removed = await trail.purge_expired()

    assert removed == 1
    events = (await trail.page(AuditFilter())).events
    assert [e.action for e in events] == ["audit.purged", "signin.succeeded"]
    assert events[0].details["removed"] == 1


def test_actors_and_actions_are_checked() -> None:
    assert str(Actor.gateway_key("pgw_abcdefgh")) == "gateway_key:pgw_abcdefgh"
    with pytest.raises(ValueError):
        Actor("robot", "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Actor.admin("")
    assert AuditAction("key.minted") is AuditAction.KEY_MINTED
