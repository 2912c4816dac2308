"""A customer's page in the console: what its template and its panels are rendered with.

:func:`customer_context` is the one read of a customer's page (the admin's detailed page
and the customer's plain one, and every panel htmx swaps on them): the page's reads
(:func:`pmsgate.web.views.customer_page`), the words of its sync and booking-system state,
its charts, the latest registry check. The routes that render it are in
:mod:`pmsgate.web.console` and :mod:`pmsgate.web.admin_pages`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import Request

from pmsgate.customers.registry_check import latest_registry_check
from pmsgate.i18n import N_, gettext
from pmsgate.storage.audit import AuditFilter
from pmsgate.web.charts import Chart, Series, chart_figure, hourly_chart, time_chart, usd_label
from pmsgate.web.context import WebServices, web_services
from pmsgate.web.customer_view import CustomerHome, booking_state, customer_home, reconnect_words
from pmsgate.web.forms import take_handoff
from pmsgate.web.pages import customer_path, is_htmx
from pmsgate.web.sync_words import error_words, explain_job
from pmsgate.web.users import Principal
from pmsgate.web.views import COMMIT_COUNTERS, DRY_RUN_COUNTERS, CustomerPage, customer_page

# What a browser without JavaScript re-reads while a sync runs, in seconds.
NO_SCRIPT_REFRESH_S = 3
# How often htmx polls a running sync's panel.
POLL_EVERY = "1s"
# The query parameter naming a mint's one-time hand-off on the page after its redirect.
MINTED_PARAM = "minted"

# The charts' empty states (translated where they are used: gettext(USAGE_EMPTY)).
USAGE_EMPTY = N_(
    "No usage yet — the first snapshot is taken when set-up finishes, then one every 6 hours."
)
HOURLY_EMPTY = N_("No assistant lookups in the last 48 hours.")


def _since_onboarding(page: CustomerPage) -> tuple[list[datetime], dict[str, list[float]]]:
    """The known snapshots' totals minus the baseline's (else the first known snapshot's).

    A snapshot recorded as unknown (the platform's usage could not be read) is left out,
    never drawn as zeros.
    """
    known = [s for s in page.snapshots if s.known]
    if not known:
        return [], {}
    base = next((s for s in known if s.kind == "baseline"), known[0])
    shown = [s for s in known if s.taken_at >= base.taken_at]

    def since(values: list[float]) -> list[float]:
        return [max(0.0, v - values[0]) for v in values]

    return [s.taken_at for s in shown], {
        "messages": since([float(s.messages or 0) for s in shown]),
        "tool calls": since([float(s.tool_calls or 0) for s in shown]),
        "usd": since([float(s.usd_spent or 0) for s in shown]),
    }


def console_charts(page: CustomerPage) -> list[Chart]:
    """The customer's charts: usage since onboarding, its cost, and the last 48 hours."""
    times, values = _since_onboarding(page)
    lookups = gettext("assistant lookups (tool calls)")
    usage = time_chart(
        gettext("Usage since onboarding"),
        times,
        [
            Series(gettext("guest messages"), values.get("messages", [])),
            Series(lookups, values.get("tool calls", [])),
        ],
        unit=gettext("count since onboarding"),
        empty=gettext(USAGE_EMPTY),
        key="usage-since-onboarding",
    )
    cost = time_chart(
        gettext("Spend since onboarding"),
        times,
        [Series(gettext("spend (US dollars)"), values.get("usd", []))],
        unit=gettext("US dollars"),
        empty=gettext(USAGE_EMPTY),
        y_format=usd_label,
        key="spend-since-onboarding",
    )
    hours = page.hours
    hourly = hourly_chart(
        gettext("Assistant lookups vs booking-system requests, per hour (last 48 hours)"),
        [h.hour for h in hours],
        [
            Series(lookups, [h.tool_calls for h in hours]),
            Series(gettext("booking-system requests"), [h.upstream_calls for h in hours]),
        ],
        unit=gettext("calls per hour"),
        empty=gettext(HOURLY_EMPTY),
        key="assistant-lookups-vs-booking-system-requ",
    )
    return [usage, cost, hourly]


def _charts(page: CustomerPage) -> dict[str, Any]:
    charts = console_charts(page)
    usage, _, hourly = charts
    return {
        "charts": charts,
        "chart_figures": [chart_figure(chart) for chart in charts],
        # One chart's figure alone (the admin page's slots).
        "usage_chart": chart_figure(usage),
        "hourly_chart": chart_figure(hourly),
    }


# How many of the customer's own audit events its page lists (the rest: /console/audit).
RECENT_EVENTS = 30  # grouped by day on the page: the same thing ten times is one line
# How many recent sync jobs the customer's page reads (the newest commit among them).
RECENT_JOBS = 10


async def _sync_open(web: WebServices, student_id: str) -> bool:
    """Whether the allowlist admits the customer's knowledge sync (read now, no cache)."""
    return await web.customers.allowlist.customer_allowed(student_id)


async def _home(web: WebServices, principal: Principal, page: CustomerPage) -> CustomerHome:
    """The plain-language page of a customer (its answers, to-dos, sync and events)."""
    student_id = page.ctx.student_id
    owner = await web.audit.owner(student_id)
    events = await web.audit.page(AuditFilter(owner=owner), limit=RECENT_EVENTS)
    return customer_home(
        page,
        jobs=await web.sync_jobs.repo.jobs_of(student_id, limit=RECENT_JOBS),
        events=events.events,
        sync_open=await _sync_open(web, student_id),
        viewer=principal.email,
    )


async def customer_context(
    request: Request, principal: Principal, student_id: str, **extra: Any
) -> dict[str, Any]:
    """What a customer's page and its panels render: the page's reads and words, ``extra``.

    The customer's own user gets its plain-language home too; an htmx request brings the
    customer's summary along with a swapped panel (out of band).
    """
    web = web_services(request)
    page = await customer_page(web, student_id)
    job = extra.pop("job", None) or page.row.last_sync
    booking = booking_state(page)
    return {
        "principal": principal,
        "page": page,
        "job": job,
        "booking": booking,
        "sync_words": explain_job(job, booking) if job is not None else None,
        "home": None if principal.is_admin else await _home(web, principal, page),
        "error_words": error_words,
        # A panel swapped by htmx brings the customer's summary along (out of band).
        "oob_status": is_htmx(request) and not principal.is_admin,
        "reconnect_words": reconnect_words,
        "dry_run_counters": DRY_RUN_COUNTERS,
        "commit_counters": COMMIT_COUNTERS,
        "no_script_refresh_s": NO_SCRIPT_REFRESH_S,
        "poll_every": POLL_EVERY,
        "customer_path": customer_path(page.ctx.student_id),
        # The latest stored registry check (the check-registry job's or a console check).
        "registry": await latest_registry_check(web.customers, page.ctx.student_id),
        # A stored check cannot vouch for the apartments while the booking system refuses us.
        "registry_paused": booking == "error",
        **_charts(page),
        **extra,
    }


def page_template(principal: Principal) -> str:
    """The whole page of a customer for this reader: the detailed one, or the plain one."""
    return "admin_customer.html" if principal.is_admin else "customer_home.html"


async def minted_key_context(request: Request, page: CustomerPage) -> dict[str, Any]:
    """The page after a mint: the new key's row and its raw value, this once; else why not."""
    ref = request.query_params.get(MINTED_PARAM)
    if not ref:
        return {}
    handoff = await take_handoff(request, ref)
    if handoff is None:
        # Reloaded, opened from history or by another session: the key is not shown again.
        return {"minted_gone": True}
    key_id, _, raw = handoff.partition(":")
    row = next((row for row in page.keys if str(row.key.id) == key_id), None)
    return {"minted_key": row.key if row is not None else None, "minted_raw": raw}
