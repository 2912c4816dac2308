"""The cost of one permit on Redis: the limiter's one script round trip (issue 25).

Issue 25 made the permit's Lua script answer the window back (each window's count and the
minute's stamps, for the outage budget) and read the recovery fence, and stamps every permit
on the Redis server's clock through a measured offset (one ``TIME`` round trip, best of three,
per ``clock_sync_s``). Still one round trip per permit; a cached tool call takes no permit.

- ``permit``: :meth:`FacilityLimiter.acquire` with room in every window, per permit, over
  500 keys each warmed with 5 permits (so each answer carries 5 to 15 stamps, a busy
  facility's minute);
- ``sync``: one offset measurement (three ``TIME`` round trips).

Run: ``PMSGATE_REDIS_URL=redis://127.0.0.1:6379/0 uv run python -m bench.limiter_permit
[--permits 5000]``. Not a test; it writes under ``pmsgate-bench-permit:*``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

from redis.asyncio import Redis

from pmsgate.clock import SystemClock
from pmsgate.gateway.facilities import Limits
from pmsgate.gateway.limiter import FacilityLimiter
from pmsgate.ratelimit import ClockOffset, RedisTime

NAMESPACE = "pmsgate-bench-permit"


KEYS = 500


async def main(permits: int) -> None:
    redis = Redis.from_url(os.environ.get("PMSGATE_REDIS_URL", "redis://127.0.0.1:6379/0"))
    limiter = FacilityLimiter(clock=SystemClock(), redis=redis, namespace=NAMESPACE)
    roomy = Limits(per_minute=10**9, per_hour=10**9, per_day=10**9)
    try:
        for i in range(KEYS * 5):  # each key's window made (a new one is rebuilt first)
            await limiter.acquire(f"bench-{i % KEYS}", roomy)
        samples = []
        for i in range(permits):
            started = time.perf_counter()
            await limiter.acquire(f"bench-{i % KEYS}", roomy)
            samples.append(time.perf_counter() - started)
        offset = ClockOffset(SystemClock(), RedisTime(redis))
        syncs = []
        for _ in range(200):
            offset.invalidate()
            started = time.perf_counter()
            await offset.sync_if_due()
            syncs.append(time.perf_counter() - started)
        print(
            f"permit: median {statistics.median(samples) * 1e3:.3f} ms, "
            f"p99 {statistics.quantiles(samples, n=100)[98] * 1e3:.3f} ms over {permits}; "
            f"offset sync: median {statistics.median(syncs) * 1e3:.3f} ms "
            f"(offset {offset.offset_ms} ms, error <= {offset.error_ms} ms)"
        )
    finally:
        async for name in redis.scan_iter(match=f"{NAMESPACE}:*"):
            await redis.delete(name)
        await redis.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--permits", type=int, default=5000)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.permits))
