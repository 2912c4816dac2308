"""The admin's pages of the console: every customer at a glance, and one customer in full.

- :func:`overview_page` is ``/console`` for an admin: search, filters, sorting and
  pagination as query parameters (bookmarkable; a bad value is a 422 page naming the
  allowed values) and the totals over every customer, read with
  :class:`pmsgate.web.admin_views.AdminOverview` in a constant number of queries;
- :func:`admin_customer_page` is ``/console/customers/{student_id}`` for an admin: the
  full checklist with its manual steps' forms, booking-system status and reconnect, keys,
  sync, charts, the incidents panel and the customer's recent audit events.

:mod:`pmsgate.web.console` routes both (a customer's user gets its own page instead); the
forms these pages post are routed by :mod:`pmsgate.web.admin_console` and
:mod:`pmsgate.web.incident_console`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import Response

from pmsgate import i18n
from pmsgate.customers.registry_check import latest_problems
from pmsgate.errors import Forbidden
from pmsgate.onboarding.context import OnboardingServices
from pmsgate.onboarding.registry import STEPS
from pmsgate.onboarding.steps import StepKind
from pmsgate.storage.audit import AuditFilter
from pmsgate.web.admin_views import (
    BUDGET_WARNING_PCT,
    PER_PAGE_CHOICES,
    ROUTES,
    SORTS,
    STATUSES,
    AdminOverview,
    Fleet,
    OverviewQuery,
    select_rows,
    step_choices,
)
from pmsgate.web.connection_health import health_panel_context
from pmsgate.web.context import WebServices, web_services
from pmsgate.web.customer_pages import customer_context, minted_key_context
from pmsgate.web.incident_views import SNOOZES
from pmsgate.web.pages import render_page
from pmsgate.web.users import Principal

# How many of a customer's audit events its admin page shows (the rest: /console/audit).
RECENT_EVENTS = 15
# The words of an action's confirmation box, by ``done=``.
DONE_WORDS = {
    "acknowledge": "Acknowledged.",
    "assign": "Assignee changed.",
    "snooze": "Snoozed.",
    "note": "Note added.",
    "check_connected": "Check now: the booking system accepted the stored credentials.",
    "check_refused": "Check now: the booking system refused the stored credentials.",
    "check_no_verdict": "Check now: no verdict (see the timeline).",
    "resend_sign-in link": "The sign-in link was sent to the customer again.",
    "resend_invitation": "The customer has no password yet: the invitation was sent again.",
}


async def _registry_problems(web: WebServices) -> dict[str, list[str]]:
    """The latest registry check's problems per customer (one query)."""
    return await latest_problems(web.customers)


async def read_fleet(web: WebServices) -> Fleet:
    """Every customer's overview row (a constant number of queries)."""
    overview = AdminOverview(
        web.customers.sessions,
        web.clock,
        snapshot=web.gateway.metrics.facilities,
        registry_problems=await _registry_problems(web),
    )
    return await overview.fleet()


def admin_only(principal: Principal, message: str = "Only an admin sees every customer.") -> None:
    """403 forbidden unless the reader is a platform admin."""
    if not principal.is_admin:
        raise Forbidden(message)


async def overview_page(request: Request, web: WebServices, principal: Principal) -> Response:
    """The admin overview: search, filters, sort, pages, totals (``/console`` for admins)."""
    admin_only(principal)
    query = OverviewQuery.parse(dict(request.query_params))
    fleet = await read_fleet(web)
    selection = select_rows(fleet, query)
    return render_page(
        request,
        "admin_home.html",
        {
            "principal": principal,
            "fleet": fleet,
            "totals": fleet.totals(),
            "query": query,
            "selection": selection,
            "statuses": STATUSES,
            "routes": ROUTES,
            "sorts": SORTS,
            "per_page_choices": PER_PAGE_CHOICES,
            "step_choices": step_choices(),
            "budget_warning_pct": BUDGET_WARNING_PCT,
        },
    )


async def admin_customer_page(request: Request, principal: Principal, student_id: str) -> Response:
    """One customer in full for an admin (``/console/customers/{student_id}``)."""
    web = web_services(request)
    admin_only(principal)
    context = await customer_context(request, principal, student_id)
    found = context["page"].ctx.student_id
    owner = await web.audit.owner(found)
    events = await web.audit.page(AuditFilter(owner=owner), limit=RECENT_EVENTS)
    account = await web.invitations.state(found, context["page"].ctx.customer.email)
    return render_page(
        request,
        "admin_customer.html",
        {
            **context,
            "account": account,
            "invited": request.query_params.get("invited"),
            "invite_error": request.query_params.get("invite_error"),
            "events": events.events,
            "more_events": events.next_cursor is not None,
            "audit_link": "/console/audit?"
            + urlencode({"customer": context["page"].ctx.student_id}),
            **await incident_panel_context(request, principal, found),
            **await health_panel_context(web, found),
            **await minted_key_context(request, context["page"]),
            "person_steps": await person_steps(request, found),
            "step_done": request.query_params.get("step_done"),
            "step_error": request.query_params.get("step_error"),
            "step_ref": request.query_params.get("step"),
            "unlocked": request.query_params.get("unlocked"),
            "unlock_error": request.query_params.get("unlock_error"),
        },
    )


@dataclass(frozen=True)
class PersonStep:
    """What the customer page offers for one step a person does: confirm it, or reopen it."""

    step_id: str
    items: tuple[tuple[str, str], ...]  # (item id, what a person does) of a step by items
    pending_items: tuple[str, ...]  # items still to confirm
    confirmed_items: tuple[str, ...]  # items a person confirmed (each can be reopened)
    confirmable: bool  # the step (or an item) waits for a person's evidence
    reopenable: bool  # a person's confirmation of the whole step can be taken back


def onboarding_services(request: Request) -> OnboardingServices:
    """The onboarding services of the app's container."""
    services: OnboardingServices = request.app.state.container.onboarding
    return services


async def person_steps(request: Request, student_id: str) -> dict[str, PersonStep]:
    """Per step id, the confirm/reopen forms the admin customer page shows for it."""
    repo = onboarding_services(request).repository
    checklist = await repo.checklist(student_id)
    confirmations = await repo.confirmations(student_id)
    found: dict[str, PersonStep] = {}
    for step in STEPS:
        latest = checklist.get(step.id)
        if latest is None:
            continue
        confirmed = confirmations.get(step.id)
        evidence = dict(confirmed.evidence) if confirmed is not None else {}
        confirmed_items = tuple(i for i in step.item_ids if i in (evidence.get("items") or {}))
        waiting = latest.status == "waiting"
        manual = step.kind is StepKind.MANUAL
        if not (manual or waiting or evidence):
            continue
        found[step.id] = PersonStep(
            step_id=step.id,
            items=tuple((item.id, item.text) for item in step.items),
            pending_items=tuple(i for i in step.item_ids if i not in confirmed_items),
            confirmed_items=confirmed_items,
            confirmable=waiting or (manual and latest.status != "done"),
            reopenable=not step.items and bool(evidence.get("evidence")),
        )
    return found


async def panel_context(web: WebServices, principal: Principal, request: Request) -> dict[str, Any]:
    """What ``_incident_panel.html`` needs besides the incidents: the team, the choices, the
    outcome box of the last action."""
    team = await web.incidents.team()
    return {
        "team": team,
        "snoozes": tuple(SNOOZES),
        "today": i18n.local(web.clock.now()).date(),
        "done": DONE_WORDS.get(request.query_params.get("done", "")),
        "incident_error": request.query_params.get("incident_error"),
        "repeated": request.query_params.get("repeated") == "1",
        "here": request.url.path + (f"?{request.url.query}" if request.url.query else ""),
    }


async def incident_panel_context(
    request: Request, principal: Principal, student_id: str
) -> dict[str, Any]:
    """The admin customer page's incident panel: the customer's incidents with timelines."""
    web = web_services(request)
    context = await web.customers.context(student_id)
    hotel_ids = [context.hotel_id] if context.hotel_id else []
    return {
        "customer_incidents": await web.incidents.of_customer(student_id, hotel_ids),
        "incident_panel": await panel_context(web, principal, request),
    }
