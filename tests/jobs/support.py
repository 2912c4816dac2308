"""The whole stack the jobs run on: an enrolled customer, the gateway and the web services.

``job_stack(database_url)`` enrols one seeded facility on the in-process emulators
(:func:`tests.customers.support.enrolled_sandbox`, whose container holds the gateway's
and the web application's services on the same database, clock and emulators), and
builds the scheduler of the four jobs.
Nothing waits for real: every wait moves the shared ManualClock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import anyio
import anyio.lowlevel

from pmsgate.clock import ManualClock
from pmsgate.customers.context import CustomerContext, CustomerServices
from pmsgate.customers.service import register_customer
from pmsgate.errors import PmsgateError
from pmsgate.gateway.context import GatewayServices
from pmsgate.gateway.facilities import FacilityView
from pmsgate.jobs.runs import JobRuns
from pmsgate.jobs.scheduler import Scheduler, build_scheduler
from pmsgate.jobs.spec import Job
from pmsgate.storage.customers import CustomerProfile
from pmsgate.storage.job_runs import JobRunView
from pmsgate.web.context import WebServices
from tests.customers.support import EnrolledSandbox, enrolled_sandbox


class ParkingSleep:
    """A sleep that moves the ManualClock ``allowed`` times, then parks until cancelled.

    A scheduler on it ticks a known number of times: the test waits for ``parked``
    and leaves the scheduler, which cancels the parked sleep.
    """

    def __init__(self, clock: ManualClock, allowed: int) -> None:
        self.clock = clock
        self.allowed = allowed
        self.calls: list[float] = []
        self.parked = anyio.Event()

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)
        if len(self.calls) > self.allowed:
            self.parked.set()
            await anyio.sleep_forever()
        self.clock.advance(seconds)
        await anyio.lowlevel.checkpoint()


class ParkingSleepEach:
    """Like :class:`ParkingSleep`, but counted per job: each job's loop parks after
    ``allowed`` waits, and ``parked`` is set once every one of ``jobs`` has parked.

    The scheduler names each job's task ``job:<name>``; the count follows that name, so
    how the loops interleave cannot change how often each job runs.
    """

    def __init__(self, clock: ManualClock, allowed: int, jobs: int) -> None:
        self.clock = clock
        self.allowed = allowed
        self.jobs = jobs
        self.calls: dict[str, int] = {}
        self.parked = anyio.Event()
        self._parked: set[str] = set()

    async def __call__(self, seconds: float) -> None:
        task = anyio.get_current_task().name
        self.calls[task] = self.calls.get(task, 0) + 1
        if self.calls[task] > self.allowed:
            self._parked.add(task)
            if len(self._parked) == self.jobs:
                self.parked.set()
            await anyio.sleep_forever()
        self.clock.advance(seconds)
        await anyio.lowlevel.checkpoint()


@dataclass
class OnEnrolled:
    """Something built on the enrolled sandbox: its clock, customer and facility."""

    enrolled: EnrolledSandbox

    @property
    def clock(self) -> ManualClock:
        """The clock of everything (emulators included)."""
        return self.enrolled.clock

    @property
    def student_id(self) -> str:
        """The enrolled customer."""
        return self.enrolled.student_id

    @property
    def hotel_id(self) -> str:
        """The enrolled customer's facility."""
        return self.enrolled.hotel_id


@dataclass
class JobStack(OnEnrolled):
    """The enrolled customer and the services the jobs take."""

    gateway: GatewayServices
    web: WebServices
    scheduler: Scheduler

    async def context(self) -> CustomerContext:
        """The customer's stored records now."""
        return await self.web.customers.context(self.student_id)

    async def facility(self) -> FacilityView:
        """The facility as the gateway stores it now."""
        return await self.gateway.facilities.get(self.hotel_id)

    async def workspace_id(self) -> str:
        """The customer's platform workspace."""
        workspace_id = (await self.context()).workspace_id
        assert workspace_id is not None
        return workspace_id

    async def run(self, name: str) -> JobRunView:
        """Run one job now through the scheduler (recorded like a tick)."""
        return await self.scheduler.run_once(name)

    async def sandbox_post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST to an emulator control (e.g. ``/assistant/_sandbox/faults``)."""
        async with self.enrolled.http() as http:
            answer = await http.post(path, json=body)
            answer.raise_for_status()
            result: dict[str, Any] = answer.json()
            return result


@asynccontextmanager
async def job_stack(database_url: str, **options: Any) -> AsyncIterator[JobStack]:
    """The enrolled sandbox with the gateway and web services on it (see the module docstring)."""
    async with enrolled_sandbox(database_url, **options) as enrolled:
        container = enrolled.container
        yield JobStack(
            enrolled=enrolled,
            gateway=container.gateway,
            web=container.web,
            scheduler=build_scheduler(container.web, sleep=enrolled.sleep),
        )


# Half a minute past 09:00: the first tick of a job is at once, the next on the grid.
START = datetime(2026, 11, 22, 9, 0, 30, tzinfo=UTC)


async def ticks_until_parked(
    jobs: list[Job], clock: ManualClock, runs: JobRuns, allowed: int
) -> ParkingSleep:
    """Run a scheduler of ``jobs`` until its sleep parks after ``allowed`` waits, then stop
    it; the sleep (its ``calls``: every wait asked for)."""
    sleep = ParkingSleep(clock, allowed=allowed)
    async with Scheduler(jobs, clock, runs, sleep=sleep):
        await sleep.parked.wait()
    return sleep


GONE = "stu-000-gone"  # sorted before the enrolled customer: its failure comes first


async def add_a_customer_whose_workspace_is_gone(services: CustomerServices) -> str:
    """A customer (:data:`GONE`) whose recorded workspace the platform does not have."""
    await register_customer(
        services, CustomerProfile(GONE, "gone@example.com", "Gone Workspace", "partner")
    )
    await services.workspaces.upsert(
        GONE,
        workspace_name="Gone",
        workspace_slug="gone-workspace",
        plan_limit_usd=100,
        alert_threshold_pct=80,
        workspace_id="ws-deleted-on-the-platform",
    )
    return GONE


class Flaky:
    """Fails the first ``failures`` times with a service error, then succeeds."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    async def __call__(self) -> dict[str, Any]:
        self.calls += 1
        if self.calls <= self.failures:
            raise PmsgateError("The upstream was unavailable.", code="upstream_unavailable")
        return {"call": self.calls}
