"""The usage jobs: a usage snapshot of every customer every 6 hours, and the hourly gateway counts.

:func:`refresh_usage` (docs/requirements.md R19.1) reads each customer's cumulative consumption
from the assistant platform (``GET /v1/workspaces/{id}/usage``, an assumed API:
docs/assistant-api.md) and records a ``periodic`` snapshot with the booking-system
requests its facility made (``gateway_usage_hours``). The snapshot's ``taken_at``
is the start of the current slot (00, 06, 12, 18 UTC with the default 6-hour
interval), so a doubled tick — two replicas, a retry, cron and the server both
running it — records nothing more: the repository is idempotent on
(student, kind, taken_at), and a customer already recorded in the slot is not read
again. One customer failing never stops the others; the tick then fails (and the
next one retries the customers still missing).

:func:`flush_gateway_usage` drains this process's in-memory counts and, with Redis,
every replica's counts written there (:class:`pmsgate.gateway.usage.UsageCounter`)
into ``gateway_usage_hours``; a failed flush puts them back (into this process's
memory), so nothing is lost, only added later.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import structlog

from pmsgate.customers.context import CustomerServices
from pmsgate.gateway.context import GatewayServices
from pmsgate.gateway.usage import UsageHistory, add_counts
from pmsgate.integrations.assistant.client import AssistantClient
from pmsgate.jobs.spec import JobPartlyFailed, error_detail, grid_start, interval_setting
from pmsgate.storage.db import session_factory

log = structlog.get_logger(__name__)

REFRESH_USAGE = "refresh-usage"
# Every 6 hours: 00, 06, 12, 18 UTC (PMSGATE_JOB_INTERVALS_S changes it; a snapshot's slot too).
REFRESH_USAGE_EVERY_S = 21600.0
FLUSH_GATEWAY_USAGE = "flush-gateway-usage"

SnapshotOutcome = Literal["recorded", "already_recorded", "without_workspace"]


def usage_slot(now: datetime, interval_s: float) -> datetime:
    """The ``taken_at`` of a snapshot read at ``now``: the start of its refresh interval."""
    return grid_start(now, interval_s)


async def refresh_usage(customers: CustomerServices) -> dict[str, Any]:
    """Record a ``periodic`` usage snapshot of every customer with a workspace (this slot's)."""
    now = customers.clock.now()
    slot = usage_slot(
        now, interval_setting(customers.settings, REFRESH_USAGE, REFRESH_USAGE_EVERY_S)
    )
    # No platform token is a configuration error: the whole tick fails, nothing is half-done.
    assistant = customers.assistant
    hours = UsageHistory(customers.sessions)
    done: dict[str, list[str]] = {
        "recorded": [],
        "already_recorded": [],
        "without_workspace": [],
    }
    failed: list[dict[str, str]] = []
    everyone = await customers.customers.all()
    for customer in everyone:
        try:
            outcome = await snapshot_customer(
                customers, assistant, hours, customer.student_id, slot
            )
        except Exception as error:  # one customer's failure is reported, the others go on
            detail = error_detail(error)
            failed.append({"student_id": customer.student_id, **detail})
            log.warning("usage_snapshot_failed", student_id=customer.student_id, **detail)
            continue
        done[outcome].append(customer.student_id)
    summary: dict[str, Any] = {"taken_at": slot.isoformat(), **done, "failed": failed}
    if failed:
        raise JobPartlyFailed(
            f"The usage of {len(failed)} of {len(everyone)} customers could not be recorded.",
            summary,
        )
    return summary


async def snapshot_customer(
    customers: CustomerServices,
    assistant: AssistantClient,
    hours: UsageHistory,
    student_id: str,
    slot: datetime,
) -> SnapshotOutcome:
    """One customer's snapshot of ``slot``: read from the platform unless already recorded."""
    ctx = await customers.context(student_id)
    if ctx.workspace_id is None:
        return "without_workspace"
    # A slot that began before the customer's baseline is stamped at the baseline: a
    # snapshot is never dated before consumption started being counted. Still the same
    # instant for every replica and every retry of the slot, so recording stays idempotent.
    baseline = await customers.usage.baseline(ctx.student_id)
    if baseline is not None and baseline.taken_at > slot:
        slot = baseline.taken_at
    latest = await customers.usage.latest(ctx.student_id, "periodic")
    if latest is not None and latest.taken_at == slot:
        # Another replica (or cron) already took this slot: no platform request at all.
        return "already_recorded"
    usage = await assistant.workspace_usage(ctx.workspace_id)
    gateway = await hours.total(ctx.hotel_id) if ctx.hotel_id is not None else None
    _, stored = await customers.usage.record(
        ctx.student_id,
        taken_at=slot,
        usd_spent=usage.usd_spent,
        messages=usage.messages,
        tool_calls=usage.tool_calls,
        upstream_calls=gateway.upstream_calls if gateway is not None else 0,
        kind="periodic",
        workspace_id=ctx.workspace_id,
        details={
            **(usage.model_extra or {}),
            "platform_as_of": usage.as_of.isoformat() if usage.as_of else None,
            "read_at": customers.clock.now().isoformat(),
            "hotel_id": ctx.hotel_id,
            "gateway_tool_calls": gateway.tool_calls if gateway is not None else 0,
        },
    )
    return "recorded" if stored else "already_recorded"


async def flush_gateway_usage(services: GatewayServices) -> dict[str, Any]:
    """Add the counts of tool calls and upstream requests to the hourly table.

    This process's own (in memory) and, with Redis, every replica's written there; then
    this process's gateway-key uses (``last_used_at``, FacilityService.flush_key_uses) and
    its tool-call log (CallLog.flush).
    """
    await services.usage.settle()
    counts = services.usage.drain()
    add_counts(counts, await services.usage.take_shared())
    try:
        hours = await UsageHistory(session_factory(services.engine)).add(counts)
    except BaseException:
        # Back into the counter: the next flush adds them with whatever came since.
        services.usage.restore(counts)
        raise
    # The same tick writes the gateway keys' last use, batched in memory since the last one,
    # and this process's tool-call log and upstream health (pmsgate.gateway.call_log).
    keys_used = await services.facilities.flush_key_uses()
    logged = await services.gateway.call_log.flush()
    summary: dict[str, Any] = {
        "hours": hours,
        "tool_calls": sum(c.tool_calls for c in counts.values()),
        "upstream_calls": sum(c.upstream_calls for c in counts.values()),
        "keys_used": keys_used,
        "calls_logged": logged.calls,
        "upstream_health": logged.facilities,
    }
    if logged.dropped:
        summary["calls_dropped"] = logged.dropped
    return summary


PURGE_TOOL_CALLS = "purge-tool-calls"


async def purge_tool_calls(services: GatewayServices) -> dict[str, Any]:
    """Remove the logged calls older than PMSGATE_TOOL_CALL_LOG_RETENTION_DAYS and those
    beyond PMSGATE_TOOL_CALL_LOG_MAX_PER_FACILITY per facility (the oldest first)."""
    call_log = services.gateway.call_log
    removed = await call_log.purge(services.clock.now())
    return {
        **removed,
        "retention_days": call_log.retention.days,
        "max_per_facility": call_log.max_rows_per_facility,
    }
