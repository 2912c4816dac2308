"""Knowledge-sync benchmark (issue 5, item 5): 50 apartments x ~35 nodes at the real limits.

What runs: the booking-system, notes and platform emulators in process, at their
real limits (platform 120 requests/minute per workspace, notes ~3 requests/second
with bursts of 10); one customer with ``apartments`` apartments enrolled through
the real service functions; the real clients (the platform client throttles itself
to 100 requests/minute, the notes client to 3/second) and the real
:class:`~pmsgate.knowledge.sync.KnowledgeSync`.

**Simulated time.** Everything shares one ManualClock. The clients' waits go
through :class:`VirtualTime`, a small discrete-event scheduler: a ``sleep``
registers a deadline and the clock jumps to the earliest deadline only when every
task is waiting (the event loop has nothing ready to run), so concurrent waits
overlap as they would in real time and the simulated duration is what a real run
would take at these limits with zero network latency. Wall time is reported too.

**Seeding 50 apartments.** The seeds give each booking-system facility 2-6
apartments and the notes emulator one workspace per facility; the benchmark seeds
enough facilities and moves their apartments into the first one before the notes
and platform emulators derive their state from it (both read the booking system's
facilities), so one customer owns ``apartments`` apartments with seeded pages.

**Phases.** (1) the pages are patched to the template (spec §4.3 step 13) — setup,
not measured; (2) dry run; (3) first commit — the measured sync; (4) after two quiet
minutes, a second commit of unchanged content. For each: simulated seconds, the
upstream requests it made, 429s, and the floor the limits imply: requests needed ÷
allowed rate, for each upstream; the larger is the binding one.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr

from pmsgate.clock import ManualClock
from pmsgate.config import Settings
from pmsgate.container import open_container
from pmsgate.customers.context import CustomerServices
from pmsgate.customers.service import (
    Subscription,
    configure_workspace,
    connect_notion,
    link_kross,
    register_customer,
    sync_registry,
)
from pmsgate.demo.onboarding import sandbox_settings
from pmsgate.gateway.vault import generate_key_spec
from pmsgate.integrations.assistant.client import AssistantClient
from pmsgate.knowledge.patcher import apply_patch, plan_patch
from pmsgate.knowledge.records import KnowledgeSyncRecords
from pmsgate.knowledge.sync import KnowledgeSync
from pmsgate.knowledge.template import WifiCredentials, check_page
from pmsgate.sandbox.app import Sandbox
from pmsgate.sandbox.assistant.seed import SANDBOX_ASSISTANT_TOKEN
from pmsgate.sandbox.assistant.store import AssistantStore
from pmsgate.sandbox.customers import SANDBOX_URL
from pmsgate.sandbox.kross.seed import SANDBOX_PARTNER_API_KEY
from pmsgate.sandbox.kross.store import KrossStore
from pmsgate.sandbox.notion.store import NotionStore
from pmsgate.storage.customers import CustomerProfile

STUDENT_ID = "stu-bench-knowledge"
NOTION_RATE_PER_S = 3.0  # the notes client's own pace (the emulator averages 3/s too)
QUIET_GAP_S = 120.0  # between the first sync and the re-sync: windows empty, pages settled

Progress = Callable[[str], None]


@dataclass(frozen=True)
class KnowledgeSyncConfig:
    """What the benchmark runs."""

    apartments: int = 50
    seed: int = 11
    assistant_requests_per_minute: int = 100  # the client's budget (the platform allows 120)
    max_concurrent_apartments: int = 4
    page_read_concurrency: int = 2


# --- simulated time ------------------------------------------------------------------------------


class VirtualTime:
    """A ManualClock that jumps to the next sleeper's deadline once every task is waiting.

    Idleness is read from the event loop's ready queue (asyncio's ``_ready``, an
    implementation detail of CPython's loop); a short real pause lets work done in
    threads (aiosqlite) land before the clock moves, so a database call never makes
    simulated time run ahead of what it would be.
    """

    def __init__(self, clock: ManualClock, *, settle_s: float = 0.0005) -> None:
        self.clock = clock
        self.settle_s = settle_s
        self.jumps = 0
        self._heap: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of simulated time."""
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        deadline = self.clock.now().timestamp() + seconds
        heapq.heappush(self._heap, (deadline, next(self._order), future))
        await future

    @asynccontextmanager
    async def running(self) -> AsyncIterator[VirtualTime]:
        """Drive the clock while the block runs."""
        driver = asyncio.create_task(self._drive())
        try:
            yield self
        finally:
            driver.cancel()
            with suppress(asyncio.CancelledError):
                await driver

    async def _drive(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._settle(loop)
            self._heap = [entry for entry in self._heap if not entry[2].done()]
            heapq.heapify(self._heap)
            if not self._heap:
                await asyncio.sleep(self.settle_s)
                continue
            deadline = self._heap[0][0]
            if deadline > self.clock.now().timestamp():
                self.clock.set(datetime.fromtimestamp(deadline, UTC))
            self.jumps += 1
            while self._heap and self._heap[0][0] <= deadline:
                _, _, future = heapq.heappop(self._heap)
                if not future.done():
                    future.set_result(None)

    async def _settle(self, loop: asyncio.AbstractEventLoop) -> None:
        while True:
            quiet = 0
            while quiet < 2:
                await asyncio.sleep(0)
                quiet = 0 if loop._ready else quiet + 1  # type: ignore[attr-defined]
            await asyncio.sleep(self.settle_s)
            if not loop._ready:  # type: ignore[attr-defined]
                return


# --- the sandbox and the customer ----------------------------------------------------------------


def _sandbox(config: KnowledgeSyncConfig, clock: ManualClock) -> Sandbox:
    """A sandbox whose first facility has ``config.apartments`` apartments."""
    box = Sandbox(seed=config.seed, clock=clock)
    facilities = 2
    while True:
        kross = KrossStore(
            seed=config.seed,
            clock=clock,
            partner_api_key=SANDBOX_PARTNER_API_KEY,
            facility_count=facilities,
        )
        if sum(len(f.apartments) for f in kross.facilities()) >= config.apartments:
            break
        facilities += 4
    first, *others = kross.facilities()
    for other in others:
        for room_type, apartment in list(other.apartments.items()):
            if len(first.apartments) >= config.apartments:
                break
            first.apartments[room_type] = apartment
            del other.apartments[room_type]
    box.kross = kross
    box.assistant = AssistantStore(seed=config.seed, clock=clock, kross=kross)
    box.notion = NotionStore(seed=config.seed, clock=clock, kross=kross)
    return box


def _settings(data_dir: Path) -> Settings:
    return sandbox_settings(
        data_dir,
        database_url=f"sqlite+aiosqlite:///{data_dir / 'bench.db'}",
        secret_keys=SecretStr(generate_key_spec("bench1")),
        notion_requests_per_second=NOTION_RATE_PER_S,
        log_level="WARNING",
    )


async def _enrol(services: CustomerServices, box: Sandbox) -> None:
    """The customer of the first facility, enrolled through the service functions."""
    facility = box.kross.facility_summaries()[0]
    notes = next(w for w in box.notion.workspaces() if w["hotel_id"] == facility["hotel_id"])
    await register_customer(
        services,
        CustomerProfile(
            student_id=STUDENT_ID,
            email="bench@example.com",
            name=str(facility["name"]),
            kind=str(facility["kind"]),
            contract_ref="C-bench",
            contract_price_id="price_bench",
        ),
        subscription=Subscription("sub_bench", "active", "price_bench"),
    )
    config = await configure_workspace(
        services,
        STUDENT_ID,
        plan_limit_usd=150,
        alert_threshold_pct=80,
        workspace_slug="bench-knowledge",
    )
    assert config.workspace_id is not None
    box.assistant.set_kross_connection(
        config.workspace_id, facility["hotel_id"], facility["username"], facility["password"]
    )
    await link_kross(services, STUDENT_ID, facility["hotel_id"])
    await connect_notion(
        services,
        STUDENT_ID,
        SecretStr(notes["token"]),
        notes["database_id"],
        notes_workspace_id=notes["workspace_id"],
    )
    await sync_registry(services, STUDENT_ID)


async def _patch_pages(services: CustomerServices, box: Sandbox) -> int:
    """Make every page canonical (setup: the sync is measured on complete templates)."""
    ctx = await services.context(STUDENT_ID)
    truth = {p["page_id"]: p for w in box.notion.workspaces() for p in w["pages"]}
    patched = 0
    async with services.notion(ctx) as notes:
        for row in ctx.apartments:
            assert row.notes_page_id is not None
            page = truth[row.notes_page_id]
            blocks = await notes.read_tree(row.notes_page_id)
            check = check_page(blocks, page_id=row.notes_page_id)
            wifi = WifiCredentials.model_validate(page["wifi"])
            plan = plan_patch(row.notes_page_id, blocks, check, wifi=wifi)
            if not plan.empty:
                outcome = await apply_patch(notes, plan)
                assert outcome.ok, outcome.report()
                patched += 1
    return patched


# --- measuring -----------------------------------------------------------------------------------


@dataclass
class _Tally:
    assistant: Counter[str]
    notes: Counter[str]
    assistant_429: int
    notion_429: int
    at: datetime
    wall: float

    @classmethod
    def of(cls, box: Sandbox, clock: ManualClock) -> _Tally:
        return cls(
            assistant=Counter(box.assistant.stats.requests_by_route),
            notes=Counter(box.notion.stats.requests_by_endpoint),
            assistant_429=box.assistant.stats.rate_limited.total(),
            notion_429=box.notion.stats.rate_limited.total(),
            at=clock.now(),
            wall=time.perf_counter(),
        )


def _phase(
    before: _Tally, after: _Tally, config: KnowledgeSyncConfig, counters: dict[str, Any]
) -> dict[str, Any]:
    assistant = after.assistant - before.assistant
    notes = after.notes - before.notes
    assistant_total = sum(assistant.values())
    notion_total = sum(notes.values())
    writes = {r: n for r, n in assistant.items() if not r.startswith("GET ")}
    assistant_floor = assistant_total / config.assistant_requests_per_minute * 60
    assistant_floor_hard = assistant_total / 120 * 60
    notion_floor = notion_total / NOTION_RATE_PER_S
    floor = max(assistant_floor, notion_floor)
    simulated = (after.at - before.at).total_seconds()
    return {
        "counters": counters,
        "simulated_s": round(simulated, 1),
        "wall_s": round(after.wall - before.wall, 2),
        "assistant_requests": assistant_total,
        "assistant_writes": sum(writes.values()),
        "assistant_by_route": dict(assistant),
        "notion_requests": notion_total,
        "notion_by_endpoint": dict(notes),
        "assistant_429": after.assistant_429 - before.assistant_429,
        "notion_429": after.notion_429 - before.notion_429,
        "floor_assistant_s": round(assistant_floor, 1),
        "floor_assistant_at_120_per_min_s": round(assistant_floor_hard, 1),
        "floor_notion_s": round(notion_floor, 1),
        "binding_upstream": "platform" if assistant_floor >= notion_floor else "notes",
        "floor_s": round(floor, 1),
        "ratio_to_floor": round(simulated / floor, 3) if floor else None,
    }


async def run_knowledge_sync(
    config: KnowledgeSyncConfig, progress: Progress | None = None
) -> dict[str, Any]:
    """Run the phases and return every figure."""
    say = progress or (lambda _message: None)
    clock = ManualClock()
    virtual = VirtualTime(clock)
    box = _sandbox(config, clock)
    app = box.asgi_app()

    def http_factory() -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=SANDBOX_URL)

    with tempfile.TemporaryDirectory() as scratch:
        settings = _settings(Path(scratch))
        async with (
            virtual.running(),
            open_container(
                settings, clock=clock, http_factory=http_factory, sleep=virtual.sleep
            ) as container,
        ):
            # The same services, with the platform client's budget as configured here.
            assistant_http = http_factory()
            assistant = AssistantClient(
                assistant_http,
                base_url=settings.assistant_api_url,
                token=SecretStr(SANDBOX_ASSISTANT_TOKEN),
                clock=clock,
                sleep=virtual.sleep,
                requests_per_minute=config.assistant_requests_per_minute,
            )
            services = CustomerServices(
                settings=settings,
                clock=clock,
                sessions=container.sessions,
                vault=container.vault,
                facilities=container.gateway.facilities,
                assistant=assistant,
                http_factory=http_factory,
                sleep=virtual.sleep,
            )
            try:
                say(f"enrolling a customer with {config.apartments} apartments")
                await _enrol(services, box)
                ctx = await services.context(STUDENT_ID)
                say("patching the pages to the template (setup)")
                patched = await _patch_pages(services, box)
                sync = KnowledgeSync(
                    services,
                    KnowledgeSyncRecords(services.sessions, clock),
                    max_concurrent_apartments=config.max_concurrent_apartments,
                    page_read_concurrency=config.page_read_concurrency,
                )
                results: dict[str, Any] = {
                    "config": asdict(config),
                    "apartments": len(ctx.apartments),
                    "pages_patched_in_setup": patched,
                }

                async def measured(
                    key: str, what: str, run: Callable[[str], Awaitable[Any]]
                ) -> Any:
                    """One phase after a quiet gap, its figures under ``key``; its outcome."""
                    clock.advance(QUIET_GAP_S)
                    say(what)
                    before = _Tally.of(box, clock)
                    outcome = await run(STUDENT_ID)
                    counters = outcome.counters()
                    results[key] = _phase(before, _Tally.of(box, clock), config, counters)
                    return outcome

                await measured("dry_run", "dry run", sync.dry_run)
                first = await measured("first_sync", "first commit (measured)", sync.commit)
                results["first_sync"]["nodes_per_apartment"] = {
                    "min": min(d.nodes for d in first.details),
                    "max": max(d.nodes for d in first.details),
                    "mean": round(first.nodes / max(1, len(first.details)), 1),
                }
                results["first_sync"]["wifi_nodes_present"] = sum(first.wifi_nodes.values())

                await measured(
                    "resync_unchanged", "second commit of unchanged content", sync.commit
                )
                results["virtual_time_jumps"] = virtual.jumps
            finally:
                await assistant_http.aclose()
    first_sync = results["first_sync"]
    results["targets"] = {
        "first_sync_within_1_15_floor": first_sync["ratio_to_floor"] <= 1.15,
        "zero_429": all(
            results[p]["assistant_429"] == results[p]["notion_429"] == 0
            for p in ("dry_run", "first_sync", "resync_unchanged")
        ),
        "resync_zero_writes": results["resync_unchanged"]["assistant_writes"] == 0,
    }
    return results


def print_knowledge_sync(results: dict[str, Any]) -> None:
    """A short table of the figures."""
    print("\n## knowledge sync", results["config"])
    patched = results["pages_patched_in_setup"]
    print(f"apartments {results['apartments']}, pages patched in setup {patched}")
    header = (
        f"{'phase':<18} {'simulated s':>11} {'floor s':>8} {'ratio':>6} {'binding':>8} "
        f"{'platform req':>12} {'writes':>7} {'notes req':>9} {'429s':>5} {'wall s':>7}"
    )
    print(header)
    for phase in ("dry_run", "first_sync", "resync_unchanged"):
        row = results[phase]
        print(
            f"{phase:<18} {row['simulated_s']:>11.1f} {row['floor_s']:>8.1f} "
            f"{row['ratio_to_floor'] or 0:>6.3f} {row['binding_upstream']:>8} "
            f"{row['assistant_requests']:>12} {row['assistant_writes']:>7} "
            f"{row['notion_requests']:>9} {row['assistant_429'] + row['notion_429']:>5} "
            f"{row['wall_s']:>7.1f}"
        )
    print("first sync counters:", results["first_sync"]["counters"])
    print("nodes per apartment:", results["first_sync"]["nodes_per_apartment"])
    print("re-sync counters:", results["resync_unchanged"]["counters"])
    print("targets:", results["targets"])
