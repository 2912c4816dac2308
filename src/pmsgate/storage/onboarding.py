"""Onboarding runs and step results (docs/requirements.md R20): the only queries on their tables.

A run is one `pmsgate onboard` of one customer; each step it checks leaves a
result (done or not, status, JSON evidence, message, what a person must do and
by when). A person's `confirm` of a manual step is a result too, recorded by
``person`` without a run. The checklist is the latest result per step, ignoring
dry runs (they show what would happen, they change no state).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy import func, select, update

from pmsgate.storage.models import (
    OnboardingRecorder,
    OnboardingRun,
    OnboardingRunStatus,
    OnboardingStepResult,
    OnboardingStepStatus,
)
from pmsgate.storage.repository import Repository
from pmsgate.storage.views import json_fields, view_of

MAX_MESSAGE = 2000


def new_run_id() -> str:
    """A fresh run id, ``run-`` followed by 24 hex digits."""
    return f"run-{secrets.token_hex(12)}"


@dataclass(frozen=True)
class RunView:
    """A stored onboarding run."""

    id: str
    student_id: str
    number: int
    status: OnboardingRunStatus
    route: str | None
    dry_run: bool
    started_at: datetime
    finished_at: datetime | None
    ended_at_step: str | None
    error_code: str | None
    message: str | None

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view."""
        return json_fields(self)


@dataclass(frozen=True)
class StepOutcome:
    """Which step of whose onboarding a result is for, and how it came out."""

    student_id: str
    step_id: str
    number: int
    kind: str
    status: OnboardingStepStatus
    done: bool


@dataclass(frozen=True)
class NewStepResult(StepOutcome):
    """What recording one step's result needs."""

    evidence: dict[str, Any]
    message: str = ""
    fix: str | None = None
    waiting_for: str | None = None
    due: date | None = None
    run_id: str | None = None
    dry_run: bool = False
    recorded_by: OnboardingRecorder = "system"
    person: str | None = None


@dataclass(frozen=True)
class StepResultView(StepOutcome):
    """A stored step result."""

    id: int
    run_id: str | None
    dry_run: bool
    evidence: dict[str, Any]
    message: str
    fix: str | None
    waiting_for: str | None
    due: date | None
    recorded_at: datetime
    recorded_by: OnboardingRecorder
    person: str | None

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view."""
        return {
            "step": self.step_id,
            "number": self.number,
            "kind": self.kind,
            "status": self.status,
            "done": self.done,
            "dry_run": self.dry_run,
            "message": self.message,
            "evidence": self.evidence,
            "fix": self.fix,
            "waiting_for": self.waiting_for,
            "due": self.due.isoformat() if self.due else None,
            "recorded_at": self.recorded_at.isoformat(),
            "recorded_by": self.recorded_by,
            "person": self.person,
            "run_id": self.run_id,
        }


def _run_view(row: OnboardingRun) -> RunView:
    return view_of(RunView, row)


def _result_view(row: OnboardingStepResult) -> StepResultView:
    return view_of(
        StepResultView,
        row,
        evidence=dict(row.evidence or {}),
    )


def _clip(text: str | None) -> str | None:
    return text[:MAX_MESSAGE] if text is not None else None


class OnboardingRepository(Repository):
    """Adds and finishes runs, records step results and reads them, in the caller's session;
    never commits (a run number taken at the same moment raises ``IntegrityError``)."""

    async def add_run(self, student_id: str, *, dry_run: bool, started_at: datetime) -> RunView:
        """Add a run numbered after the customer's last one (flushed)."""
        last = await self._session.scalar(
            select(func.max(OnboardingRun.number)).where(OnboardingRun.student_id == student_id)
        )
        row = OnboardingRun(
            id=new_run_id(),
            student_id=student_id,
            number=(last or 0) + 1,
            status="running",
            route=None,
            dry_run=dry_run,
            started_at=started_at,
        )
        await self._add(row)
        return _run_view(row)

    async def finish_run(
        self,
        run_id: str,
        status: OnboardingRunStatus,
        *,
        finished_at: datetime,
        route: str | None = None,
        ended_at_step: str | None = None,
        error_code: str | None = None,
        message: str | None = None,
    ) -> None:
        """Record how a run ended."""
        await self._session.execute(
            update(OnboardingRun)
            .where(OnboardingRun.id == run_id)
            .values(
                status=status,
                route=route,
                finished_at=finished_at,
                ended_at_step=ended_at_step,
                error_code=error_code,
                message=_clip(message),
            )
        )

    async def record(self, new: NewStepResult, *, recorded_at: datetime) -> StepResultView:
        """Store one step result (flushed)."""
        row = OnboardingStepResult(
            run_id=new.run_id,
            student_id=new.student_id.strip(),
            step_id=new.step_id,
            number=new.number,
            kind=new.kind,
            status=new.status,
            done=new.done,
            dry_run=new.dry_run,
            evidence=new.evidence,
            message=_clip(new.message) or "",
            fix=_clip(new.fix),
            waiting_for=_clip(new.waiting_for),
            due=new.due,
            recorded_at=recorded_at,
            recorded_by=new.recorded_by,
            person=new.person,
        )
        await self._add(row)
        return _result_view(row)

    async def results(self, student_id: str, *, run_id: str | None = None) -> list[StepResultView]:
        """Every result of the customer (of one run, when given), oldest first."""
        statement = select(OnboardingStepResult).where(
            OnboardingStepResult.student_id == student_id
        )
        if run_id is not None:
            statement = statement.where(OnboardingStepResult.run_id == run_id)
        rows = await self._session.scalars(statement.order_by(OnboardingStepResult.id))
        return [_result_view(row) for row in rows]

    async def run(self, run_id: str) -> RunView | None:
        """One run, or None."""
        row = await self._session.get(OnboardingRun, run_id)
        return None if row is None else _run_view(row)

    async def runs(self, student_id: str) -> list[RunView]:
        """The customer's runs, oldest first."""
        rows = await self._session.scalars(
            select(OnboardingRun)
            .where(OnboardingRun.student_id == student_id)
            .order_by(OnboardingRun.number)
        )
        return [_run_view(row) for row in rows]
