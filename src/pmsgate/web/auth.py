"""The session and the FastAPI dependencies every web route authenticates with.

The session cookie carries the raw session id signed with itsdangerous (HMAC-SHA256,
timestamped on the injected clock) under ``PMSGATE_SESSION_SECRET``, or, when that is
unset, under a key derived with HKDF from the primary vault key, so every replica
agrees without another secret to distribute. A forged or altered cookie is refused
before the database is asked; a genuine one still needs its live row (logout and
password changes delete it).

Every cookie-authenticated write must also send the session's CSRF token, in the
``X-CSRF-Token`` header (htmx, JSON clients) or the ``csrf_token`` form field (plain
HTML forms); SameSite=Lax alone would still let a top-level cross-site form POST in.

The routes that start and end a session are in :mod:`pmsgate.web.login`; the signing key
in :mod:`pmsgate.web.signing`.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, Request
from fastapi.responses import Response
from itsdangerous import BadSignature, TimestampSigner

from pmsgate.audit.actions import Actor
from pmsgate.clock import Clock
from pmsgate.config import Settings
from pmsgate.errors import Forbidden, Unauthorized
from pmsgate.web.context import web_services
from pmsgate.web.kept_input import remember_form
from pmsgate.web.signing import session_signing_key, set_console_cookie
from pmsgate.web.users import Principal, session_id_hash

SESSION_COOKIE = "pmsgate_session"
CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"
_SIGNER_SALT = b"pmsgate.web.session-cookie"
# Set on request.state so that every dependency of one request reads the cookie once.
_STATE_KEY = "pmsgate_session"
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


# --- the cookie ---------------------------------------------------------------------------------


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
    set_console_cookie(
        response,
        SESSION_COOKIE,
        _signer(request).sign(raw_session_id).decode(),
        max_age=int(settings.session_ttl_s),
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


# --- what the sign-in routes (pmsgate.web.login) and every other route share -------------


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


def actor_of(principal: Principal) -> Actor:
    """The signed-in user as an audit actor (its e-mail address and role)."""
    if principal.is_admin:
        return Actor.admin(principal.email)
    return Actor.customer_user(principal.email)


async def end_current_session(request: Request) -> None:
    """End the request's session, if it has a live one (before a new sign-in, or sign-out)."""
    found = await _session(request)
    if found is not None:
        await web_services(request).users.sign_out(found[1])
    setattr(request.state, _STATE_KEY, None)


def known_principal(request: Request) -> Principal | None:
    """Who this request was read as signed in, when a dependency read its session; else None.

    Never reads the cookie itself: an error page shows the reader the route already knew.
    """
    found: tuple[Principal, str] | None = getattr(request.state, _STATE_KEY, None)
    return None if found is None else found[0]
