"""Which gateway processes run: per-process Redis keys, or in-process knowledge without Redis."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from pmsgate.gateway.locks import LocalLiveness, RedisLiveness, liveness_for

pytestmark = pytest.mark.anyio


async def test_without_redis_only_this_process_is_alive():
    liveness = await liveness_for(None)
    assert isinstance(liveness, LocalLiveness)
    assert await liveness.is_alive(liveness.instance_id)
    assert not await liveness.is_alive("an-earlier-process")


@pytest.mark.redis
async def test_replicas_see_each_other_until_one_stops(redis_url: str, redis_namespace: str):
    redis = Redis.from_url(redis_url)
    try:
        first = RedisLiveness(redis, namespace=redis_namespace, ttl_s=15)
        second = RedisLiveness(redis, namespace=redis_namespace, ttl_s=15)
        await first.start()
        await second.start()
        assert first.instance_id != second.instance_id
        assert await second.is_alive(first.instance_id)
        # Killed, a process stops refreshing its key and it expires within the TTL.
        ttl_ms = await redis.pttl(f"{redis_namespace}:instance:{first.instance_id}")
        assert 0 < ttl_ms <= 15_000

        await first.aclose()

        assert not await second.is_alive(first.instance_id)
        assert not await second.is_alive("never-started")
        await second.aclose()
    finally:
        await redis.aclose()


async def test_while_redis_cannot_be_asked_every_process_counts_as_alive():
    redis = Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2)
    try:
        liveness = RedisLiveness(redis)
        await liveness.start()  # announcing fails quietly
        assert await liveness.is_alive("another-process")
        await liveness.aclose()
    finally:
        await redis.aclose()
