"""Signing in and out: the sign-in form, one-time links, "Forgot your password?", the JSON API.

The session, its cookie and the dependencies every route authenticates with are in
:mod:`pmsgate.web.auth`; these are the routes that start and end a session (docs/web.md,
Signing in and out).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import structlog
from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from pydantic import BaseModel, Field, SecretStr

from pmsgate.audit.actions import Actor, AuditAction, Outcome
from pmsgate.errors import InvalidInput, PmsgateError
from pmsgate.web.auth import (
    SignedIn,
    SignedInWrite,
    actor_of,
    check_csrf,
    clear_session_cookie,
    end_current_session,
    optional_principal,
    safe_next,
    set_session_cookie,
)
from pmsgate.web.context import web_services
from pmsgate.web.kept_input import KEPT_COOKIE
from pmsgate.web.pages import PAGE_HEADERS, render_page
from pmsgate.web.users import (
    MIN_PASSWORD,
    PASSWORD_LINK_PURPOSES,
    InvalidCredentials,
    LoginLinkRefused,
    Principal,
    TooManyLoginAttempts,
)

router = APIRouter()
log = structlog.get_logger(__name__)

_DEFAULT_LANDING = "/console"
# Answers that carry a CSRF token are never cached.
NO_STORE = {"Cache-Control": "no-store"}


def _client(request: Request) -> str:
    # Behind a reverse proxy this is the proxy unless uvicorn runs with --proxy-headers.
    return request.client.host if request.client else "unknown"


# What a failed sign-in's event names: the attempted address only when it looks like one,
# because people type their password into the address field.
_LOOKS_LIKE_ADDRESS = re.compile(r"[^@\s]{1,64}@[^@\s]{1,189}\.[^@\s]{1,63}")


def attempted_user_name(email: str) -> str:
    """The user name a sign-in tried, as its audit event may hold it (never a password)."""
    address = email.strip().lower()
    if len(address) <= 254 and _LOOKS_LIKE_ADDRESS.fullmatch(address):
        return address
    return "(not an e-mail address)"


async def sign_in(request: Request, email: str, password: SecretStr) -> tuple[Principal, str]:
    """Sign in through the user service; either way the attempt is in the audit trail.

    The event has the client address and the attempted user name, never the password;
    a throttled attempt is ``refused``, a wrong password ``failure``.
    """
    web = web_services(request)
    client = _client(request)
    try:
        principal, raw = await web.users.sign_in(email, password, client=client)
    except PmsgateError as error:
        attempted = attempted_user_name(email)
        details: dict[str, Any] = {"reason": error.code}
        if isinstance(error, TooManyLoginAttempts):
            details["scope"] = error.scope
        await web.audit.record(
            AuditAction.SIGNIN_FAILED,
            actor=Actor.system("unauthenticated"),
            subject=f"user:{attempted}",
            outcome=Outcome.REFUSED if error.status == 429 else Outcome.FAILURE,
            details=details,
            client_address=client,
        )
        if isinstance(error, InvalidCredentials) and error.now_locked:
            # This failure paused signing in: who and where, so an admin can lift it.
            await web.audit.record(
                AuditAction.SIGNIN_LOCKED,
                actor=Actor.system("unauthenticated"),
                subject=f"user:{attempted}",
                outcome=Outcome.REFUSED,
                details={
                    "scopes": list(error.now_locked),
                    "window_s": web.settings.login_failure_window_s,
                },
                client_address=client,
            )
        raise
    await web.audit.record(
        AuditAction.SIGNIN_SUCCEEDED,
        actor=actor_of(principal),
        subject=f"user:{principal.email}",
        student_id=principal.student_id,
        client_address=client,
    )
    return principal, raw


def _login_page(
    request: Request,
    *,
    next_url: str | None,
    email: str = "",
    error: PmsgateError | None = None,
    expired: bool = False,
) -> HTMLResponse:
    return render_page(
        request,
        "login.html",
        {
            "principal": None,
            "next": next_url,
            "email": email,
            "error": error,
            "expired": expired,
            "kept_input": request.cookies.get(KEPT_COOKIE) is not None,
        },
        status_code=error.status if error is not None else 200,
        headers=error.headers if error is not None else None,
    )


def principal_json(principal: Principal) -> dict[str, Any]:
    """The signed-in user as the JSON API shows it (never the session id)."""
    return {
        "user": {
            "id": principal.user_id,
            "email": principal.email,
            "role": principal.role,
            "studentId": principal.student_id,
        },
        "csrfToken": principal.csrf_token,
    }


@router.get("/login", response_class=HTMLResponse, include_in_schema=False)
async def login_page(
    request: Request,
    next_url: Annotated[str | None, Query(alias="next")] = None,
    expired: Annotated[bool, Query()] = False,
) -> Response:
    """The sign-in form (a signed-in user goes straight on); ``expired``: says why."""
    target = safe_next(next_url)
    if await optional_principal(request) is not None:
        return RedirectResponse(target or _DEFAULT_LANDING, status_code=303)
    return _login_page(request, next_url=target, expired=expired)


@router.post("/login", response_class=HTMLResponse, include_in_schema=False)
async def login_form(
    request: Request,
    email: Annotated[str, Form()] = "",
    password: Annotated[SecretStr, Form()] = SecretStr(""),  # noqa: B008
    next_url: Annotated[str | None, Form(alias="next")] = None,
) -> Response:
    """Sign in from the HTML form: 303 onwards with the cookie, or the form again with why."""
    target = safe_next(next_url)
    try:
        _, raw = await sign_in(request, email, password)
    except PmsgateError as error:
        return _login_page(request, next_url=target, email=email.strip()[:254], error=error)
    await end_current_session(request)
    response = RedirectResponse(target or _DEFAULT_LANDING, status_code=303)
    set_session_cookie(response, request, raw)
    return response


# --- one-time sign-in links (an incident notice's "reconnect now"; docs/web.md) ---------------

# The token is in the URL: no Referer ever carries it on, and the page is never cached.
LINK_PAGE_HEADERS = {**PAGE_HEADERS, "Referrer-Policy": "no-referrer"}


def _link_page(
    request: Request, token: str | None, error: LoginLinkRefused | None = None
) -> HTMLResponse:
    return render_page(
        request,
        "login_link.html",
        {"principal": None, "token": token, "error": error, "next": _DEFAULT_LANDING},
        status_code=error.status if error is not None else 200,
        headers=LINK_PAGE_HEADERS,
    )


async def _record_link_refused(request: Request, error: LoginLinkRefused) -> None:
    await web_services(request).audit.record(
        AuditAction.SIGNIN_FAILED,
        actor=Actor.system("unauthenticated"),
        subject="login-link",
        outcome=Outcome.REFUSED,
        details={"reason": error.code, "link": error.state},
        client_address=_client(request),
    )


def _password_page(
    request: Request,
    token: str,
    purpose: str,
    *,
    email: str,
    error: PmsgateError | None = None,
) -> HTMLResponse:
    return render_page(
        request,
        "set_password.html",
        {
            "principal": None,
            "token": token,
            "purpose": purpose,
            "email": email,
            "error": error,
            "min_password": MIN_PASSWORD,
        },
        status_code=error.status if error is not None else 200,
        headers=LINK_PAGE_HEADERS,
    )


@router.get("/login/link/{token}", response_class=HTMLResponse, include_in_schema=False)
async def login_link_page(request: Request, token: str) -> Response:
    """A one-time link: a page whose button uses it (the GET never spends it).

    Mail scanners open the links of a message; if the GET signed in, a scanner would
    spend the link before its reader clicks it. An invitation's or a password reset's
    link shows the form to choose a password; any other link a "Continue" button. An
    unknown, used or expired link gets a page saying so, with the way to sign in
    normally (410, never a 500).
    """
    web = web_services(request)
    check = await web.users.login_link(token)
    if check.state != "usable" or check.record is None:
        return _link_page(request, None, LoginLinkRefused(check.state))
    if check.record.purpose in PASSWORD_LINK_PURPOSES:
        account = await web.users.account_by_id(check.record.user_id)
        email = account.email if account is not None else ""
        return _password_page(request, token, check.record.purpose, email=email)
    return _link_page(request, token)


class PasswordsDiffer(InvalidInput):
    """The two password fields of the set-password form differ."""

    code = "passwords_differ"
    hint = "Type the same password in both fields."


async def _set_password_with_link(
    request: Request, token: str, purpose: str, user_id: int
) -> Response:
    """The set-password form's POST: the password chosen, the link spent, signed in."""
    web = web_services(request)
    form = await request.form()
    password = SecretStr(str(form.get("password") or ""))
    confirm = str(form.get("password_confirm") or "")
    account = await web.users.account_by_id(user_id)
    email = account.email if account is not None else ""
    try:
        if password.get_secret_value() != confirm:
            raise PasswordsDiffer("The two passwords are not the same.")
        principal, raw, link = await web.users.set_password_with_link(token, password)
    except LoginLinkRefused as error:
        await _record_link_refused(request, error)
        return _link_page(request, None, error)
    except PmsgateError as error:
        # Nothing was spent: the same form again, with why (never the password typed).
        return _password_page(request, token, purpose, email=email, error=error)
    await web.audit.record(
        AuditAction.PASSWORD_SET,
        actor=actor_of(principal),
        subject=f"user:{principal.email}",
        details={"purpose": link.purpose},
        student_id=principal.student_id,
        client_address=_client(request),
    )
    await end_current_session(request)
    response = RedirectResponse(
        (safe_next(link.target) or _DEFAULT_LANDING) + "?welcome=" + link.purpose,
        status_code=303,
    )
    response.headers.update(NO_STORE)
    set_session_cookie(response, request, raw)
    return response


@router.post("/login/link/{token}", include_in_schema=False)
async def login_link_use(request: Request, token: str) -> Response:
    """Spend the link: signed in as its account (audited), 303 to where it leads.

    An invitation's or reset's link first takes the new password (its form's fields).
    """
    web = web_services(request)
    check = await web.users.login_link(token)
    if check.record is not None and check.record.purpose in PASSWORD_LINK_PURPOSES:
        return await _set_password_with_link(
            request, token, check.record.purpose, check.record.user_id
        )
    try:
        principal, raw, link = await web.users.sign_in_with_link(token)
    except LoginLinkRefused as error:
        await _record_link_refused(request, error)
        return _link_page(request, None, error)
    await web.audit.record(
        AuditAction.SIGNIN_LINK_USED,
        actor=actor_of(principal),
        subject=f"user:{principal.email}",
        details={"purpose": link.purpose, "target": link.target},
        student_id=principal.student_id,
        client_address=_client(request),
    )
    await end_current_session(request)
    response = RedirectResponse(safe_next(link.target) or _DEFAULT_LANDING, status_code=303)
    response.headers.update(NO_STORE)
    set_session_cookie(response, request, raw)
    return response


# --- "Forgot password?" --------------------------------------------------------------------------


def _forgot_page(
    request: Request, *, email: str = "", sent: bool = False, status_code: int = 200
) -> HTMLResponse:
    return render_page(
        request,
        "forgot_password.html",
        {"principal": None, "email": email, "sent": sent},
        status_code=status_code,
    )


@router.get("/login/forgot", response_class=HTMLResponse, include_in_schema=False)
async def forgot_password_page(
    request: Request, sent: Annotated[bool, Query()] = False
) -> Response:
    """The form to ask for a link that sets a new password (``sent``: what happened)."""
    return _forgot_page(request, sent=sent)


# After a request: back to the page by GET, so a reload never sends another e-mail.
_FORGOT_SENT = "/login/forgot?sent=1"


@router.post("/login/forgot", response_class=HTMLResponse, include_in_schema=False)
async def forgot_password(
    request: Request, email: Annotated[str, Form(max_length=1024)] = ""
) -> Response:
    """E-mail a one-time set-password link to the address's account, if it has one.

    The answer is the same whether or not the address has an account (303 to the page
    saying "if an account exists, a link is on its way"), so it tells nobody who has
    one. Requests are limited per address and per client
    (``PMSGATE_PASSWORD_RESET_MAX_PER_HOUR``); past the limit the answer is the same and
    no e-mail goes out. Audited either way.
    """
    web = web_services(request)
    client = _client(request)
    typed = email.strip()[:254]
    if not typed:
        return _forgot_page(request, status_code=400)
    attempted = attempted_user_name(typed)
    try:
        await web.users.count_reset_request(typed, client=client)
    except PmsgateError as error:
        await web.audit.record(
            AuditAction.PASSWORD_RESET_REQUESTED,
            actor=Actor.system("unauthenticated"),
            subject=f"user:{attempted}",
            outcome=Outcome.REFUSED,
            details={"reason": error.code},
            client_address=client,
        )
        return RedirectResponse(_FORGOT_SENT, status_code=303)
    await web.audit.record(
        AuditAction.PASSWORD_RESET_REQUESTED,
        actor=Actor.system("unauthenticated"),
        subject=f"user:{attempted}",
        client_address=client,
    )
    account = await web.users.account(typed)
    if account is not None:
        try:
            await web.invitations.send(
                account,
                "invite" if not account.password_set else "reset",
                actor=Actor.system("unauthenticated"),
            )
        except PmsgateError as error:
            # The page must not tell that the address has an account: the team sees it.
            log.warning("web_password_reset_not_sent", code=error.code)
    return RedirectResponse(_FORGOT_SENT, status_code=303)


@router.post("/logout", include_in_schema=False)
async def logout_form(request: Request) -> Response:
    """End the session (CSRF-checked) and go back to the sign-in page."""
    principal = await optional_principal(request)
    if principal is not None:
        await check_csrf(request, principal)
        await end_current_session(request)
    # Without a live session there is nothing to end: just drop whatever cookie is left.
    response = RedirectResponse("/login", status_code=303)
    clear_session_cookie(response, request)
    return response


class LoginBody(BaseModel):
    """The JSON sign-in request."""

    email: str = Field(max_length=1024)
    password: SecretStr


@router.post("/api/auth/login", tags=["web: accounts"])
async def api_login(body: LoginBody, request: Request) -> JSONResponse:
    """Sign in: the user and its CSRF token, with the session cookie set."""
    principal, raw = await sign_in(request, body.email, body.password)
    await end_current_session(request)
    response = JSONResponse(principal_json(principal), headers=NO_STORE)
    set_session_cookie(response, request, raw)
    return response


@router.post("/api/auth/logout", status_code=204, tags=["web: accounts"])
async def api_logout(request: Request, principal: SignedInWrite) -> Response:
    """End the session (CSRF token required) and drop the cookie."""
    await end_current_session(request)
    response = Response(status_code=204)
    clear_session_cookie(response, request)
    return response


@router.get("/api/auth/me", tags=["web: accounts"])
async def api_me(principal: SignedIn) -> JSONResponse:
    """The signed-in user and its CSRF token."""
    return JSONResponse(principal_json(principal), headers=NO_STORE)
