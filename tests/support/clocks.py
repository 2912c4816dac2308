"""Waiting in tests without waiting (an injected sleep that moves the ManualClock), and the
clock of a replica whose time is off."""

from __future__ import annotations

import datetime as dt

import anyio

from pmsgate.clock import Clock, ManualClock


class RecordingSleep:
    """An injected ``sleep`` that moves the ManualClock instead of waiting, and keeps
    every wait it was asked for in ``calls``."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)
        self.clock.advance(seconds)
        await anyio.lowlevel.checkpoint()


class SkewedClock:
    """Another replica's clock: ``base`` plus a fixed offset (NTP is never perfect)."""

    def __init__(self, base: Clock, offset_s: float) -> None:
        self._base = base
        self._offset = dt.timedelta(seconds=offset_s)

    def now(self) -> dt.datetime:
        return self._base.now() + self._offset
