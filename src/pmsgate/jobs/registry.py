"""The scheduled jobs of pmsgate, each declared once (docs/jobs.md; docs/extending.md).

Adding a job is one :class:`~pmsgate.jobs.spec.JobSpec` in :data:`JOB_SPECS`: its
name, default interval and the coroutine function it runs on the process's services
(``WebServices``: ``.gateway``, ``.customers``, ``.settings``, ``.clock``). The
scheduler, ``pmsgate jobs list|run`` and the console read this list; its interval is
``PMSGATE_JOB_INTERVALS_S`` ``{"name": seconds}`` when set, no new setting needed.
"""

from __future__ import annotations

from pmsgate.jobs.audit import (
    PURGE_AUDIT_EVENTS,
    RECORD_KEY_EXPIRY,
    purge_audit_events,
    record_key_expiry,
)
from pmsgate.jobs.connections import CHECK_CONNECTIONS, check_connections
from pmsgate.jobs.listings import RESTART_LISTINGS_SYNCS, restart_listings_syncs
from pmsgate.jobs.notify import NOTIFY_INCIDENTS, notify_incidents
from pmsgate.jobs.registry_check import CHECK_REGISTRY, check_registries
from pmsgate.jobs.spec import JobSpec, check_specs
from pmsgate.jobs.usage import (
    FLUSH_GATEWAY_USAGE,
    PURGE_TOOL_CALLS,
    REFRESH_USAGE,
    REFRESH_USAGE_EVERY_S,
    flush_gateway_usage,
    purge_tool_calls,
    refresh_usage,
)
from pmsgate.webhooks.delivery import (
    DELIVER_WEBHOOKS,
    PURGE_WEBHOOK_DELIVERIES,
    deliver_webhooks,
    purge_webhook_deliveries,
)

JOB_SPECS: tuple[JobSpec, ...] = (
    JobSpec(
        REFRESH_USAGE,
        default_interval_s=REFRESH_USAGE_EVERY_S,
        run=lambda web: refresh_usage(web.customers),
        description="Usage snapshot of every customer's workspace (platform spend, messages, "
        "tool calls) and its facility's upstream requests.",
    ),
    JobSpec(
        FLUSH_GATEWAY_USAGE,
        default_interval_s=60.0,
        run=lambda web: flush_gateway_usage(web.gateway),
        description="Add the counts of tool calls and upstream requests (this process's, and "
        "every replica's written to Redis) to the hourly table.",
        # Counts still in memory when the server stops are written, not dropped.
        run_at_exit=True,
        per_process=True,
    ),
    JobSpec(
        CHECK_CONNECTIONS,
        default_interval_s=900.0,
        run=lambda web: check_connections(web.gateway),
        description="One background read per connected facility, so a changed password shows "
        "as error.",
    ),
    JobSpec(
        RESTART_LISTINGS_SYNCS,
        default_interval_s=60.0,
        run=lambda web: restart_listings_syncs(web.customers),
        description="Run the listings syncs a reconnect asked for (and retry those that failed).",
    ),
    JobSpec(
        CHECK_REGISTRY,
        default_interval_s=3600.0,
        run=lambda web: check_registries(web.customers),
        description="Check that every apartment of every customer maps to a listing of its "
        "room type (else the assistant answers 'Listing unavailable'); the latest check of each "
        "customer is "
        "what the console shows.",
    ),
    JobSpec(
        NOTIFY_INCIDENTS,
        default_interval_s=60.0,
        run=notify_incidents,
        description="Tell the customer and the team when a facility goes to error (once per "
        "incident, with a one-time sign-in link to the reconnect form) and when it recovers.",
    ),
    JobSpec(
        PURGE_AUDIT_EVENTS,
        default_interval_s=86400.0,
        run=purge_audit_events,
        description="Remove the audit events older than PMSGATE_AUDIT_RETENTION_DAYS "
        "(the purge is itself an event).",
    ),
    JobSpec(
        PURGE_TOOL_CALLS,
        default_interval_s=3600.0,
        run=lambda web: purge_tool_calls(web.gateway),
        description="Remove the logged tool calls older than PMSGATE_TOOL_CALL_LOG_RETENTION_DAYS "
        "or beyond PMSGATE_TOOL_CALL_LOG_MAX_PER_FACILITY per facility.",
    ),
    JobSpec(
        DELIVER_WEBHOOKS,
        default_interval_s=15.0,
        run=lambda web: deliver_webhooks(web.webhook_deliverer),
        description="Send the signed event webhooks: each new event to every subscription "
        "asking for it, once, retried with backoff (docs/webhooks.md).",
    ),
    JobSpec(
        PURGE_WEBHOOK_DELIVERIES,
        default_interval_s=3600.0,
        run=lambda web: purge_webhook_deliveries(web.webhook_deliverer),
        description="Remove the webhook events older than PMSGATE_WEBHOOK_RETENTION_DAYS and "
        "their settled deliveries.",
    ),
    JobSpec(
        RECORD_KEY_EXPIRY,
        default_interval_s=300.0,
        run=record_key_expiry,
        description="Record key.expired in the audit trail once for each gateway key whose "
        "expiry has passed.",
    ),
)
check_specs(JOB_SPECS)

# Work only the process itself can do: its own in-memory counts. It runs in every server
# process, whether the shared jobs run in-process or from an external scheduler.
PER_PROCESS_JOBS = frozenset(spec.name for spec in JOB_SPECS if spec.per_process)
