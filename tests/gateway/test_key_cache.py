"""The gateway-key check remembered for a few seconds: no query on a cached tool call."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from pmsgate.clock import ManualClock
from pmsgate.errors import PmsgateError
from pmsgate.gateway.facilities import FacilityService
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


async def test_a_key_checked_a_moment_ago_is_answered_without_a_query(
    engine: AsyncEngine, clock: ManualClock
) -> None:
    service = service_on(engine, clock, CACHE_S)
    facility, key = await service.add(new_facility())
    await service.authenticate(key)
    with counted_queries(engine) as statements:
        again = await service.authenticate(key)
    assert statements == []
    assert again.hotel_id == facility.hotel_id

    clock.advance(CACHE_S + 0.1)
    with counted_queries(engine) as statements:
        await service.authenticate(key)
    assert len(statements) == 1


async def test_without_the_cache_every_check_reads_the_database(
    engine: AsyncEngine, clock: ManualClock
) -> None:
    service = service_on(engine, clock, 0)
    _, key = await service.add(new_facility())
    await service.authenticate(key)
    with counted_queries(engine) as statements:
        await service.authenticate(key)
    assert len(statements) == 1


async def test_a_key_revoked_in_this_process_is_refused_at_once(
    engine: AsyncEngine, clock: ManualClock
) -> None:
    service = service_on(engine, clock, CACHE_S)
    facility, key = await service.add(new_facility())
    await service.authenticate(key)
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
