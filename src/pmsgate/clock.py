"""Clocks: the system clock in production, a manual one in tests and emulators."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol

# An injectable ``sleep`` (anyio.sleep in production; one that moves a ManualClock in tests).
Sleep = Callable[[float], Awaitable[None]]


class Clock(Protocol):
    """Something that tells the current time (timezone-aware, UTC)."""

    def now(self) -> datetime: ...


class SystemClock:
    """The real wall clock."""

    def now(self) -> datetime:
        """Current UTC time."""
        return datetime.now(UTC)


class ManualClock:
    """A clock that only moves when told to; for tests, emulators and simulations."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 11, 22, 9, 0, tzinfo=UTC)

    def now(self) -> datetime:
        """The clock's current time."""
        return self._now

    def advance(self, seconds: float) -> datetime:
        """Move the clock forward and return the new time."""
        self._now += timedelta(seconds=seconds)
        return self._now

    def set(self, when: datetime) -> None:
        """Jump to an absolute time."""
        self._now = when


class FastForwardClock:
    """The wall clock, which a setup phase may skip ahead (never back).

    ``pmsgate demo --serve`` onboards its customers with waits that skip the clock
    instead of sleeping (the emulators and the services share this clock, so their rate
    windows move together), then serves in real time from the skipped-to moment on.
    """

    def __init__(self) -> None:
        self._offset = timedelta(0)

    def now(self) -> datetime:
        """The wall-clock time plus every skip so far."""
        return datetime.now(UTC) + self._offset

    def advance(self, seconds: float) -> datetime:
        """Skip ahead and return the new time."""
        self._offset += timedelta(seconds=max(0.0, seconds))
        return self.now()
