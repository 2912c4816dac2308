"""The admin console: every customer at a glance, what needs attention, one customer in full.

- ``/console`` (admins; :func:`overview_page`, dispatched from :mod:`pmsgate.web.console`):
  search, filters, sorting and pagination as query parameters (bookmarkable; a bad value is
  a 422 page naming the allowed values), the totals over every customer, and a link to
- ``/console/attention``: the incidents and the failing scheduled jobs
  (:mod:`pmsgate.web.incident_console`);
- ``/console/customers/{student_id}`` (admins; :func:`admin_customer_page`): the full
  checklist with step ids, booking-system status and reconnect, keys, sync, charts and the
  customer's recent audit events.

The lists are read with :class:`pmsgate.web.admin_views.AdminOverview` in a constant number
of queries whatever the number of customers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from pmsgate.customers.checks import customer_not_found
from pmsgate.customers.registry_check import latest_problems
from pmsgate.errors import Forbidden, PmsgateError
from pmsgate.onboarding.context import OnboardingServices
from pmsgate.onboarding.registry import STEPS
from pmsgate.onboarding.runner import confirm_step, reopen_step
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
from pmsgate.web.auth import AdminWrite, actor_of, optional_principal
from pmsgate.web.context import WebServices
from pmsgate.web.form_tokens import repeated_path, spend_form_token
from pmsgate.web.sign_in_locks import recent_locks, unlock_sign_ins
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


# ``/console/attention`` (the incident list) is served by pmsgate.web.incident_console.


# The one-time token purpose of the invitation form (pmsgate.web.form_tokens).
INVITE_FORM = "invite"


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
        # One e-mail per form: a reload or a double click sends no second invitation.
        spend = await spend_form_token(request, INVITE_FORM)
    except PmsgateError as error:
        return _error(request, principal, error)
    if spend.repeated:
        return RedirectResponse(repeated_path(spend, f"{back}#account"), status_code=303)
    try:
        customer = await web.customers.customers.find(student_id)
        if customer is None:
            raise customer_not_found(student_id)
        account, _ = await web.users.ensure_customer_account(student_id, customer.email)
        await web.invitations.send(account, "invite", actor=actor_of(principal))
    except PmsgateError as error:
        await web.form_tokens.release(spend)
        return RedirectResponse(
            f"{back}?{urlencode({'invite_error': error.code})}#account", status_code=303
        )
    done = f"{back}?invited=1#account"
    await web.form_tokens.finish(spend, result_path=done)
    return RedirectResponse(done, status_code=303)


async def admin_customer_page(request: Request, principal: Principal, student_id: str) -> Response:
    """One customer in full for an admin (``/console/customers/{student_id}``)."""
    from pmsgate.web.connection_health import health_panel_context
    from pmsgate.web.console import _customer_context, minted_key_context
    from pmsgate.web.context import web_services
    from pmsgate.web.incident_console import incident_panel_context

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


# --- manual onboarding steps: confirmed or reopened from the customer page ----------------------

# The one-time token purposes of the step forms (a reload records nothing twice).
CONFIRM_STEP_FORM = "confirm_step"
REOPEN_STEP_FORM = "reopen_step"


@dataclass(frozen=True)
class PersonStep:
    """What the customer page offers for one step a person does: confirm it, or reopen it."""

    step_id: str
    items: tuple[tuple[str, str], ...]  # (item id, what a person does) of a step by items
    pending_items: tuple[str, ...]  # items still to confirm
    confirmed_items: tuple[str, ...]  # items a person confirmed (each can be reopened)
    confirmable: bool  # the step (or an item) waits for a person's evidence
    reopenable: bool  # a person's confirmation of the whole step can be taken back


def _onboarding(request: Request) -> OnboardingServices:
    services: OnboardingServices = request.app.state.container.onboarding
    return services


async def person_steps(request: Request, student_id: str) -> dict[str, PersonStep]:
    """Per step id, the confirm/reopen forms the admin customer page shows for it."""
    repo = _onboarding(request).repository
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


def _step_path(student_id: str, **params: str) -> str:
    query = f"?{urlencode(params)}" if params else ""
    return f"/console/customers/{quote(student_id, safe='')}{query}#onboarding"


async def _person_step_action(
    request: Request,
    principal: Principal,
    student_id: str,
    step_id: str,
    purpose: str,
    act: Callable[[OnboardingServices], Awaitable[object]],
) -> Response:
    """Spend the form's token, act once, and answer 303 to the checklist (PRG)."""
    from pmsgate.web.context import web_services

    web = web_services(request)
    try:
        spend = await spend_form_token(request, purpose)
    except PmsgateError as error:
        return _error(request, principal, error)
    if spend.repeated:
        return RedirectResponse(repeated_path(spend, _step_path(student_id)), status_code=303)
    try:
        await act(_onboarding(request))
    except PmsgateError as error:
        await web.form_tokens.release(spend)
        return RedirectResponse(
            _step_path(student_id, step_error=error.code, step=step_id), status_code=303
        )
    done = _step_path(student_id, step_done=purpose, step=step_id)
    await web.form_tokens.finish(spend, result_path=done)
    return RedirectResponse(done, status_code=303)


@router.post(
    "/console/customers/{student_id}/onboarding/{step_id}/confirm",
    response_class=RedirectResponse,
)
async def confirm_manual_step(
    request: Request,
    student_id: str,
    step_id: str,
    principal: AdminWrite,
    evidence: Annotated[str, Form(max_length=2000)] = "",
    item: Annotated[str, Form(max_length=64)] = "",
) -> Response:
    """Record the admin's evidence for a step (or one item) a person does; audited."""
    return await _person_step_action(
        request,
        principal,
        student_id,
        step_id,
        CONFIRM_STEP_FORM,
        lambda services: confirm_step(
            services,
            student_id,
            step_id,
            evidence,
            item=item or None,
            person=principal.email,
            actor=actor_of(principal),
        ),
    )


@router.post(
    "/console/customers/{student_id}/onboarding/{step_id}/reopen",
    response_class=RedirectResponse,
)
async def reopen_manual_step(
    request: Request,
    student_id: str,
    step_id: str,
    principal: AdminWrite,
    note: Annotated[str, Form(max_length=2000)] = "",
    item: Annotated[str, Form(max_length=64)] = "",
) -> Response:
    """Take back a person's confirmation of a step (or one item); audited."""
    return await _person_step_action(
        request,
        principal,
        student_id,
        step_id,
        REOPEN_STEP_FORM,
        lambda services: reopen_step(
            services,
            student_id,
            step_id,
            note,
            item=item or None,
            person=principal.email,
            actor=actor_of(principal),
        ),
    )


# --- sign-in locks: lift a pause of an account or an address ----------------------------------

SIGN_IN_LOCKS_PATH = "/console/sign-in-locks"


@router.get(SIGN_IN_LOCKS_PATH, response_class=HTMLResponse)
async def sign_in_locks_page(request: Request, principal: MaybePrincipal) -> Response:
    """Recent sign-in pauses, and the form to unlock an account or an address by typing it."""
    from pmsgate.web.app import login_redirect
    from pmsgate.web.context import web_services

    if principal is None:
        return login_redirect(request)
    try:
        _admin_only(principal)
    except PmsgateError as error:
        return _error(request, principal, error)
    web = web_services(request)
    settings = web.settings
    return _page(
        request,
        "admin_sign_in_locks.html",
        {
            "principal": principal,
            "locks": await recent_locks(web),
            "unlocked": request.query_params.get("unlocked"),
            "unlock_error": request.query_params.get("unlock_error"),
            "window_min": round(settings.login_failure_window_s / 60),
            "ceilings": {
                "pair": settings.login_max_failures,
                "address": settings.login_address_max_failures,
                "account": settings.login_account_max_failures,
            },
        },
    )


@router.post(f"{SIGN_IN_LOCKS_PATH}/unlock", response_class=RedirectResponse)
async def unlock_sign_in(
    request: Request,
    principal: AdminWrite,
    email: Annotated[str, Form(max_length=320)] = "",
    address: Annotated[str, Form(max_length=64)] = "",
    next_url: Annotated[str | None, Form(alias="next", max_length=2048)] = None,
) -> Response:
    """Lift the pause of an account and/or an address (audited); 303 back with what happened."""
    from pmsgate.web.auth import safe_next
    from pmsgate.web.context import web_services
    from pmsgate.web.form_tokens import with_query

    back = safe_next(next_url) or SIGN_IN_LOCKS_PATH
    try:
        done = await unlock_sign_ins(
            web_services(request), email=email, address=address, actor=actor_of(principal)
        )
    except PmsgateError as error:
        return RedirectResponse(with_query(back, unlock_error=error.code), status_code=303)
    what = "both" if done.email and done.address else ("account" if done.email else "address")
    return RedirectResponse(with_query(back, unlocked=what), status_code=303)
