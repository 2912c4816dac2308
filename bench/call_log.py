"""The tool-call log's cost: recording a call on the hot path, and the flush that writes it.

- ``record``: :meth:`CallLog.start` + :meth:`CallLog.answered` (what a tool route adds to
  every call: a clock read, a small object, an append to a bounded deque), per call;
- ``flush``: :meth:`CallLog.flush` of a minute's worth of calls in one transaction on a
  migrated SQLite file (the default backend), per row and in total.

Run: ``uv run python -m bench.call_log [--calls 100000] [--batch 6000]``. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from pmsgate.clock import SystemClock
from pmsgate.gateway.call_log import CallLog
from pmsgate.storage.db import open_database, session_factory
from pmsgate.storage.models import Facility

META = {"source": "cache", "age_s": 12.3, "stale": False, "count": 3}


def time_record(calls: int) -> float:
    """Mean nanoseconds of recording one answered call (no database)."""
    log = CallLog(SystemClock(), max_pending=calls)
    start = time.perf_counter_ns()
    for _ in range(calls):
        call = log.start(
            1, kind="tool", name="get-in-house-guests", transport="http", key_prefix="pgw_abcdefgh"
        )
        call.arguments = {"date": "2026-11-26"}
        log.answered(call, META)
    return (time.perf_counter_ns() - start) / calls


async def time_flush(batch: int, rounds: int) -> list[float]:
    """Seconds of each flush of ``batch`` calls into a migrated SQLite file."""
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite+aiosqlite:///{Path(folder) / 'bench.db'}"
        async with open_database(url) as engine:
            sessions = session_factory(engine)
            now = datetime.now(UTC)
            async with sessions.begin() as session:
                row = Facility(
                    hotel_id="1", username="api1", kind="partner", password_enc="x",
                    integration_id="int-1", created_at=now, updated_at=now,
                )  # fmt: skip
                session.add(row)
                await session.flush()
                facility_id = row.id
            log = CallLog(SystemClock(), sessions, max_pending=batch)
            times = []
            for _ in range(rounds):
                for _ in range(batch):
                    call = log.start(
                        facility_id,
                        kind="tool",
                        name="get-in-house-guests",
                        transport="mcp",
                        key_prefix="pgw_abcdefgh",
                    )
                    log.answered(call, META)
                log.upstream_succeeded(facility_id)
                start = time.perf_counter()
                await log.flush()
                times.append(time.perf_counter() - start)
            return times


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=6_000, help="calls per flush (a busy minute)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    record = [time_record(args.calls) for _ in range(5)]
    per_call = statistics.median(record) / 1000
    print(f"record: {per_call:.2f} µs per call (median of 5 runs of {args.calls:,})")
    flushes = asyncio.run(time_flush(args.batch, args.rounds))
    median = statistics.median(flushes)
    print(
        f"flush: {median * 1000:.0f} ms for {args.batch:,} calls "
        f"({median / args.batch * 1e6:.1f} µs per row, median of {args.rounds}, SQLite)"
    )


if __name__ == "__main__":
    main()
