"""The gateway-key check remembered for a few seconds: no query on a cached tool call."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import AsyncIterator, Awaitable, Iterator
from contextlib import asynccontextmanager, contextmanager

import anyio
import pytest
from redis.asyncio import Redis
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from pmsgate.clock import ManualClock
from pmsgate.errors import PmsgateError
from pmsgate.gateway.facilities import FacilityView
from pmsgate.gateway.facility_service import FacilityService
from pmsgate.gateway.key_cache import KeyChanges
from pmsgate.gateway.vault import Vault
from pmsgate.storage.db import open_database, session_factory

from .facility_support import KEY_1, PARTNER_KEY, new_facility

pytestmark = pytest.mark.anyio

CACHE_S = 5.0


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    async with open_database(database_url, migrate=False) as opened:
        yield opened


def service_on(engine: AsyncEngine, clock: ManualClock, cache_s: float) -> FacilityService:
    """A facility service; two of them on one database stand for two processes."""
    return FacilityService(
        session_factory(engine), Vault(KEY_1), clock, PARTNER_KEY, key_cache_s=cache_s
    )


@contextmanager
def counted_queries(engine: AsyncEngine) -> Iterator[list[str]]:
    """Every SQL statement the engine sends while the block runs."""
    statements: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        statements.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", record)


async def refused(service: FacilityService, key: str) -> str:
    with pytest.raises(PmsgateError) as caught:
        await service.authenticate(key)
    return caught.value.code


async def queries_of(engine: AsyncEngine, call: Awaitable[object]) -> int:
    """How many statements ``call`` sent to the database."""
    with counted_queries(engine) as statements:
        await call
    return len(statements)


async def checked_once(
    engine: AsyncEngine, clock: ManualClock
) -> tuple[FacilityService, FacilityView, str]:
    """A service caching key checks, a facility, and its key, checked once."""
    service = service_on(engine, clock, CACHE_S)
    facility, key = await service.add(new_facility())
    await service.authenticate(key)
    return service, facility, key


async def test_a_key_checked_a_moment_ago_is_answered_without_a_query(
    engine: AsyncEngine, clock: ManualClock
) -> None:
    service, facility, key = await checked_once(engine, clock)
    with counted_queries(engine) as statements:
        again = await service.authenticate(key)
    assert statements == []
    assert again.hotel_id == facility.hotel_id

    clock.advance(CACHE_S + 0.1)
    assert await queries_of(engine, service.authenticate(key)) == 1


async def test_without_the_cache_every_check_reads_the_database(
    engine: AsyncEngine, clock: ManualClock
) -> None:
    service = service_on(engine, clock, 0)
    _, key = await service.add(new_facility())
    await service.authenticate(key)
    assert await queries_of(engine, service.authenticate(key)) == 1


async def test_a_key_revoked_in_this_process_is_refused_at_once(
    engine: AsyncEngine, clock: ManualClock
) -> None:
    service, facility, key = await checked_once(engine, clock)
    [view] = await service.list_keys(facility.hotel_id)
    await service.revoke_key(facility.hotel_id, view.id)
    assert await refused(service, key) == "invalid_gateway_key"


async def test_a_key_revoked_by_another_process_is_refused_once_the_cache_expires(
    engine: AsyncEngine, clock: ManualClock
) -> None:
    gateway = service_on(engine, clock, CACHE_S)
    admin_cli = service_on(engine, clock, 0)
    facility, key = await admin_cli.add(new_facility())
    await gateway.authenticate(key)
    [view] = await admin_cli.list_keys(facility.hotel_id)
    await admin_cli.revoke_key(facility.hotel_id, view.id)

    await gateway.authenticate(key)  # the documented delay: at most CACHE_S
    clock.advance(CACHE_S + 0.1)
    assert await refused(gateway, key) == "invalid_gateway_key"


async def test_an_unknown_key_is_never_remembered(engine: AsyncEngine, clock: ManualClock) -> None:
    service = service_on(engine, clock, CACHE_S)
    _, key = await service.add(new_facility())
    wrong = key[:-4] + ("aaaa" if not key.endswith("aaaa") else "bbbb")
    assert await refused(service, wrong) == "invalid_gateway_key"
    with counted_queries(engine) as statements:
        assert await refused(service, wrong) == "invalid_gateway_key"
    assert len(statements) == 1


# --- changes published through Redis (issue 25) ---


@asynccontextmanager
async def listening(redis: Redis, namespace: str) -> AsyncIterator[KeyChanges]:
    """A process's subscription to key changes, subscribed before the block starts."""
    async with KeyChanges(redis, namespace=namespace) as changes:
        with anyio.fail_after(5):
            await changes.subscribed.wait()
        yield changes


def replica_on(
    engine: AsyncEngine, clock: ManualClock, changes: KeyChanges, cache_s: float = CACHE_S
) -> FacilityService:
    return FacilityService(
        session_factory(engine),
        Vault(KEY_1),
        clock,
        PARTNER_KEY,
        key_cache_s=cache_s,
        key_changes=changes,
    )


@pytest.mark.redis
async def test_a_revocation_scopes_and_an_expiry_reach_another_process_within_a_second(
    engine: AsyncEngine, clock: ManualClock, redis_client: Redis, redis_namespace: str
) -> None:
    async with (
        listening(redis_client, redis_namespace) as gateway_changes,
        listening(redis_client, redis_namespace) as admin_changes,
    ):
        gateway = replica_on(engine, clock, gateway_changes)
        admin = replica_on(engine, clock, admin_changes, cache_s=0)
        facility, key = await admin.add(new_facility())
        hotel_id = facility.hotel_id
        second_view, second = await admin.mint_key(hotel_id, scopes=["tools:read"])
        third_view, third = await admin.mint_key(hotel_id, scopes=["tools:read"])
        for each in (key, second, third):
            await gateway.authenticate(each)  # remembered for CACHE_S
        [first_view, *_] = await admin.list_keys(hotel_id)

        async def seen(count: int) -> float:
            """Seconds until the gateway applied ``count`` changes (at most one allowed)."""
            started = time.perf_counter()
            with anyio.fail_after(1.0):
                await gateway_changes.wait_applied(count)
            return time.perf_counter() - started

        await admin.revoke_key(hotel_id, first_view.id)
        delays = [await seen(1)]
        assert await refused(gateway, key) == "invalid_gateway_key"

        await admin.set_key_scopes(hotel_id, second_view.id, ["operations:read"])
        delays.append(await seen(2))
        with pytest.raises(PmsgateError) as missing:
            await gateway.authenticate(second, "tools:read")
        assert missing.value.code == "scope_missing"

        await admin.rotate_key(hotel_id, third_view.id, dt.timedelta(0))  # ends it at once
        delays.append(await seen(3))
        assert await refused(gateway, third) == "gateway_key_expired"
    # No clock moved: the key cache (5 s) did not expire, the messages did it.
    assert max(delays) < 1.0


@pytest.mark.redis
async def test_a_listener_that_subscribes_again_forgets_what_it_remembered(
    engine: AsyncEngine, clock: ManualClock, redis_client: Redis, redis_namespace: str
) -> None:
    """A change published while a process was not listening (Redis away) is not lost: it
    forgets every remembered key check when it subscribes again."""
    admin = service_on(engine, clock, 0)  # publishes nothing: as if Redis were away
    facility, key = await admin.add(new_facility())
    changes = KeyChanges(redis_client, namespace=redis_namespace)
    gateway = replica_on(engine, clock, changes)
    await gateway.authenticate(key)  # remembered while not listening
    [view] = await admin.list_keys(facility.hotel_id)
    await admin.revoke_key(facility.hotel_id, view.id)
    assert (await gateway.authenticate(key)).hotel_id == facility.hotel_id
    async with changes:
        with anyio.fail_after(5):
            await changes.subscribed.wait()
        assert await refused(gateway, key) == "invalid_gateway_key"


async def test_without_redis_nothing_is_published_and_the_cache_is_the_fallback(
    engine: AsyncEngine, clock: ManualClock
) -> None:
    async with KeyChanges(None) as changes:
        gateway = replica_on(engine, clock, changes)
        admin = replica_on(engine, clock, changes, cache_s=0)
        facility, key = await admin.add(new_facility())
        await gateway.authenticate(key)
        [view] = await admin.list_keys(facility.hotel_id)
        await admin.revoke_key(facility.hotel_id, view.id)
        # One process: its own change clears its own cache (the admin's here, not the
        # gateway's), and nothing else is told.
        assert changes.applied == 0
        await gateway.authenticate(key)
        clock.advance(CACHE_S + 0.1)
        assert await refused(gateway, key) == "invalid_gateway_key"
