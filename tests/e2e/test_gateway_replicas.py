"""Two gateway replicas on one PostgreSQL and one Redis share keys, tokens, limits and cache."""

from __future__ import annotations

import datetime as dt
from contextlib import AsyncExitStack

import anyio
import pytest

from pmsgate.gateway.facilities import Limits
from tests.e2e.conftest import add_seeded_facility, gateway_settings, running_gateway

pytestmark = [pytest.mark.anyio, pytest.mark.postgres, pytest.mark.redis]


@pytest.fixture
async def replicas(postgres_url, redis_url, redis_namespace, kross_http, clock):
    from pmsgate.storage.db import Base, create_engine, upgrade

    engine = create_engine(postgres_url)
    async with engine.begin() as connection:
        await connection.run_sync(Base.metadata.drop_all)
        from sqlalchemy import text

        await connection.execute(text("DROP TABLE IF EXISTS alembic_version"))
    await upgrade(engine)
    await engine.dispose()
    settings = gateway_settings(postgres_url, redis_url, redis_namespace=redis_namespace)
    async with AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(running_gateway(settings, kross_http, clock))
            for _ in range(2)
        ]


async def test_two_replicas_refresh_the_token_once_and_share_the_cache(replicas, kross_store):
    first, second = replicas
    record, key = await add_seeded_facility(first.services, kross_store)
    answers = []

    async def call(replica) -> None:
        answers.append((await replica.tool("get-incomplete-portals", key)).status_code)

    async with anyio.create_task_group() as group:
        for index in range(200):
            group.start_soon(call, replicas[index % 2])
    assert answers.count(200) == 200
    assert kross_store.stats.tokens_issued[record["hotel_id"]] == 1
    assert kross_store.stats.requests_by_operation["reservations/get-list"] == 1
    assert second.services.facilities is not first.services.facilities


async def test_two_replicas_never_exceed_a_facility_limit_together(replicas, kross_store, clock):
    first = replicas[0]
    record, key = await add_seeded_facility(first.services, kross_store)
    await first.services.facilities.set_limits(
        record["hotel_id"], Limits(per_minute=5, per_hour=300, per_day=5000)
    )
    apartments = [a["id_room_type"] for a in record["apartments"]]
    statuses = []

    async def call(replica, apartment: int, day: int) -> None:
        # Beyond the cached 90-day availability window: every range is its own upstream read.
        arrival = clock.now().date() + dt.timedelta(days=120 + day)
        answer = await replica.tool(
            "check-availability",
            key,
            apartment_id=apartment,
            arrival=arrival.isoformat(),
            departure=(arrival + dt.timedelta(days=2)).isoformat(),
        )
        statuses.append(answer.status_code)

    async with anyio.create_task_group() as group:
        for index in range(20):
            group.start_soon(call, replicas[index % 2], apartments[index % len(apartments)], index)
    # Distinct ranges: each call needs its own upstream read, but only 5 fit in the minute.
    assert kross_store.stats.requests_by_hotel[record["hotel_id"]] <= 5
    assert kross_store.stats.rate_limited.total() == 0
    assert statuses.count(429) >= 20 - 5
