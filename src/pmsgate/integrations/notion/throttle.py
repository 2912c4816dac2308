"""The notes client's throttle: one integration token's requests kept under a rate.

The API allows about 3 requests/second per integration token, with bursts.
:class:`NotionThrottle` keeps this process at or under ``requests_per_second`` (a
pyrate-limiter sliding window timed by the injected clock, waits through the injected
``sleep``), so a sync does not *cause* 429s; a 429's ``Retry-After`` holds it back
whole. Clients sharing one token in a process should share one throttle.
"""

from __future__ import annotations

from fractions import Fraction

import anyio
from pyrate_limiter import Rate

from pmsgate.clock import Clock, Sleep, SystemClock
from pmsgate.ratelimit import RateWindows

DEFAULT_REQUESTS_PER_SECOND = 3.0

# The throttle's one key: the whole client (one integration token) shares one window.
_NOTION_KEY = "notes"


class NotionThrottle:
    """Keeps one integration token's requests at or under a rate, in this process.

    One :class:`~pmsgate.ratelimit.RateWindows` in memory with one key; its waits (and
    a 429's hold) are spent through the injected ``sleep``.
    """

    def __init__(
        self,
        requests_per_second: float = DEFAULT_REQUESTS_PER_SECOND,
        *,
        clock: Clock | None = None,
        sleep: Sleep = anyio.sleep,
    ) -> None:
        if requests_per_second <= 0:
            raise ValueError("requests_per_second must be positive")
        # 3 → 3 per 1 s; 2.5 → 5 per 2 s: a whole number of requests per whole seconds.
        ratio = Fraction(requests_per_second).limit_denominator(1000)
        self.requests_per_second = requests_per_second
        self.rate = Rate(ratio.numerator, 1000 * ratio.denominator)
        self._windows = RateWindows(clock=clock or SystemClock(), retention_ms=self.rate.interval)
        self._sleep = sleep

    def __repr__(self) -> str:
        return f"NotionThrottle(requests_per_second={self.requests_per_second})"

    def hold(self, seconds: float) -> None:
        """Let no request through for ``seconds`` from now (the API asked us to wait)."""
        self._windows.hold(_NOTION_KEY, seconds)

    async def acquire(self) -> None:
        """Wait until one more request fits the rate, then count it."""
        await self._windows.acquire(_NOTION_KEY, [self.rate], self._sleep)
