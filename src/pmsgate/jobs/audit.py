"""The audit trail's scheduled work: the retention purge and the record of expired keys.

Both are declared in :data:`pmsgate.jobs.registry.JOB_SPECS`; both are the trail's own
methods (:class:`pmsgate.audit.trail.AuditTrail`), run at the scheduler's clock.
"""

from __future__ import annotations

from typing import Any

from pmsgate.audit.actions import Actor
from pmsgate.web.context import WebServices

PURGE_AUDIT_EVENTS = "purge-audit-events"
RECORD_KEY_EXPIRY = "record-key-expiry"


async def purge_audit_events(web: WebServices) -> dict[str, Any]:
    """Remove the events older than PMSGATE_AUDIT_RETENTION_DAYS (the purge records itself)."""
    removed = await web.audit.purge_expired(web.clock.now())
    return {"removed": removed, "retention_days": web.audit.retention.days}


async def record_key_expiry(web: WebServices) -> dict[str, Any]:
    """Record ``key.expired`` once for each gateway key whose expiry has passed since."""
    recorded = await web.audit.record_expired_keys(
        web.clock.now(), actor=Actor.job(RECORD_KEY_EXPIRY)
    )
    return {"recorded": recorded}
