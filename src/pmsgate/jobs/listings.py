"""The listings-sync restart: after a reconnect, the registry is synced again
(docs/requirements.md R11.4, R18.6).

A reconnect (``PUT /api/admin/kross/connect``) marks the customer's kross
integration row with ``listings_sync_due_at``; this job runs
:func:`pmsgate.customers.service.sync_registry` for every row that is due and
clears the mark once the sync succeeded. A failed sync keeps the mark, so the
next tick (every minute by default) tries again.

Replicas: a row is *claimed* by moving its due time a lease ahead with a
compare-and-set, so one replica syncs it while the others skip it; a replica that
dies mid-sync leaves the row due again when the lease ends. The mark is cleared
with a compare-and-set too, so a reconnect that asks again while the sync runs is
never wiped by that sync finishing: the row stays due and syncs once more.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import structlog

from pmsgate.customers.context import CustomerServices
from pmsgate.customers.registry_check import refresh_after_sync
from pmsgate.customers.service import sync_registry
from pmsgate.jobs.spec import error_detail, tick_summary

log = structlog.get_logger(__name__)

RESTART_LISTINGS_SYNCS = "restart-listings-syncs"
# Longer than any listings sync takes (two reads and a few row updates).
SYNC_LEASE = timedelta(minutes=10)


async def restart_listings_syncs(customers: CustomerServices) -> dict[str, Any]:
    """Run every listings sync that is due; the tick fails when one of them failed."""
    integrations = customers.integrations
    now = customers.clock.now()
    synced: list[dict[str, Any]] = []
    waiting: list[str] = []
    claimed_elsewhere: list[str] = []
    failed: list[dict[str, str]] = []
    for row in await integrations.due_listings_syncs(now):
        due_at = row.listings_sync_due_at
        if due_at is None:
            continue
        if row.status != "connected":
            # No listings while the booking system refuses the credentials: a sync now would
            # only detach them. The mark stays; the reconnect that fixes it makes it useful.
            waiting.append(row.student_id)
            continue
        lease = customers.clock.now() + SYNC_LEASE
        if not await integrations.reschedule_listings_sync(row.id, expected=due_at, when=lease):
            claimed_elsewhere.append(row.student_id)
            continue
        try:
            result = await sync_registry(customers, row.student_id)
        except Exception as error:  # reported; the mark goes back so the next tick retries
            detail = error_detail(error)
            await integrations.reschedule_listings_sync(row.id, expected=lease, when=due_at)
            failed.append({"student_id": row.student_id, **detail})
            log.warning("listings_sync_failed", student_id=row.student_id, **detail)
            continue
        await integrations.reschedule_listings_sync(row.id, expected=lease, when=None)
        await refresh_after_sync(customers, row.student_id)
        synced.append(
            {
                "student_id": row.student_id,
                "listings": result.listings,
                "apartments": result.apartments,
                "created": result.created,
                "updated": result.updated,
            }
        )
    return tick_summary(
        {
            "synced": synced,
            "waiting_for_pms": waiting,
            "claimed_elsewhere": claimed_elsewhere,
            "failed": failed,
        },
        failed,
        "listings syncs failed",
    )
