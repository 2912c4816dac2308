"""The console's incidents: the "needs attention" list, one incident's page, and their actions.

- ``GET /console/attention`` — the incidents like an issue tracker's list: filters by kind,
  state and assignee and the sort (age, last seen, count) are query parameters
  (bookmarkable; a bad value is a 422 page naming the allowed values), each row with its
  customer, facility, kind, age, count, notices, state and assignee; the failing scheduled
  jobs below it.
- ``GET /console/incidents/{id}`` — one incident: its facts, notices and timeline, and the
  action buttons (the admin customer page shows the same panel, ``_incident_panel.html``).
- ``POST /console/incidents/{id}/{acknowledge|assign|snooze|note|check|resend}`` — one
  action, audited with the admin as actor; the answer is 303 back to the page it came
  from (``next``, a path on this site), with ``done=`` or ``incident_error=`` for its box.
- ``GET /console/attention/bulk?action=…&<the list's filters>`` — the confirmation page:
  how many incidents of the current selection the action applies to, and which;
  ``POST /console/attention/bulk`` acts on exactly those (their ids are in the form), then
  303 to the list with the outcome.

Every POST takes the session's CSRF token (:data:`pmsgate.web.auth.AdminWrite`).
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from pmsgate import i18n
from pmsgate.errors import Forbidden, InvalidInput, PmsgateError
from pmsgate.web.app import login_redirect
from pmsgate.web.auth import AdminWrite, actor_of, optional_principal, safe_next
from pmsgate.web.console import PAGE_HEADERS, error_page
from pmsgate.web.context import WebDep, WebServices
from pmsgate.web.form_tokens import FormTokenSpend, repeated_path, spend_form_token
from pmsgate.web.incidents import (
    BULK_ACTIONS,
    KIND_LABELS,
    SNOOZES,
    STATE_CHOICES,
    IncidentQuery,
    IncidentView,
    bulk_applies,
)
from pmsgate.web.templating import templates
from pmsgate.web.users import Principal

router = APIRouter(include_in_schema=False)

MaybePrincipal = Annotated[Principal | None, Depends(optional_principal)]
LIST = "/console/attention"
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


def incident_path(incident_id: int) -> str:
    """The page of one incident."""
    return f"/console/incidents/{incident_id}"


def _page(
    request: Request, template: str, context: dict[str, Any], *, status_code: int = 200
) -> HTMLResponse:
    return templates.TemplateResponse(
        request, template, context, status_code=status_code, headers=PAGE_HEADERS
    )


def _admin_only(principal: Principal) -> None:
    if not principal.is_admin:
        raise Forbidden("Only an admin sees the incidents.")


def _back(next_path: str | None, fallback: str, **params: str) -> RedirectResponse:
    """303 to ``next_path`` (a path on this site) or ``fallback``, with ``params`` added."""
    target = safe_next(next_path) or fallback
    parts = urlsplit(target)
    query = [
        (name, value)
        for name, value in parse_qsl(parts.query)
        if name not in ("done", "incident_error", "bulk_done", "bulk_failed", "repeated")
    ]
    query.extend(params.items())
    location = parts.path + ("?" + urlencode(query) if query else "")
    if parts.fragment:
        location += "#" + parts.fragment
    return RedirectResponse(location, status_code=303)


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
    from pmsgate.web.context import web_services

    web = web_services(request)
    context = await web.customers.context(student_id)
    hotel_ids = [context.hotel_id] if context.hotel_id else []
    return {
        "customer_incidents": await web.incidents.of_customer(student_id, hotel_ids),
        "incident_panel": await panel_context(web, principal, request),
    }


# --- the list --------------------------------------------------------------------------------


@router.get(LIST, response_class=HTMLResponse)
async def attention(request: Request, web: WebDep, principal: MaybePrincipal) -> Response:
    """What needs a person now: the incidents (filtered, sorted) and failing scheduled jobs."""
    if principal is None:
        return login_redirect(request)
    team = await web.incidents.team()
    try:
        _admin_only(principal)
        query = IncidentQuery.parse(dict(request.query_params), [m.email for m in team])
    except PmsgateError as error:
        return error_page(request, principal, error)
    from pmsgate.web.admin_console import read_fleet

    incidents = await web.incidents.listed(query, principal.email)
    fleet = await read_fleet(web)
    return _page(
        request,
        "admin_attention.html",
        {
            "principal": principal,
            "query": query,
            "incidents": incidents,
            "fleet": fleet,
            "kinds": KIND_LABELS,
            "states": STATE_CHOICES,
            "bulk_actions": BULK_ACTIONS,
            "bulk_done": request.query_params.get("bulk_done"),
            "bulk_failed": request.query_params.get("bulk_failed"),
            "incident_panel": await panel_context(web, principal, request),
        },
    )


# --- one incident ----------------------------------------------------------------------------


@router.get("/console/incidents/{incident_id}", response_class=HTMLResponse)
async def incident_page(
    request: Request, web: WebDep, principal: MaybePrincipal, incident_id: int
) -> Response:
    """One incident: facts, notices, timeline and actions."""
    if principal is None:
        return login_redirect(request)
    try:
        _admin_only(principal)
        view = await web.incidents.get(incident_id)
    except PmsgateError as error:
        return error_page(request, principal, error)
    return _page(
        request,
        "admin_incident.html",
        {
            "principal": principal,
            "incident": view,
            "incident_panel": await panel_context(web, principal, request),
        },
    )


async def _act(
    request: Request,
    web: WebServices,
    principal: Principal,
    incident_id: int,
    next_path: str | None,
    action: str,
    work: Any,
    *,
    purpose: str | None = None,
) -> Response:
    """Run one action; 303 back with its outcome (``done``) or its error's code.

    An action that creates something (``purpose``: a note, a check, an e-mail) spends the
    form's one-time token first (:mod:`pmsgate.web.form_tokens`): a reload or a double
    click is sent to the first one's page, marked ``repeated``, and does nothing again.
    """
    fallback = incident_path(incident_id)
    spend: FormTokenSpend | None = None
    try:
        if purpose is not None:
            spend = await spend_form_token(request, purpose)
            if spend.repeated:
                return RedirectResponse(repeated_path(spend, fallback), status_code=303)
        outcome = await work()
    except PmsgateError as error:
        if spend is not None:
            await web.form_tokens.release(spend)  # nothing was done: the form may be resent
        if error.status == 404:
            return error_page(request, principal, error)
        return _back(next_path, fallback, incident_error=error.code)
    done = f"{action}_{outcome}" if isinstance(outcome, str) else action
    response = _back(next_path, fallback, done=done)
    if spend is not None:
        await web.form_tokens.finish(spend, result_path=response.headers["location"])
    return response


Next = Annotated[str | None, Form(alias="next")]


@router.post("/console/incidents/{incident_id}/acknowledge", response_class=RedirectResponse)
async def acknowledge(
    request: Request, web: WebDep, principal: AdminWrite, incident_id: int, next_path: Next = None
) -> Response:
    """Acknowledge the incident (the admin as "acknowledged by")."""
    actor = actor_of(principal)
    return await _act(
        request,
        web,
        principal,
        incident_id,
        next_path,
        "acknowledge",
        lambda: web.incidents.acknowledge(incident_id, actor=actor),
    )


@router.post("/console/incidents/{incident_id}/assign", response_class=RedirectResponse)
async def assign(
    request: Request,
    web: WebDep,
    principal: AdminWrite,
    incident_id: int,
    assignee: Annotated[str, Form()] = "",
    next_path: Next = None,
) -> Response:
    """Give the incident to a team member (empty: nobody)."""
    actor = actor_of(principal)
    return await _act(
        request,
        web,
        principal,
        incident_id,
        next_path,
        "assign",
        lambda: web.incidents.assign(incident_id, assignee, actor=actor),
    )


@router.post("/console/incidents/{incident_id}/snooze", response_class=RedirectResponse)
async def snooze(
    request: Request,
    web: WebDep,
    principal: AdminWrite,
    incident_id: int,
    snooze_for: Annotated[str, Form(alias="for")] = "",
    until: Annotated[str, Form()] = "",
    next_path: Next = None,
) -> Response:
    """Snooze it for 1 h, 4 h, 1 day (``for``), or until a date (``for=date``, ``until``)."""
    actor = actor_of(principal)

    async def work() -> None:
        await web.incidents.snooze(
            incident_id, web.incidents.snooze_until(snooze_for, until), actor=actor
        )

    return await _act(request, web, principal, incident_id, next_path, "snooze", work)


@router.post("/console/incidents/{incident_id}/note", response_class=RedirectResponse)
async def note(
    request: Request,
    web: WebDep,
    principal: AdminWrite,
    incident_id: int,
    text: Annotated[str, Form()] = "",
    next_path: Next = None,
) -> Response:
    """Add a note to the incident's timeline."""
    actor = actor_of(principal)
    return await _act(
        request,
        web,
        principal,
        incident_id,
        next_path,
        "note",
        lambda: web.incidents.add_note(incident_id, text, actor=actor),
        purpose="incident.note",
    )


@router.post("/console/incidents/{incident_id}/check", response_class=RedirectResponse)
async def check_now(
    request: Request, web: WebDep, principal: AdminWrite, incident_id: int, next_path: Next = None
) -> Response:
    """One verification of the facility's stored credentials, through its limiter."""
    actor = actor_of(principal)
    return await _act(
        request,
        web,
        principal,
        incident_id,
        next_path,
        "check",
        lambda: web.incidents.check_now(incident_id, actor=actor),
        purpose="incident.check",
    )


@router.post("/console/incidents/{incident_id}/resend", response_class=RedirectResponse)
async def resend(
    request: Request, web: WebDep, principal: AdminWrite, incident_id: int, next_path: Next = None
) -> Response:
    """E-mail the customer its sign-in link to the reconnect form (or the invitation)."""
    actor = actor_of(principal)
    return await _act(
        request,
        web,
        principal,
        incident_id,
        next_path,
        "resend",
        lambda: web.incidents.resend_link(incident_id, actor=actor),
        purpose="incident.resend",
    )


# --- bulk ------------------------------------------------------------------------------------


def _bulk_action(value: str) -> str:
    if value not in BULK_ACTIONS:
        raise InvalidInput(
            f"{value[:40]!r} is not a bulk action.",
            code="invalid_incident_filter",
            hint=f"action is one of: {', '.join(BULK_ACTIONS)}.",
        )
    return value


@router.get("/console/attention/bulk", response_class=HTMLResponse)
async def bulk_confirm(request: Request, web: WebDep, principal: MaybePrincipal) -> Response:
    """The confirmation: the action, and the incidents of the selection it applies to."""
    if principal is None:
        return login_redirect(request)
    team = await web.incidents.team()
    try:
        _admin_only(principal)
        action = _bulk_action(request.query_params.get("action", ""))
        query = IncidentQuery.parse(dict(request.query_params), [m.email for m in team])
    except PmsgateError as error:
        return error_page(request, principal, error)
    selected: list[IncidentView] = [
        view
        for view in await web.incidents.listed(query, principal.email)
        if bulk_applies(action, view)
    ]
    return _page(
        request,
        "admin_incident_bulk.html",
        {
            "principal": principal,
            "action": action,
            "action_words": BULK_ACTIONS[action],
            "query": query,
            "selected": selected,
            "kinds": KIND_LABELS,
        },
    )


@router.post("/console/attention/bulk", response_class=RedirectResponse)
async def bulk_act(request: Request, web: WebDep, principal: AdminWrite) -> Response:
    """Carry out the confirmed action on the incidents listed in the form; 303 to the list."""
    form = await request.form()
    back = safe_next(str(form.get("next") or "")) or LIST
    try:
        action = _bulk_action(str(form.get("action") or ""))
        ids = [int(str(value)) for value in form.getlist("incident") if str(value).isdigit()]
        spend = await spend_form_token(request, "incident.bulk")
    except PmsgateError as error:
        return error_page(request, principal, error)
    if spend.repeated:  # a reload of the confirmation's answer: done once already
        return RedirectResponse(repeated_path(spend, back), status_code=303)
    outcome = await web.incidents.bulk(action, ids, actor=actor_of(principal))
    failed = ", ".join(f"{code}: {count}" for code, count in sorted(outcome.failed.items()))
    params = {"bulk_done": f"{action}:{outcome.done}"}
    if failed:
        params["bulk_failed"] = failed
    response = _back(back, LIST, **params)
    await web.form_tokens.finish(spend, result_path=response.headers["location"])
    return response
