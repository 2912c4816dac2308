"""The console's registry panel actions: check the registry now, and fix it (spec §7).

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
from pmsgate.web.audit import console_action
from pmsgate.web.auth import SignedInWrite, actor_of, ensure_can_act_on
from pmsgate.web.console import PAGE_HEADERS, customer_path, error_page
from pmsgate.web.context import WebDep, WebServices
from pmsgate.web.templating import templates
from pmsgate.web.users import Principal

router = APIRouter(include_in_schema=False)

PANEL = "_registry_panel.html"


def _is_htmx(request: Request) -> bool:
    return request.headers.get("HX-Request") == "true"


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
    return templates.TemplateResponse(
        request, PANEL, context, status_code=status_code, headers=PAGE_HEADERS
    )


def _back(student_id: str) -> RedirectResponse:
    return RedirectResponse(customer_path(student_id) + "#registry", status_code=303)


async def _act_on(
    request: Request, web: WebServices, principal: Principal, student_id: str
) -> Response | None:
    """The error page when the user may not act on this customer (or it does not exist)."""
    try:
        ensure_can_act_on(principal, student_id)
        await web.customers.context(student_id)
    except PmsgateError as error:
        return error_page(request, principal, error)
    return None


@router.post("/console/customers/{student_id}/registry/check", response_class=HTMLResponse)
async def check_registry_now(
    request: Request, web: WebDep, student_id: str, principal: SignedInWrite
) -> Response:
    """Check the registry against the workspace's listings now and store the result."""
    if (refused := await _act_on(request, web, principal, student_id)) is not None:
        return refused
    try:
        await check_and_record(web.customers, student_id)
    except PmsgateError as error:
        if not _is_htmx(request):
            return error_page(request, principal, error)
        return await _panel(request, web, principal, student_id, registry_error=error)
    if not _is_htmx(request):
        return _back(student_id)
    return await _panel(request, web, principal, student_id)


@router.post("/console/customers/{student_id}/registry/fix", response_class=HTMLResponse)
async def fix_registry_now(
    request: Request, web: WebDep, student_id: str, principal: SignedInWrite
) -> Response:
    """Repair the mappings that have one right answer; the rest stays listed for a person."""
    if (refused := await _act_on(request, web, principal, student_id)) is not None:
        return refused
    result: RegistryFix | None = None
    try:
        async with console_action(web, principal, "registry.fix", student_id=student_id):
            result = await fix_registry(
                web.customers, student_id, audit=web.audit, actor=actor_of(principal)
            )
    except PmsgateError as error:
        if not _is_htmx(request):
            return error_page(request, principal, error)
        return await _panel(request, web, principal, student_id, registry_error=error)
    if not _is_htmx(request):
        return _back(student_id)
    return await _panel(request, web, principal, student_id, registry_fix=result)
