"""Onboarding runs and step results as the runner, the CLI and the console use them.

Each call is one transaction over :class:`pmsgate.storage.onboarding.OnboardingRepository`;
the checklist (latest result per step, dry runs left out) and the confirmations (latest
result a person recorded) are read from the results here.
"""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import Clock, SystemClock
from pmsgate.storage.models import OnboardingRunStatus
from pmsgate.storage.onboarding import (
    NewStepResult,
    OnboardingRepository,
    RunView,
    StepResultView,
)

# Concurrent runs of one customer taking the same run number: tried this often.
START_ATTEMPTS = 3


class OnboardingRecords:
    """Starts and finishes runs, records step results, reads checklists."""

    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], clock: Clock | None = None
    ) -> None:
        self._sessions = sessions
        self._clock = clock or SystemClock()

    async def start_run(self, student_id: str, *, dry_run: bool) -> RunView:
        """Record the start of a run (numbered after the customer's last one)."""
        student_id = student_id.strip()
        for attempt in range(START_ATTEMPTS):
            try:
                async with self._sessions.begin() as session:
                    return await OnboardingRepository(session).add_run(
                        student_id, dry_run=dry_run, started_at=self._clock.now()
                    )
            except IntegrityError:
                # Another run of the customer took this number at the same moment.
                if attempt == START_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def finish_run(
        self,
        run_id: str,
        status: OnboardingRunStatus,
        *,
        route: str | None = None,
        ended_at_step: str | None = None,
        error_code: str | None = None,
        message: str | None = None,
    ) -> None:
        """Record how a run ended."""
        async with self._sessions.begin() as session:
            await OnboardingRepository(session).finish_run(
                run_id,
                status,
                finished_at=self._clock.now(),
                route=route,
                ended_at_step=ended_at_step,
                error_code=error_code,
                message=message,
            )

    async def record(self, new: NewStepResult) -> StepResultView:
        """Store one step result."""
        async with self._sessions.begin() as session:
            return await OnboardingRepository(session).record(new, recorded_at=self._clock.now())

    async def results(self, student_id: str, *, run_id: str | None = None) -> list[StepResultView]:
        """Every result of the customer (of one run, when given), oldest first."""
        async with self._sessions() as session:
            return await OnboardingRepository(session).results(student_id.strip(), run_id=run_id)

    async def checklist(self, student_id: str) -> dict[str, StepResultView]:
        """The latest result per step id, dry runs left out."""
        latest: dict[str, StepResultView] = {}
        for result in await self.results(student_id):
            if not result.dry_run:
                latest[result.step_id] = result
        return latest

    async def confirmations(self, student_id: str) -> dict[str, StepResultView]:
        """The latest result recorded by a person, per step id."""
        latest: dict[str, StepResultView] = {}
        for result in await self.results(student_id):
            if result.recorded_by == "person":
                latest[result.step_id] = result
        return latest

    async def runs(self, student_id: str) -> list[RunView]:
        """The customer's runs, oldest first."""
        async with self._sessions() as session:
            return await OnboardingRepository(session).runs(student_id.strip())

    async def last_run(self, student_id: str, *, dry_run: bool | None = False) -> RunView | None:
        """The customer's most recent run (real ones by default)."""
        runs = [
            run for run in await self.runs(student_id) if dry_run is None or run.dry_run is dry_run
        ]
        return runs[-1] if runs else None
