"""The admin console: every customer at a glance, what needs attention, one customer in full.

- ``/console`` (admins; :func:`overview_page`, dispatched from :mod:`pmsgate.web.console`):
  search, filters, sorting and pagination as query parameters (bookmarkable; a bad value is
  a 422 page naming the allowed values), the totals over every customer, and a link to
- ``/console/attention``: the customers with a problem (booking system in ``error``, a manual
  step past due, a registry problem, a budget nearly spent) and the scheduled jobs whose
  latest run failed;
- ``/console/customers/{student_id}`` (admins; :func:`admin_customer_page`): the full
  checklist with step ids, booking-system status and reconnect, keys, sync, charts and the
  customer's recent audit events.

The lists are read with :class:`pmsgate.web.admin_views.AdminOverview` in a constant number
of queries whatever the number of customers.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from pmsgate.customers.checks import customer_not_found
from pmsgate.customers.registry_check import latest_problems
from pmsgate.errors import Forbidden, PmsgateError
from pmsgate.storage.audit import AuditFilter
from pmsgate.web.admin_views import (
    BUDGET_WARNING_PCT,
    PER_PAGE_CHOICES,
    PROBLEM_LABELS,
    ROUTES,
    SORTS,
    STATUSES,
    AdminOverview,
    Fleet,
    OverviewQuery,
    select_rows,
    step_choices,
)
from pmsgate.web.app import login_redirect
from pmsgate.web.auth import AdminWrite, actor_of, optional_principal
from pmsgate.web.context import WebDep, WebServices
from pmsgate.web.templating import templates
from pmsgate.web.users import Principal

router = APIRouter(include_in_schema=False)

MaybePrincipal = Annotated[Principal | None, Depends(optional_principal)]

# How many of a customer's audit events its admin page shows (the rest: /console/audit).
RECENT_EVENTS = 15


def _page(
    request: Request, template: str, context: dict[str, Any], *, status_code: int = 200
) -> HTMLResponse:
    from pmsgate.web.console import PAGE_HEADERS

    return templates.TemplateResponse(
        request, template, context, status_code=status_code, headers=PAGE_HEADERS
    )


def _error(request: Request, principal: Principal | None, error: PmsgateError) -> Response:
    from pmsgate.web.console import error_page

    return error_page(request, principal, error)


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


def _admin_only(principal: Principal) -> None:
    if not principal.is_admin:
        raise Forbidden("Only an admin sees every customer.")


async def overview_page(request: Request, web: WebServices, principal: Principal) -> Response:
    """The admin overview: search, filters, sort, pages, totals (``/console`` for admins)."""
    try:
        _admin_only(principal)
        query = OverviewQuery.parse(dict(request.query_params))
    except PmsgateError as error:
        return _error(request, principal, error)
    fleet = await read_fleet(web)
    selection = select_rows(fleet, query)
    return _page(
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


@router.get("/console/attention", response_class=HTMLResponse)
async def attention(request: Request, web: WebDep, principal: MaybePrincipal) -> Response:
    """What needs a person now: customers with a problem, and failing scheduled jobs."""
    if principal is None:
        return login_redirect(request)
    try:
        _admin_only(principal)
    except PmsgateError as error:
        return _error(request, principal, error)
    fleet = await read_fleet(web)
    rows = fleet.attention
    groups = {
        kind: [row for row in rows if any(p.kind == kind for p in row.problems)]
        for kind in PROBLEM_LABELS
    }
    return _page(
        request,
        "admin_attention.html",
        {
            "principal": principal,
            "fleet": fleet,
            "totals": fleet.totals(),
            "groups": groups,
            "labels": PROBLEM_LABELS,
            "budget_warning_pct": BUDGET_WARNING_PCT,
        },
    )


@router.post("/console/customers/{student_id}/invite", response_class=RedirectResponse)
async def send_invitation(request: Request, student_id: str, principal: AdminWrite) -> Response:
    """Send the customer's console account a new invitation (created first when absent).

    303 back to the customer's page, which says it was sent (or why not); audited
    ``account.invited`` with the admin as actor.
    """
    from pmsgate.web.context import web_services

    web = web_services(request)
    back = f"/console/customers/{quote(student_id, safe='')}"
    try:
        customer = await web.customers.customers.find(student_id)
        if customer is None:
            raise customer_not_found(student_id)
        account, _ = await web.users.ensure_customer_account(student_id, customer.email)
        await web.invitations.send(account, "invite", actor=actor_of(principal))
    except PmsgateError as error:
        return RedirectResponse(
            f"{back}?{urlencode({'invite_error': error.code})}#account", status_code=303
        )
    return RedirectResponse(f"{back}?invited=1#account", status_code=303)


async def admin_customer_page(request: Request, principal: Principal, student_id: str) -> Response:
    """One customer in full for an admin (``/console/customers/{student_id}``)."""
    from pmsgate.web.console import _customer_context
    from pmsgate.web.context import web_services

    web = web_services(request)
    try:
        _admin_only(principal)
        context = await _customer_context(request, principal, student_id)
        found = context["page"].ctx.student_id
        owner = await web.audit.owner(found)
        events = await web.audit.page(AuditFilter(owner=owner), limit=RECENT_EVENTS)
        account = await web.invitations.state(found, context["page"].ctx.customer.email)
    except PmsgateError as error:
        return _error(request, principal, error)
    return _page(
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
        },
    )
