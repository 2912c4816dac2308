"""Sign-in, sign-out and the FastAPI dependencies every web route authenticates with.

The session cookie carries the raw session id signed with itsdangerous (HMAC-SHA256,
timestamped on the injected clock) under ``PMSGATE_SESSION_SECRET``, or, when that is
unset, under a key derived with HKDF from the primary vault key, so every replica
agrees without another secret to distribute. A forged or altered cookie is refused
before the database is asked; a genuine one still needs its live row (logout and
password changes delete it).

Every cookie-authenticated write must also send the session's CSRF token, in the
``X-CSRF-Token`` header (htmx, JSON clients) or the ``csrf_token`` form field (plain
HTML forms); SameSite=Lax alone would still let a top-level cross-site form POST in.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from functools import lru_cache
from typing import Annotated, Any
from urllib.parse import urlsplit

import structlog
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from itsdangerous import BadSignature, TimestampSigner
from pydantic import BaseModel, Field, SecretStr

from pmsgate.audit.actions import Actor, AuditAction, Outcome
from pmsgate.clock import Clock
from pmsgate.config import Settings
from pmsgate.errors import (
    ConfigurationError,
    Forbidden,
    InvalidInput,
    PmsgateError,
    Unauthorized,
)
from pmsgate.gateway.vault import parse_key_spec
from pmsgate.web.context import web_services
from pmsgate.web.kept_input import KEPT_COOKIE, remember_form
from pmsgate.web.templating import templates
from pmsgate.web.users import (
    MIN_PASSWORD,
    PASSWORD_LINK_PURPOSES,
    InvalidCredentials,
    LoginLinkRefused,
    Principal,
    TooManyLoginAttempts,
    session_id_hash,
)

SESSION_COOKIE = "pmsgate_session"
CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"
HKDF_INFO = b"pmsgate web session"
_SIGNER_SALT = b"pmsgate.web.session-cookie"
_DEFAULT_LANDING = "/console"
# Set on request.state so that every dependency of one request reads the cookie once.
_STATE_KEY = "pmsgate_session"
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
# Answers that carry a CSRF token are never cached.
NO_STORE = {"Cache-Control": "no-store"}
# The sign-in page is never cached and never framed (no click-jacking of the form).
LOGIN_PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "Referrer-Policy": "same-origin",
}

router = APIRouter()
log = structlog.get_logger(__name__)


# --- the cookie ---------------------------------------------------------------------------------


@lru_cache(maxsize=4)
def _key_from_vault_spec(spec: str) -> bytes:
    raw = next(iter(parse_key_spec(spec).values()))  # validated with the vault's own errors
    # A separate key for another purpose: the AES key itself never signs anything.
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=HKDF_INFO).derive(raw)


def session_signing_key(settings: Settings) -> bytes:
    """The key session cookies are signed with (configured, or derived from the vault key)."""
    if settings.session_secret is not None and settings.session_secret.get_secret_value():
        return settings.session_secret.get_secret_value().encode()
    if settings.secret_keys is None or not settings.secret_keys.get_secret_value().strip():
        raise ConfigurationError(
            "Neither PMSGATE_SESSION_SECRET nor PMSGATE_SECRET_KEYS is set: session cookies "
            "cannot be signed.",
            code="missing_session_secret",
            hint="Set PMSGATE_SECRET_KEYS (see `pmsgate secrets generate-key`) or "
            "PMSGATE_SESSION_SECRET.",
        )
    return _key_from_vault_spec(settings.secret_keys.get_secret_value())


class SessionCookieSigner(TimestampSigner):
    """Signs session ids, timestamped on the injected clock (tests move time, never sleep)."""

    def __init__(self, key: bytes, clock: Clock) -> None:
        super().__init__(key, salt=_SIGNER_SALT, digest_method=hashlib.sha256)
        self._clock = clock

    def get_timestamp(self) -> int:
        """Seconds since the epoch, from the clock."""
        return int(self._clock.now().timestamp())


def session_signer(settings: Settings, clock: Clock) -> SessionCookieSigner:
    """The signer of session cookies for these settings."""
    return SessionCookieSigner(session_signing_key(settings), clock)


def _signer(request: Request) -> SessionCookieSigner:
    web = web_services(request)
    return session_signer(web.settings, web.clock)


def _cookie_secure(request: Request) -> bool:
    mode = web_services(request).settings.cookie_secure
    if mode == "auto":
        return request.url.scheme == "https"
    return mode == "always"


def set_session_cookie(response: Response, request: Request, raw_session_id: str) -> None:
    """Put the signed session id on the response (HttpOnly, SameSite=Lax, Path=/)."""
    settings = web_services(request).settings
    response.set_cookie(
        SESSION_COOKIE,
        _signer(request).sign(raw_session_id).decode(),
        max_age=int(settings.session_ttl_s),
        path="/",
        httponly=True,
        samesite="lax",
        secure=_cookie_secure(request),
    )


def clear_session_cookie(response: Response, request: Request) -> None:
    """Tell the browser to drop the session cookie."""
    response.delete_cookie(
        SESSION_COOKIE, path="/", httponly=True, samesite="lax", secure=_cookie_secure(request)
    )


def _raw_session_id(request: Request) -> str | None:
    value = request.cookies.get(SESSION_COOKIE)
    if not value:
        return None
    try:
        raw = _signer(request).unsign(
            value, max_age=int(web_services(request).settings.session_ttl_s)
        )
        return raw.decode("ascii")
    except (BadSignature, UnicodeDecodeError):
        return None


async def _session(request: Request) -> tuple[Principal, str] | None:
    """The request's principal and raw session id, read once per request."""
    if hasattr(request.state, _STATE_KEY):
        cached: tuple[Principal, str] | None = getattr(request.state, _STATE_KEY)
        return cached
    found: tuple[Principal, str] | None = None
    raw = _raw_session_id(request)
    if raw is not None:
        principal = await web_services(request).users.principal(raw)
        if principal is not None:
            found = (principal, raw)
    setattr(request.state, _STATE_KEY, found)
    return found


def current_session_hash(request: Request) -> str | None:
    """The SHA-256 of this request's live session id, once its principal was read; else None.

    What binds a one-time form token or hand-off to one session (never the raw id).
    """
    found: tuple[Principal, str] | None = getattr(request.state, _STATE_KEY, None)
    return None if found is None else session_id_hash(found[1])


# --- dependencies -----------------------------------------------------------------------------


def not_authenticated() -> Unauthorized:
    """The answer to a request without a valid session."""
    return Unauthorized(
        "Sign in first: no valid session came with the request.",
        code="not_authenticated",
        hint="Sign in at /login (or POST /api/auth/login) and send the session cookie.",
    )


async def optional_principal(request: Request) -> Principal | None:
    """The signed-in user, or None (for pages that redirect to /login instead of 401)."""
    found = await _session(request)
    return None if found is None else found[0]


async def current_principal(request: Request) -> Principal:
    """The signed-in user; 401 not_authenticated without a valid, live session cookie.

    A form refused for that keeps what was typed (:mod:`pmsgate.web.kept_input`).
    """
    found = await _session(request)
    if found is None:
        if request.cookies.get(SESSION_COOKIE):  # it had a session: it ended
            await remember_form(request)
        raise not_authenticated()
    return found[0]


async def require_admin(principal: Annotated[Principal, Depends(current_principal)]) -> Principal:
    """The signed-in user when a platform admin; 403 forbidden otherwise."""
    if not principal.is_admin:
        raise Forbidden(
            "This needs a platform admin's sign-in.",
            code="forbidden",
            hint="Sign in with an admin account.",
        )
    return principal


async def check_csrf(request: Request, principal: Principal) -> None:
    """403 csrf_failed unless the request carries the session's CSRF token."""
    sent = request.headers.get(CSRF_HEADER)
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if sent is None and content_type in _FORM_TYPES:
        # Starlette caches the parsed form on the request: the route still reads it.
        value = (await request.form()).get(CSRF_FIELD)
        sent = value if isinstance(value, str) else None
    if not sent or not hmac.compare_digest(sent.encode(), principal.csrf_token.encode()):
        raise Forbidden(
            "The request did not carry this session's CSRF token.",
            code="csrf_failed",
            hint=f"Send the token in the {CSRF_HEADER} header or the {CSRF_FIELD} form field "
            "(reload the page to get the current one).",
        )


async def require_csrf(
    request: Request, principal: Annotated[Principal, Depends(current_principal)]
) -> Principal:
    """The signed-in user of a write that carries its CSRF token (401, then 403 csrf_failed)."""
    await check_csrf(request, principal)
    return principal


async def require_admin_csrf(
    request: Request, principal: Annotated[Principal, Depends(require_admin)]
) -> Principal:
    """An admin's write carrying its CSRF token (401, 403 forbidden, 403 csrf_failed)."""
    await check_csrf(request, principal)
    return principal


def ensure_can_act_on(principal: Principal, student_id: str) -> None:
    """403 forbidden unless the user is an admin or the customer ``student_id`` itself."""
    if principal.is_admin or principal.student_id == student_id:
        return
    raise Forbidden(
        "A customer account can see and change only its own customer.",
        code="forbidden",
        hint="Sign in with the account of that customer, or an admin account.",
    )


SignedIn = Annotated[Principal, Depends(current_principal)]
Admin = Annotated[Principal, Depends(require_admin)]
SignedInWrite = Annotated[Principal, Depends(require_csrf)]
AdminWrite = Annotated[Principal, Depends(require_admin_csrf)]


# --- routes -------------------------------------------------------------------------------------


def safe_next(value: str | None) -> str | None:
    """``value`` when it is a path on this site (no scheme, host or ``//``); else None."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return None
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in value):
        return None
    parts = urlsplit(value)
    if parts.scheme or parts.netloc:
        return None
    return value


def _client(request: Request) -> str:
    # Behind a reverse proxy this is the proxy unless uvicorn runs with --proxy-headers.
    return request.client.host if request.client else "unknown"


def actor_of(principal: Principal) -> Actor:
    """The signed-in user as an audit actor (its e-mail address and role)."""
    if principal.is_admin:
        return Actor.admin(principal.email)
    return Actor.customer_user(principal.email)


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
    headers = dict(LOGIN_PAGE_HEADERS)
    if error is not None:
        headers.update(error.headers)
    return templates.TemplateResponse(
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
        headers=headers,
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


async def _end_current_session(request: Request) -> None:
    found = await _session(request)
    if found is not None:
        await web_services(request).users.sign_out(found[1])
    setattr(request.state, _STATE_KEY, None)


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
    await _end_current_session(request)
    response = RedirectResponse(target or _DEFAULT_LANDING, status_code=303)
    set_session_cookie(response, request, raw)
    return response


# --- one-time sign-in links (an incident notice's "reconnect now"; docs/web.md) ---------------

# The token is in the URL: no Referer ever carries it on, and the page is never cached.
LINK_PAGE_HEADERS = {**LOGIN_PAGE_HEADERS, "Referrer-Policy": "no-referrer"}


def _link_page(
    request: Request, token: str | None, error: LoginLinkRefused | None = None
) -> HTMLResponse:
    return templates.TemplateResponse(
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
    return templates.TemplateResponse(
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
    await _end_current_session(request)
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
    await _end_current_session(request)
    response = RedirectResponse(safe_next(link.target) or _DEFAULT_LANDING, status_code=303)
    response.headers.update(NO_STORE)
    set_session_cookie(response, request, raw)
    return response


# --- "Forgot password?" --------------------------------------------------------------------------


def _forgot_page(
    request: Request, *, email: str = "", sent: bool = False, status_code: int = 200
) -> HTMLResponse:
    return templates.TemplateResponse(
        request,
        "forgot_password.html",
        {"principal": None, "email": email, "sent": sent},
        status_code=status_code,
        headers=LOGIN_PAGE_HEADERS,
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
        await _end_current_session(request)
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
    await _end_current_session(request)
    response = JSONResponse(principal_json(principal), headers=NO_STORE)
    set_session_cookie(response, request, raw)
    return response


@router.post("/api/auth/logout", status_code=204, tags=["web: accounts"])
async def api_logout(request: Request, principal: SignedInWrite) -> Response:
    """End the session (CSRF token required) and drop the cookie."""
    await _end_current_session(request)
    response = Response(status_code=204)
    clear_session_cookie(response, request)
    return response


@router.get("/api/auth/me", tags=["web: accounts"])
async def api_me(principal: SignedIn) -> JSONResponse:
    """The signed-in user and its CSRF token."""
    return JSONResponse(principal_json(principal), headers=NO_STORE)
