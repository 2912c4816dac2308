"""Is Redis — the state the replicas share — reachable? One answer for the whole process.

Redis holds what replicas must agree on: the shared limiter window, the cache, the
token-refresh lock, the usage counts on their way to the database. When it goes
away, every user of it asks one :class:`RedisHealth` object instead of failing on
its own:

* :meth:`RedisHealth.use` wraps one piece of Redis work. A redis-py
  ``ConnectionError`` / ``TimeoutError`` (or cashews' wrapper of them) inside it
  marks Redis **down** and becomes :class:`SharedStateUnavailable` — a 503 with
  ``Retry-After`` and the code ``shared_state_unavailable`` — which each user
  either shows to the caller (a token refresh or a write that must be coordinated)
  or catches to fall back to what the process can do alone (the cache's in-process
  copy, the limiter's outage budget, the usage counter in memory).
* While Redis is down, work is not even tried (no connect timeout per call), except
  one probe per ``retry_interval_s``: the first :meth:`use` after the interval tries
  Redis again, and its success marks Redis **up** (a half-open circuit breaker).
  ``/readyz`` probes too (:meth:`check`), so an orchestrator's readiness polling
  also notices the recovery.
* Who must act when Redis is back registers with :meth:`RedisHealth.on_recovery` (the
  limiter writes its outage permits back at once, whoever noticed the recovery).
* Each change of state is logged **once**: ``redis_unavailable`` (with the error's
  type, never the URL or a password) and ``redis_recovered`` (with how long it was
  down) — not one traceback per call. ``pmsgate_redis_up`` (1/0) is the gauge.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

import structlog
from cashews.exceptions import CacheBackendInteractionError
from prometheus_client import Gauge
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from pmsgate.clock import Clock
from pmsgate.errors import PmsgateError

log = structlog.get_logger(__name__)

# What "Redis is unreachable" looks like: redis-py's connection and timeout errors (socket
# errors arrive wrapped in them), and cashews' wrapper of those when it does not suppress them.
REDIS_ERRORS: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    CacheBackendInteractionError,
)


class SharedStateUnavailable(PmsgateError):
    """Redis is unreachable and this work cannot be done safely without it."""

    code = "shared_state_unavailable"
    status = 503
    hint = (
        "The gateway's shared state (Redis) is unreachable; retry after the indicated "
        "time. Operators: check the Redis server of PMSGATE_REDIS_URL."
    )

    def __init__(self, what: str, *, retry_after_s: float = 5.0) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(
            f"The gateway cannot {what} while Redis, which its replicas share, is unreachable.",
            headers={"Retry-After": str(max(1, math.ceil(retry_after_s)))},
        )


class RedisHealth:
    """Up/down state of Redis for one process; logs and measures each change once."""

    def __init__(
        self, clock: Clock, *, retry_interval_s: float = 2.0, gauge: Gauge | None = None
    ) -> None:
        self._clock = clock
        self._retry_interval_s = retry_interval_s
        self._interval = timedelta(seconds=retry_interval_s)
        self._gauge = gauge
        self._down_since: datetime | None = None
        self._next_probe: datetime | None = None
        self._on_recovery: list[Callable[[], None]] = []
        if gauge is not None:
            gauge.set(1)

    def __repr__(self) -> str:
        return f"RedisHealth(available={self.available})"

    @property
    def available(self) -> bool:
        """False from the first failure until a later call or probe succeeds."""
        return self._down_since is None

    @property
    def retry_after_s(self) -> float:
        """What a caller refused for lack of Redis is told to wait."""
        return max(1.0, self._retry_interval_s)

    def on_recovery(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` each time Redis answers again after being down (it must not
        block: start a task for Redis work)."""
        self._on_recovery.append(callback)

    @contextmanager
    def use(self, what: str) -> Iterator[None]:
        """Run Redis work; SharedStateUnavailable when Redis is (or just went) away.

        ``what`` completes "The gateway cannot …" in the caller-facing message.
        """
        if not self._may_try():
            raise SharedStateUnavailable(what, retry_after_s=self.retry_after_s)
        try:
            yield
        except REDIS_ERRORS as error:
            self.failed(error)
            raise SharedStateUnavailable(what, retry_after_s=self.retry_after_s) from None
        self.succeeded()

    async def check(self, redis: Redis) -> bool:
        """Ping Redis now (``/readyz``), whatever the state; record and return the outcome."""
        try:
            await redis.ping()
        except REDIS_ERRORS as error:
            self.failed(error)
            return False
        self.succeeded()
        return True

    def failed(self, error: BaseException) -> None:
        """Redis did not answer: mark it down (logged once per outage)."""
        now = self._clock.now()
        self._next_probe = now + self._interval
        if self._down_since is not None:
            return
        self._down_since = now
        if self._gauge is not None:
            self._gauge.set(0)
        # cashews wraps redis-py's error: name the one that happened.
        if isinstance(error, CacheBackendInteractionError) and error.__cause__ is not None:
            error = error.__cause__
        log.warning(
            "redis_unavailable",
            error_type=type(error).__name__,
            retry_interval_s=self._retry_interval_s,
        )

    def succeeded(self) -> None:
        """Redis answered: mark it up (logged once when it was down)."""
        if self._down_since is None:
            return
        down_for = (self._clock.now() - self._down_since).total_seconds()
        self._down_since = None
        self._next_probe = None
        if self._gauge is not None:
            self._gauge.set(1)
        log.info("redis_recovered", down_for_s=round(max(0.0, down_for), 3))
        for callback in self._on_recovery:
            callback()

    def _may_try(self) -> bool:
        if self._down_since is None:
            return True
        now = self._clock.now()
        if self._next_probe is not None and now < self._next_probe:
            return False
        # One probe per interval: the callers after this one keep falling back meanwhile.
        self._next_probe = now + self._interval
        return True
