"""The console's registry panel actions: check the registry now, and fix it
(docs/requirements.md R18.3, R18.4).

``_registry_panel.html`` shows, for each apartment, the listing it maps to (name and room
type) and any problem with its fix, from the customer's latest stored check
(:func:`pmsgate.customers.registry_check.latest_registry_check`: no platform call to
render a page). Its two forms post here:

- ``POST /console/customers/{student_id}/registry/check`` — check now (one listings read)
  and store the result;
- ``POST /console/customers/{student_id}/registry/fix`` — the automatic fix
  (:func:`pmsgate.customers.registry_check.fix_registry`): unambiguous mappings only,
  recorded as ``registry.fixed`` with the signed-in user as actor, and as the console
  action ``registry.fix``.

Both take the session's CSRF token; a customer's account acts on its own customer only,
an admin on any. With htmx the panel alone is swapped (with what the fix changed); without
JavaScript the answer is 303 back to the customer's page at ``#registry``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from pmsgate.customers.registry_check import (
    RegistryFix,
    check_and_record,
    fix_registry,
    latest_registry_check,
)
from pmsgate.errors import PmsgateError
from pmsgate.web.actions import console_action
from pmsgate.web.auth import SignedInWrite, actor_of, ensure_can_act_on
from pmsgate.web.context import WebDep, WebServices
from pmsgate.web.pages import customer_path, is_htmx, render_page
from pmsgate.web.users import Principal

router = APIRouter(include_in_schema=False)

PANEL = "_registry_panel.html"


async def registry_panel_context(web: WebServices, student_id: str) -> dict[str, Any]:
    """What ``_registry_panel.html`` needs besides ``principal`` and ``customer_path``."""
    return {"registry": await latest_registry_check(web.customers, student_id)}


async def _panel(
    request: Request,
    web: WebServices,
    principal: Principal,
    student_id: str,
    *,
    status_code: int = 200,
    **extra: Any,
) -> Response:
    context = {
        "principal": principal,
        "customer_path": customer_path(student_id),
        **await registry_panel_context(web, student_id),
        **extra,
    }
    return render_page(request, PANEL, context, status_code=status_code)


def _back(student_id: str) -> RedirectResponse:
    return RedirectResponse(customer_path(student_id) + "#registry", status_code=303)


async def _act_on(web: WebServices, principal: Principal, student_id: str) -> None:
    """403 when the user may not act on this customer, 404 when it does not exist."""
    ensure_can_act_on(principal, student_id)
    await web.customers.context(student_id)


async def _answer(
    request: Request,
    web: WebServices,
    principal: Principal,
    student_id: str,
    error: PmsgateError | None = None,
    **extra: Any,
) -> Response:
    """Without JavaScript: 303 back to the panel (a refusal: the error page); htmx: the panel."""
    if not is_htmx(request):
        if error is not None:
            raise error
        return _back(student_id)
    if error is not None:
        extra["registry_error"] = error
    return await _panel(request, web, principal, student_id, **extra)


@router.post("/console/customers/{student_id}/registry/check", response_class=HTMLResponse)
async def check_registry_now(
    request: Request, web: WebDep, student_id: str, principal: SignedInWrite
) -> Response:
    """Check the registry against the workspace's listings now and store the result."""
    await _act_on(web, principal, student_id)
    try:
        await check_and_record(web.customers, student_id)
    except PmsgateError as error:
        return await _answer(request, web, principal, student_id, error)
    return await _answer(request, web, principal, student_id)


@router.post("/console/customers/{student_id}/registry/fix", response_class=HTMLResponse)
async def fix_registry_now(
    request: Request, web: WebDep, student_id: str, principal: SignedInWrite
) -> Response:
    """Repair the mappings that have one right answer; the rest stays listed for a person."""
    await _act_on(web, principal, student_id)
    result: RegistryFix | None = None
    try:
        async with console_action(web, principal, "registry.fix", student_id=student_id):
            result = await fix_registry(
                web.customers, student_id, audit=web.audit, actor=actor_of(principal)
            )
    except PmsgateError as error:
        return await _answer(request, web, principal, student_id, error)
    return await _answer(request, web, principal, student_id, registry_fix=result)
