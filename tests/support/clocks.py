"""Waiting in tests without waiting: an injected sleep that moves the ManualClock."""

from __future__ import annotations

import anyio

from pmsgate.clock import ManualClock


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
