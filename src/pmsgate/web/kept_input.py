"""What a person typed into a form when their session had ended: kept, never lost.

A form sent after the session expired (a page left open overnight) cannot be carried
out: the sender must sign in again. Rather than drop what was typed, the form's fields —
**except passwords, API keys and the CSRF token** — travel to the sign-in page and back
in a short-lived cookie signed like the session cookie (itsdangerous, ten minutes), and
the page the form was on fills them in again and says why the person had to sign in.
The sign-in page says it too (``/login?next=…&expired=1``).
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import Response
from itsdangerous import BadSignature, URLSafeTimedSerializer

from pmsgate.web.context import web_services
from pmsgate.web.signing import session_signing_key, set_console_cookie

KEPT_COOKIE = "pmsgate_kept"
KEPT_MAX_AGE_S = 600
# Never kept: a secret is typed again, not stored in a cookie.
SECRET_FIELDS = frozenset({"password", "password_confirm", "api_key", "csrf_token"})
MAX_KEPT_FIELDS = 20
MAX_KEPT_VALUE = 500
_STATE_KEY = "pmsgate_kept_fields"
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def _serializer(request: Request) -> URLSafeTimedSerializer:
    key = session_signing_key(web_services(request).settings)
    return URLSafeTimedSerializer(key, salt="pmsgate.web.kept-input")


async def remember_form(request: Request) -> None:
    """Note a form's non-secret fields on the request (it is about to be refused)."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if request.method != "POST" or content_type not in _FORM_TYPES:
        return
    form = await request.form()
    kept: dict[str, str] = {}
    for name, value in form.multi_items():
        if name in SECRET_FIELDS or not isinstance(value, str) or len(kept) >= MAX_KEPT_FIELDS:
            continue
        kept[name[:64]] = value[:MAX_KEPT_VALUE]
    setattr(request.state, _STATE_KEY, {"path": request.url.path, "fields": kept})


def keep_on(response: Response, request: Request) -> bool:
    """Put the noted fields on ``response`` as the signed cookie; whether there were any."""
    noted = getattr(request.state, _STATE_KEY, None)
    if not noted:
        return False
    set_console_cookie(
        response,
        KEPT_COOKIE,
        _serializer(request).dumps(noted),
        max_age=KEPT_MAX_AGE_S,
        secure=request.url.scheme == "https",
    )
    return True


def read_kept(request: Request, path_prefix: str) -> dict[str, Any] | None:
    """The fields kept for a form under ``path_prefix``, or None (tampered, old, elsewhere)."""
    value = request.cookies.get(KEPT_COOKIE)
    if not value:
        return None
    try:
        noted = _serializer(request).loads(value, max_age=KEPT_MAX_AGE_S)
    except BadSignature:
        return None
    if not isinstance(noted, dict) or not str(noted.get("path", "")).startswith(path_prefix):
        return None
    fields = noted.get("fields")
    return {"path": noted["path"], "fields": fields if isinstance(fields, dict) else {}}


def forget_kept(response: Response) -> None:
    """Drop the cookie once its fields are back in their form."""
    response.delete_cookie(KEPT_COOKIE, path="/", httponly=True, samesite="lax")
