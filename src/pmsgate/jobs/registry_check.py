"""check-registry: every customer's apartment registry checked against its listings
(docs/requirements.md R18.3, R18.5).

Each tick runs :func:`pmsgate.customers.registry_check.check_and_record` for every
customer with a platform workspace: one listings read each, the report stored as the
customer's latest check (``registry_checks``), which the console and the admin's
"needs attention" view read. A customer whose check could not run (the platform failed)
keeps its previous check and makes the tick fail, so the next tick tries again.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import structlog

from pmsgate.customers.context import CustomerServices
from pmsgate.customers.registry_check import check_and_record
from pmsgate.jobs.spec import error_detail, tick_summary

log = structlog.get_logger(__name__)

CHECK_REGISTRY = "check-registry"


async def check_registries(customers: CustomerServices) -> dict[str, Any]:
    """Check every customer's registry; the summary names those needing attention."""
    statuses: Counter[str] = Counter()
    problems: list[dict[str, Any]] = []
    unchecked: list[dict[str, Any]] = []
    failed: list[dict[str, str]] = []
    for customer in await customers.customers.all():
        workspace = await customers.workspaces.find(customer.student_id)
        if workspace is None or workspace.workspace_id is None:
            statuses["no_workspace"] += 1
            continue
        try:
            report = await check_and_record(customers, customer.student_id)
        except Exception as error:  # reported; the previous check stays, the next tick retries
            detail = error_detail(error)
            failed.append({"student_id": customer.student_id, **detail})
            log.warning("registry_check_failed", student_id=customer.student_id, **detail)
            continue
        statuses[report.status] += 1
        if report.status == "problems":
            problems.append(
                {
                    "student_id": customer.student_id,
                    "problems": len(report.problems),
                    "kinds": dict(Counter(p.kind.value for p in report.problems)),
                    "fixable": len(report.fixable),
                }
            )
        elif report.status == "unchecked":
            unchecked.append({"student_id": customer.student_id, "reason": report.reason})
    return tick_summary(
        {
            "checked": sum(n for status, n in statuses.items() if status != "no_workspace"),
            "statuses": dict(statuses),
            "problems": problems,
            "unchecked": unchecked,
            "failed": failed,
        },
        failed,
        "registry checks could not run",
    )
