"""Assistant workload: N facilities x R tool calls per minute over a simulated hour.

Time is a :class:`~pmsgate.clock.ManualClock` shared by the emulator and the gateway:
each minute's calls get random instants inside that minute, the clock is set to each
call's instant and the call is made (a call takes no simulated time, so calls never
overlap in simulated time and are made one after another). The emulator enforces its
real limits (10/min, 300/h, 5,000/day per facility, sliding windows) and counts every
request that reaches it, refused ones included.

The same calls (same seed) are sent to pmsgate (the real gateway, default limits and
freshness bounds, in-process ASGI) and to the naive pass-through gateway of
:mod:`bench.naive`, each on its own fresh emulator.

Facilities are independent in simulated time: each has its own budget, token and
cache entries upstream and in the gateway; the facility count changes wall time
(CPU), not the per-facility figures. ``--facilities`` scales the run down for that
reason (see README).
"""

from __future__ import annotations

import datetime as dt
import random
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
import stamina

from bench.common import (
    GATEWAY_HOST,
    KROSS_HOST,
    BenchConfig,
    credentials_of,
    freeze_heap,
    gateway_settings,
    in_process_gateway,
    new_facility,
    sqlite_url,
)
from bench.naive import NaiveGateway
from pmsgate.clock import ManualClock
from pmsgate.config import DEFAULT_USER_AGENT
from pmsgate.integrations.kross.client import KrossClient
from pmsgate.integrations.kross.operations import load_operations
from pmsgate.sandbox.kross.app import create_kross_app
from pmsgate.sandbox.kross.records import Facility
from pmsgate.sandbox.kross.store import KrossStore

GatewayKind = Literal["pmsgate", "naive"]

# Share of each tool in the assistant's calls.
TOOL_MIX: tuple[tuple[str, float], ...] = (
    ("get-reservation-status", 0.25),
    ("check-portal-status", 0.15),
    ("get-checkin-instructions", 0.20),
    ("check-availability", 0.20),
    ("get-in-house-guests", 0.10),
    ("get-incomplete-portals", 0.10),
)
_TOOLS = [name for name, _ in TOOL_MIX]
_WEIGHTS = [weight for _, weight in TOOL_MIX]
_NIGHTS = [1, 2, 2, 3, 3, 4, 5, 7]
# Sparse traffic of the token-lifetime phase: one call per facility per simulated hour.
LIFETIME_STEP_S = 3600


@dataclass(frozen=True)
class WorkloadConfig(BenchConfig):
    """What to simulate."""

    facilities: int = 50
    calls_per_minute: int = 200
    minutes: int = 60
    # Share of check-availability calls with free-form dates (a guest's own dates);
    # the rest ask one of a few popular ranges (tonight, the next weekends).
    availability_spread: float = 0.5
    # After the hour: this many simulated days of sparse traffic, to count tokens over
    # whole token lifetimes (pmsgate only; 0 = skip).
    lifetime_days: int = 15


@dataclass(frozen=True)
class Call:
    """One tool call at a simulated instant (seconds from the start)."""

    at_s: float
    facility: int
    tool: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Pool:
    """What one facility's callers ask about."""

    reservation_ids: list[int]
    apartment_ids: list[int]
    popular_ranges: list[tuple[dt.date, dt.date]]


def pools(facilities: list[Facility], today: dt.date) -> list[Pool]:
    """Argument pools: reservations around today, apartments, the popular date ranges."""
    result = []
    # The coming weekends (Friday→Sunday, Friday→Monday) and the next few nights.
    friday = today + dt.timedelta(days=(4 - today.weekday()) % 7)
    popular = [(today, today + dt.timedelta(days=n)) for n in (1, 2, 3)]
    for week in range(3):
        start = friday + dt.timedelta(days=7 * week)
        popular += [(start, start + dt.timedelta(days=2)), (start, start + dt.timedelta(days=3))]
    for facility in facilities:
        ids = sorted(
            r.id_reservation
            for r in facility.reservations.values()
            if r.departure >= today - dt.timedelta(days=7)
            and r.arrival <= today + dt.timedelta(days=60)
        )
        result.append(Pool(ids, sorted(facility.apartments), popular))
    return result


def _arguments(tool: str, pool: Pool, today: dt.date, rng: random.Random, spread: float) -> Any:
    if tool in ("get-reservation-status", "check-portal-status"):
        return {"reservation_id": rng.choice(pool.reservation_ids)}
    if tool == "get-checkin-instructions":
        if rng.random() < 0.7:
            return {"reservation_id": rng.choice(pool.reservation_ids)}
        return {"apartment_id": rng.choice(pool.apartment_ids)}
    if tool == "check-availability":
        if rng.random() >= spread:
            # "Anything free this weekend?": a popular range, any apartment.
            arrival, departure = rng.choice(pool.popular_ranges)
            return {"arrival": arrival.isoformat(), "departure": departure.isoformat()}
        # A guest's own dates, mostly soon, sometimes for one apartment.
        arrival = today + dt.timedelta(days=min(int(rng.expovariate(1 / 14)), 89))
        departure = arrival + dt.timedelta(days=rng.choice(_NIGHTS))
        arguments: dict[str, Any] = {
            "arrival": arrival.isoformat(),
            "departure": departure.isoformat(),
        }
        if rng.random() < 0.4:
            arguments["apartment_id"] = rng.choice(pool.apartment_ids)
        return arguments
    if tool == "get-in-house-guests":
        shift = rng.choices([0, 1, -1], weights=[0.8, 0.1, 0.1])[0]
        return {} if shift == 0 else {"date": (today + dt.timedelta(days=shift)).isoformat()}
    # get-incomplete-portals
    roll = rng.random()
    if roll < 0.6:
        return {}
    if roll < 0.8:
        return {
            "date_from": today.isoformat(),
            "date_to": (today + dt.timedelta(days=3)).isoformat(),
        }
    return {
        "date_from": (today + dt.timedelta(days=1)).isoformat(),
        "date_to": (today + dt.timedelta(days=14)).isoformat(),
    }


def minute_calls(
    config: WorkloadConfig, minute: int, facility_pools: list[Pool], today: dt.date
) -> list[Call]:
    """Every call of one simulated minute, in time order (the same for both gateways)."""
    calls = []
    for index, pool in enumerate(facility_pools):
        rng = random.Random(f"{config.seed}:{minute}:{index}")
        for _ in range(config.calls_per_minute):
            tool = rng.choices(_TOOLS, weights=_WEIGHTS)[0]
            at_s = minute * 60 + rng.random() * 60
            arguments = _arguments(tool, pool, today, rng, config.availability_spread)
            calls.append(Call(at_s, index, tool, arguments))
    calls.sort(key=lambda c: c.at_s)
    return calls


# --- outcomes ------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one gateway did with the workload."""

    gateway: GatewayKind
    calls: int = 0
    ok: int = 0
    from_cache: int = 0
    stale: int = 0
    stale_max_age_s: float = 0.0
    statuses: Counter[int] = field(default_factory=Counter)
    error_codes: Counter[str] = field(default_factory=Counter)
    calls_by_tool: Counter[str] = field(default_factory=Counter)
    errors_by_tool: Counter[str] = field(default_factory=Counter)
    stale_by_tool: Counter[str] = field(default_factory=Counter)
    # upstream[minute][facility]: requests that reached the emulator (refused ones included)
    upstream: list[list[int]] = field(default_factory=list)
    upstream_429: int = 0
    upstream_by_operation: dict[str, int] = field(default_factory=dict)
    # errors_by_minute[minute], stale_by_minute[minute]: answers of all facilities
    errors_by_minute: Counter[int] = field(default_factory=Counter)
    stale_by_minute: Counter[int] = field(default_factory=Counter)
    tokens_issued: list[int] = field(default_factory=list)
    sessions_refused: int = 0
    # token-lifetime phase (pmsgate only)
    lifetime_days: int = 0
    lifetime_calls: int = 0
    lifetime_errors: int = 0
    lifetime_tokens: list[int] = field(default_factory=list)
    lifetime_upstream_429: int = 0
    wall_s: float = 0.0

    def record(self, call: Call, response: httpx.Response) -> None:
        """Count one answer."""
        self.calls += 1
        self.calls_by_tool[call.tool] += 1
        self.statuses[response.status_code] += 1
        body = response.json()
        minute = int(call.at_s // 60)
        if response.status_code != 200:
            self.errors_by_tool[call.tool] += 1
            self.errors_by_minute[minute] += 1
            self.error_codes[str(body.get("error", {}).get("code", "?"))] += 1
            return
        self.ok += 1
        meta = body.get("meta", {})
        if meta.get("source") == "cache":
            self.from_cache += 1
        if meta.get("stale"):
            self.stale += 1
            self.stale_by_tool[call.tool] += 1
            self.stale_by_minute[minute] += 1
            self.stale_max_age_s = max(self.stale_max_age_s, float(meta.get("age_s", 0.0)))

    def summary(self) -> dict[str, Any]:
        """The figures the README reports."""
        per_minute = [count for minute in self.upstream for count in minute]
        facilities = len(self.upstream[0]) if self.upstream else 0
        minutes = len(self.upstream)
        per_minute_mean_by_minute = [
            round(sum(minute) / max(1, len(minute)), 2) for minute in self.upstream
        ]
        return {
            "gateway": self.gateway,
            "facilities": facilities,
            "minutes": minutes,
            "tool_calls": self.calls,
            "answered_ok": self.ok,
            "ok_share": _share(self.ok, self.calls),
            "errors": self.calls - self.ok,
            "error_share": _share(self.calls - self.ok, self.calls),
            "error_codes": dict(self.error_codes.most_common()),
            "errors_by_tool": {
                tool: f"{self.errors_by_tool[tool]}/{self.calls_by_tool[tool]}" for tool in _TOOLS
            },
            "answered_from_cache_share": _share(self.from_cache, self.calls),
            "stale_answers": self.stale,
            "stale_share": _share(self.stale, self.calls),
            "stale_max_age_s": round(self.stale_max_age_s, 1),
            "stale_by_tool": dict(self.stale_by_tool),
            "upstream_requests": sum(per_minute),
            "upstream_per_facility_minute_max": max(per_minute, default=0),
            "upstream_per_facility_minute_mean": round(
                sum(per_minute) / max(1, len(per_minute)), 2
            ),
            "upstream_per_facility_run_max": max(
                (sum(minute[f] for minute in self.upstream) for f in range(facilities)), default=0
            ),
            "upstream_mean_by_minute": per_minute_mean_by_minute,
            "errors_first_minute": self.errors_by_minute[0],
            "errors_after_first_minute": sum(self.errors_by_minute.values())
            - self.errors_by_minute[0],
            "errors_by_minute": [self.errors_by_minute[m] for m in range(minutes)],
            "stale_by_minute": [self.stale_by_minute[m] for m in range(minutes)],
            "upstream_429": self.upstream_429,
            "upstream_by_operation": self.upstream_by_operation,
            "tokens_issued_per_facility": _spread(self.tokens_issued),
            "sessions_refused": self.sessions_refused,
            "token_lifetime_phase": (
                {
                    "days": self.lifetime_days,
                    "calls": self.lifetime_calls,
                    "errors": self.lifetime_errors,
                    "upstream_429": self.lifetime_upstream_429,
                    "tokens_per_facility_whole_run": _spread(self.lifetime_tokens),
                }
                if self.lifetime_days
                else None
            ),
            "wall_s": round(self.wall_s, 1),
        }


def _share(part: int, whole: int) -> float:
    return round(part / whole, 6) if whole else 0.0


def _spread(values: list[int]) -> dict[str, int]:
    return {"min": min(values, default=0), "max": max(values, default=0), "sum": sum(values)}


# --- running one gateway on the workload ---------------------------------------------------


@dataclass
class _Target:
    http: httpx.AsyncClient
    keys: list[str]


@asynccontextmanager
async def _pmsgate(
    store: KrossStore, kross_http: httpx.AsyncClient, clock: ManualClock, directory: str
) -> AsyncIterator[_Target]:
    settings = gateway_settings(sqlite_url(directory), KROSS_HOST)
    async with in_process_gateway(settings, kross_http, clock) as gateway:
        keys = []
        for record in store.facility_summaries():
            _, key = await gateway.services.facilities.add(new_facility(record))
            keys.append(key)
        yield _Target(gateway.http, keys)


@asynccontextmanager
async def _naive(
    store: KrossStore, kross_http: httpx.AsyncClient, clock: ManualClock
) -> AsyncIterator[_Target]:
    kross_client = KrossClient(
        kross_http,
        base_url=KROSS_HOST,
        operations=load_operations(),
        user_agent=DEFAULT_USER_AGENT,
        clock=clock,
    )
    naive = NaiveGateway(kross_client)
    keys = [naive.add(credentials_of(record)) for record in store.facility_summaries()]
    transport = httpx.ASGITransport(app=naive.app())
    async with httpx.AsyncClient(transport=transport, base_url=GATEWAY_HOST) as http:
        yield _Target(http, keys)


async def _call(target: _Target, call: Call) -> httpx.Response:
    return await target.http.post(
        f"/v1/tools/{call.tool}",
        json=call.arguments,
        headers={"Authorization": f"Bearer {target.keys[call.facility]}"},
    )


async def simulate(
    kind: GatewayKind,
    config: WorkloadConfig,
    progress: Callable[[str], None] = lambda _: None,
) -> Outcome:
    """Run the workload through one gateway on a fresh emulator."""
    clock = ManualClock()
    start = clock.now()
    today = start.date()
    store = KrossStore(seed=config.seed, clock=clock, facility_count=config.facilities)
    hotel_ids = [f.hotel_id for f in store.facilities()]
    facility_pools = pools(store.facilities(), today)
    outcome = Outcome(gateway=kind)
    began = time.perf_counter()
    transport = httpx.ASGITransport(app=create_kross_app(store))
    # Retries happen (for pmsgate) but never sleep in real time while simulated time stands.
    with (
        stamina.set_testing(True, attempts=3),
        tempfile.TemporaryDirectory(prefix="pmsgate-bench-") as directory,
    ):
        async with httpx.AsyncClient(transport=transport, base_url=KROSS_HOST) as kross_http:
            opened = (
                _pmsgate(store, kross_http, clock, directory)
                if kind == "pmsgate"
                else _naive(store, kross_http, clock)
            )
            async with opened as target:
                freeze_heap()
                seen = Counter(store.stats.requests_by_hotel)
                for minute in range(config.minutes):
                    for call in minute_calls(config, minute, facility_pools, today):
                        clock.set(start + dt.timedelta(seconds=call.at_s))
                        outcome.record(call, await _call(target, call))
                    now_seen = Counter(store.stats.requests_by_hotel)
                    outcome.upstream.append([now_seen[h] - seen[h] for h in hotel_ids])
                    seen = now_seen
                    if minute % 10 == 9 or minute == config.minutes - 1:
                        progress(
                            f"{kind}: minute {minute + 1}/{config.minutes}, "
                            f"{outcome.calls} calls, {time.perf_counter() - began:.0f} s"
                        )
                outcome.upstream_429 = store.stats.rate_limited.total()
                outcome.upstream_by_operation = dict(store.stats.requests_by_operation)
                outcome.tokens_issued = [store.stats.tokens_issued[h] for h in hotel_ids]
                outcome.sessions_refused = store.stats.sessions_refused.total()
                if kind == "pmsgate" and config.lifetime_days > 0:
                    await _token_lifetimes(config, store, target, clock, facility_pools, outcome)
                    progress(f"{kind}: token-lifetime phase, {outcome.lifetime_calls} calls")
    outcome.wall_s = time.perf_counter() - began
    return outcome


async def _token_lifetimes(
    config: WorkloadConfig,
    store: KrossStore,
    target: _Target,
    clock: ManualClock,
    facility_pools: list[Pool],
    outcome: Outcome,
) -> None:
    """Sparse calls over many simulated days: how many tokens does each facility use?"""
    refused_before = store.stats.rate_limited.total()
    steps = config.lifetime_days * 86400 // LIFETIME_STEP_S
    for _ in range(steps):
        clock.advance(LIFETIME_STEP_S)
        for index in range(len(facility_pools)):
            # Valid on any day, and older than its freshness bound every time: one upstream
            # read per call, so every call asks the token manager for a token.
            call = Call(0.0, index, "get-in-house-guests", {})
            response = await _call(target, call)
            outcome.lifetime_calls += 1
            if response.status_code != 200:
                outcome.lifetime_errors += 1
    outcome.lifetime_days = config.lifetime_days
    outcome.lifetime_upstream_429 = store.stats.rate_limited.total() - refused_before
    outcome.lifetime_tokens = [store.stats.tokens_issued[f.hotel_id] for f in store.facilities()]


async def run_workload(
    config: WorkloadConfig,
    gateways: tuple[GatewayKind, ...] = ("pmsgate", "naive"),
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """The workload through each gateway; the summaries side by side."""
    results: dict[str, Any] = {"config": config.__dict__.copy()}
    for kind in gateways:
        outcome = await simulate(kind, config, progress)
        results[kind] = outcome.summary()
    return results
