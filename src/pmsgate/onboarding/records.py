"""Onboarding runs and step results as the runner, the CLI and the console use them.

Each call is one transaction over :class:`pmsgate.storage.onboarding.OnboardingRepository`;
the checklist (latest result per step, dry runs left out) and the confirmations (latest
result a person recorded) are read from the results here.
"""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError

from pmsgate.storage.models import OnboardingRunStatus
from pmsgate.storage.onboarding import (
    NewStepResult,
    OnboardingRepository,
    RunView,
    StepResultView,
)
from pmsgate.storage.records import Records
from pmsgate.storage.webhooks import WebhookRepository

# Concurrent runs of one customer taking the same run number: tried this often.
START_ATTEMPTS = 3


class OnboardingRecords(Records):
    """Starts and finishes runs, records step results, reads checklists."""

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
        **ending: str | None,
    ) -> None:
        """Record how a run ended (``ending``: its ``route``, ``ended_at_step``, ``error_code``
        and ``message``, each None when not known); a real run that succeeded emits
        ``onboarding.completed`` (docs/webhooks.md) in the same transaction."""
        now = self._clock.now()
        async with self._sessions.begin() as session:
            repository = OnboardingRepository(session)
            await repository.finish_run(run_id, status, finished_at=now, **ending)
            run = await repository.run(run_id) if status == "succeeded" else None
            if run is not None and not run.dry_run:
                await WebhookRepository(session).add_event(
                    "onboarding.completed",
                    {"run_id": run.id, "run_number": run.number, "route": run.route},
                    occurred_at=now,
                    student_id=run.student_id,
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
