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

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import parse_qsl, urlencode, urlsplit

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from pmsgate.audit.actions import Actor
from pmsgate.errors import InvalidInput, PmsgateError
from pmsgate.web.admin_pages import admin_only, panel_context, read_fleet
from pmsgate.web.auth import AdminWrite, actor_of, safe_next
from pmsgate.web.context import WebDep, WebServices
from pmsgate.web.form_tokens import FormTokenSpend, repeated_path
from pmsgate.web.forms import spend_form_token
from pmsgate.web.incident_views import (
    BULK_ACTIONS,
    KIND_LABELS,
    STATE_CHOICES,
    IncidentQuery,
    IncidentView,
    bulk_applies,
)
from pmsgate.web.pages import PagePrincipal, render_page
from pmsgate.web.users import Principal

router = APIRouter(include_in_schema=False)

LIST = "/console/attention"


def incident_path(incident_id: int) -> str:
    """The page of one incident."""
    return f"/console/incidents/{incident_id}"


def _admin_only(principal: Principal) -> None:
    admin_only(principal, "Only an admin sees the incidents.")


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


# --- the list --------------------------------------------------------------------------------


@router.get(LIST, response_class=HTMLResponse)
async def attention(request: Request, web: WebDep, principal: PagePrincipal) -> Response:
    """What needs a person now: the incidents (filtered, sorted) and failing scheduled jobs."""
    team = await web.incidents.team()
    _admin_only(principal)
    query = IncidentQuery.parse(dict(request.query_params), [m.email for m in team])
    incidents = await web.incidents.listed(query, principal.email)
    fleet = await read_fleet(web)
    return render_page(
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
    request: Request, web: WebDep, principal: PagePrincipal, incident_id: int
) -> Response:
    """One incident: facts, notices, timeline and actions."""
    _admin_only(principal)
    view = await web.incidents.get(incident_id)
    return render_page(
        request,
        "admin_incident.html",
        {
            "principal": principal,
            "incident": view,
            "incident_panel": await panel_context(web, principal, request),
        },
    )


Next = Annotated[str | None, Form(alias="next")]


@dataclass(frozen=True)
class IncidentAction:
    """One action's request on an incident: who acts, on which, and the page to go back to."""

    request: Request
    web: WebServices
    actor: Actor
    incident_id: int
    next_path: str | None

    async def run(
        self,
        action: str,
        work: Callable[[], Awaitable[object]],
        *,
        purpose: str | None = None,
    ) -> Response:
        """Run ``work``; 303 back with its outcome (``done``) or its error's code.

        An action that creates something (``purpose``: a note, a check, an e-mail) spends
        the form's one-time token first (:mod:`pmsgate.web.form_tokens`): a reload or a
        double click is sent to the first one's page, marked ``repeated``, and does nothing
        again. An unknown incident is the 404 page.
        """
        fallback = incident_path(self.incident_id)
        spend: FormTokenSpend | None = None
        try:
            if purpose is not None:
                spend = await spend_form_token(self.request, purpose)
                if spend.repeated:
                    return RedirectResponse(repeated_path(spend, fallback), status_code=303)
            outcome = await work()
        except PmsgateError as error:
            if spend is not None:  # nothing was done: the form may be sent again
                await self.web.form_tokens.release(spend)
            if error.status == 404:
                raise
            return _back(self.next_path, fallback, incident_error=error.code)
        done = f"{action}_{outcome}" if isinstance(outcome, str) else action
        response = _back(self.next_path, fallback, done=done)
        if spend is not None:
            await self.web.form_tokens.finish(spend, result_path=response.headers["location"])
        return response

    async def run_once(self, action: str, work: Callable[[], Awaitable[object]]) -> Response:
        """:meth:`run` for an action that creates something: its form's token (purpose
        ``incident.<action>``) is spent once."""
        return await self.run(action, work, purpose=f"incident.{action}")


async def incident_action(
    request: Request, web: WebDep, principal: AdminWrite, incident_id: int, next_path: Next = None
) -> IncidentAction:
    """The admin's action on the incident of the path (CSRF-checked)."""
    return IncidentAction(request, web, actor_of(principal), incident_id, next_path)


Act = Annotated[IncidentAction, Depends(incident_action)]


@router.post("/console/incidents/{incident_id}/acknowledge", response_class=RedirectResponse)
async def acknowledge(act: Act) -> Response:
    """Acknowledge the incident (the admin as "acknowledged by")."""
    return await act.run(
        "acknowledge", lambda: act.web.incidents.acknowledge(act.incident_id, actor=act.actor)
    )


@router.post("/console/incidents/{incident_id}/assign", response_class=RedirectResponse)
async def assign(act: Act, assignee: Annotated[str, Form()] = "") -> Response:
    """Give the incident to a team member (empty: nobody)."""
    return await act.run(
        "assign", lambda: act.web.incidents.assign(act.incident_id, assignee, actor=act.actor)
    )


@router.post("/console/incidents/{incident_id}/snooze", response_class=RedirectResponse)
async def snooze(
    act: Act,
    snooze_for: Annotated[str, Form(alias="for")] = "",
    until: Annotated[str, Form()] = "",
) -> Response:
    """Snooze it for 1 h, 4 h, 1 day (``for``), or until a date (``for=date``, ``until``)."""
    incidents = act.web.incidents

    async def work() -> None:
        until_then = incidents.snooze_until(snooze_for, until)
        await incidents.snooze(act.incident_id, until_then, actor=act.actor)

    return await act.run("snooze", work)


@router.post("/console/incidents/{incident_id}/note", response_class=RedirectResponse)
async def note(act: Act, text: Annotated[str, Form()] = "") -> Response:
    """Add a note to the incident's timeline."""
    return await act.run_once(
        "note", lambda: act.web.incidents.add_note(act.incident_id, text, actor=act.actor)
    )


@router.post("/console/incidents/{incident_id}/check", response_class=RedirectResponse)
async def check_now(act: Act) -> Response:
    """One verification of the facility's stored credentials, through its limiter."""
    return await act.run_once(
        "check", lambda: act.web.incidents.check_now(act.incident_id, actor=act.actor)
    )


@router.post("/console/incidents/{incident_id}/resend", response_class=RedirectResponse)
async def resend(act: Act) -> Response:
    """E-mail the customer its sign-in link to the reconnect form (or the invitation)."""
    return await act.run_once(
        "resend", lambda: act.web.incidents.resend_link(act.incident_id, actor=act.actor)
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
async def bulk_confirm(request: Request, web: WebDep, principal: PagePrincipal) -> Response:
    """The confirmation: the action, and the incidents of the selection it applies to."""
    team = await web.incidents.team()
    _admin_only(principal)
    action = _bulk_action(request.query_params.get("action", ""))
    query = IncidentQuery.parse(dict(request.query_params), [m.email for m in team])
    selected: list[IncidentView] = [
        view
        for view in await web.incidents.listed(query, principal.email)
        if bulk_applies(action, view)
    ]
    return render_page(
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
    action = _bulk_action(str(form.get("action") or ""))
    ids = [int(str(value)) for value in form.getlist("incident") if str(value).isdigit()]
    spend = await spend_form_token(request, "incident.bulk")
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
