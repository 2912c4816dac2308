"""The admin overview with many customers (issue 16 item 4): ``python -m bench.admin_overview``.

Generates ``--count`` customers (``pmsgate.demo.fleet``: varied states, through the real
services) in a fresh SQLite database, then times what ``GET /console`` reads and computes
(:class:`pmsgate.web.admin_views.AdminOverview` — a constant number of SQL statements — and
the search / filter / sort / page of :func:`select_rows`) and counts the SQL statements.
Nothing here is a test; the figures are recorded in ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import event

from pmsgate.clock import ManualClock
from pmsgate.container import open_container
from pmsgate.demo.fleet import generate_customers
from pmsgate.demo.onboarding import sandbox_settings
from pmsgate.sandbox.app import Sandbox
from pmsgate.sandbox.customers import sandbox_http_factory
from pmsgate.web.admin_views import AdminOverview, OverviewQuery, select_rows


async def measure(count: int, repeats: int) -> dict[str, Any]:
    """Generate ``count`` customers, then time the overview's reads ``repeats`` times."""
    clock = ManualClock()
    sandbox = Sandbox(seed=1, clock=clock)
    with tempfile.TemporaryDirectory(prefix="pmsgate-bench-admin-") as data_dir:
        settings = sandbox_settings(Path(data_dir))
        async with open_container(
            settings, clock=clock, http_factory=sandbox_http_factory(sandbox.asgi_app())
        ) as container:
            started = time.perf_counter()
            await generate_customers(container.customers, clock, count=count)
            generated_s = time.perf_counter() - started
            overview = AdminOverview(container.sessions, clock)
            statements: list[str] = []

            def record(*args: Any) -> None:
                statements.append(args[2])

            engine = container.engine.sync_engine
            timings = []
            for index in range(repeats):
                if index == 0:
                    event.listen(engine, "before_cursor_execute", record)
                started = time.perf_counter()
                fleet = await overview.fleet()
                select_rows(fleet, OverviewQuery.parse({"q": "residence", "sort": "budget"}))
                select_rows(fleet, OverviewQuery.parse({"status": "error", "per_page": "200"}))
                timings.append(time.perf_counter() - started)
                if index == 0:
                    event.remove(engine, "before_cursor_execute", record)
    return {
        "customers": count,
        "generate_s": round(generated_s, 1),
        "statements": len(statements),
        "overview_ms_median": round(1000 * statistics.median(timings), 1),
        "overview_ms_max": round(1000 * max(timings), 1),
    }


def main() -> None:
    """Run the measurement for each ``--count`` and print one line per count."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, nargs="+", default=[300, 1000])
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    for count in args.count:
        print(asyncio.run(measure(count, args.repeats)))


if __name__ == "__main__":
    main()
