"""The console's OAuth pages: the consent to an assistant app, and the connected apps.

| route | who | what |
|---|---|---|
| ``GET /console/oauth/consent?request=…`` | signed in (else sign-in, then back) | the app, the scopes in words, the facility to grant (a customer's own; an admin's choice of all) |
| ``POST /console/oauth/consent`` | signed in, CSRF | ``decision=allow`` with ``facility``: 303 to the app with its code; ``deny``: 303 with ``error=access_denied`` |
| ``GET /console/oauth/grants`` | customer: its grants; admin: all | the connected apps, revoked ones included |
| ``POST /console/oauth/grants/{id}/revoke`` | the grant's customer or an admin, CSRF | the grant ends at once (its tokens refused on every replica); 303 back |
"""  # noqa: E501

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

from fastapi import APIRouter, Form, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from pmsgate.gateway.scopes import OPERATIONS_READ, TOOLS_READ, WRITE_PREFIX
from pmsgate.i18n import N_, gettext
from pmsgate.oauth.context import AuthorizationServerDep
from pmsgate.web.auth import actor_of, check_csrf
from pmsgate.web.pages import PAGE_HEADERS, PagePrincipal, render_page

router = APIRouter(include_in_schema=False)

CONSENT = "/console/oauth/consent"
GRANTS = "/console/oauth/grants"
_SCOPE_WORDS = {
    TOOLS_READ: N_(
        "Use the assistant's six booking tools: availability, reservations, guests in house, "
        "check-in portals and instructions (read only)"
    ),
    OPERATIONS_READ: N_(
        "Read reservations, availability, check-in instructions, house manual and contract"
    ),
}


def scope_words(scope: str) -> str:
    """A scope as the consent page says it, in the reader's language."""
    if scope in _SCOPE_WORDS:
        return gettext(_SCOPE_WORDS[scope])
    if scope.startswith(WRITE_PREFIX):
        return gettext("Make this change in your booking system: {operation}").format(
            operation=scope.removeprefix(WRITE_PREFIX)
        )
    return scope


def _form_target(redirect_uri: str) -> str:
    """The CSP source of the app's redirect (a consent's answer is a redirect there)."""
    parts = urlsplit(redirect_uri)
    return f"{parts.scheme}://{parts.netloc}" if parts.netloc else f"{parts.scheme}:"


@router.get(CONSENT, response_class=HTMLResponse)
async def consent_page(
    request: Request,
    principal: PagePrincipal,
    server: AuthorizationServerDep,
    reference: Annotated[str, Query(alias="request", max_length=100)],
) -> Response:
    """What the app asks, and the facility to grant it."""
    pending = await server.pending(reference)
    facilities = await server.facilities_for(principal.student_id, admin=principal.is_admin)
    policy = PAGE_HEADERS["Content-Security-Policy"].replace(
        "form-action 'self'", f"form-action 'self' {_form_target(pending.redirect_uri)}"
    )
    return render_page(
        request,
        "oauth_consent.html",
        {
            "principal": principal,
            "pending": pending,
            "facilities": facilities,
            "scopes": [(scope, scope_words(scope)) for scope in pending.scopes],
            # An unused connection ends when its refresh token expires (docs/oauth.md).
            "idle_days": max(1, round(server.settings.oauth_refresh_token_ttl_s / 86_400)),
        },
        headers={"Content-Security-Policy": policy},
    )


@router.post(CONSENT)
async def consent_answer(
    request: Request,
    principal: PagePrincipal,
    server: AuthorizationServerDep,
    reference: Annotated[str, Form(alias="request", max_length=100)],
    decision: Annotated[str, Form(pattern="^(allow|deny)$")],
    facility: Annotated[int | None, Form(ge=1, le=2**31 - 1)] = None,
) -> Response:
    """The user's answer: back to the app with a code, or with ``access_denied``."""
    await check_csrf(request, principal)
    actor = actor_of(principal)
    if decision == "deny" or facility is None:
        target = await server.deny(reference, actor=actor)
    else:
        target = await server.approve(
            reference,
            facility_id=facility,
            user_id=principal.user_id,
            user_email=principal.email,
            student_id=principal.student_id,
            admin=principal.is_admin,
            actor=actor,
        )
    return RedirectResponse(target, status_code=303, headers={"Cache-Control": "no-store"})


@router.get(GRANTS, response_class=HTMLResponse)
async def grants_page(
    request: Request,
    principal: PagePrincipal,
    server: AuthorizationServerDep,
    revoked: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
) -> Response:
    """The connected apps: a customer's own, every one for an admin."""
    if not principal.is_admin and principal.student_id is None:
        grants = []
    else:
        grants = await server.grants(None if principal.is_admin else principal.student_id)
    return render_page(
        request,
        "oauth_grants.html",
        {
            "principal": principal,
            "grants": grants,
            "revoked": revoked,
            "scope_words": scope_words,
        },
    )


@router.post(GRANTS + "/{grant_id}/revoke")
async def revoke_grant(
    request: Request,
    principal: PagePrincipal,
    server: AuthorizationServerDep,
    grant_id: Annotated[int, Path(ge=1, le=2**31 - 1)],
) -> Response:
    """End a grant now; back to the list."""
    await check_csrf(request, principal)
    await server.revoke(
        grant_id,
        actor=actor_of(principal),
        student_id=None if principal.is_admin else (principal.student_id or ""),
    )
    return RedirectResponse(f"{GRANTS}?revoked={grant_id}", status_code=303)
