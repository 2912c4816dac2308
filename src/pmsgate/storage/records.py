"""What a records service is: each of its calls one transaction over a repository.

A records service (the onboarding runs, the knowledge sync's page states and jobs) opens
a session per call, on the process's session factory, and stamps what it stores with its
clock; the repositories it uses run their queries in that session and never commit.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import Clock, SystemClock


class Records:
    """One transaction per call, on ``sessions``; times from ``clock`` (the system's)."""

    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], clock: Clock | None = None
    ) -> None:
        self._sessions, self._clock = sessions, clock or SystemClock()
