"""What every console page shares: one way to render it, to refuse, and to ask for a sign-in.

- :func:`render_page` renders a template with the page headers (never cached by a shared
  proxy, never framed): the one rendering function of the console's routes;
- :data:`PagePrincipal` is the signed-in reader of a page; without a session the page
  answers 303 to ``/login?next=…`` (htmx: ``HX-Redirect``);
- a service error a console route raises becomes a page through one exception handler,
  :func:`render_console_error` (``create_app`` installs it): sign in again, reload, or
  :func:`error_page` with the error's status. The JSON API under ``/api`` keeps its
  ``{"error": {code, message, hint}}`` body (:mod:`pmsgate.errors`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from pmsgate.errors import PmsgateError
from pmsgate.web.auth import SESSION_COOKIE, known_principal, optional_principal
from pmsgate.web.kept_input import keep_on
from pmsgate.web.templating import templates
from pmsgate.web.users import Principal

# Pages may show the customer's data only: never cached by a shared proxy, never framed.
PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "Referrer-Policy": "same-origin",
}

# Paths whose errors a person reads in a browser: answered as pages, not JSON.
PAGE_PATHS = ("/console", "/login", "/logout", "/language")


def is_htmx(request: Request) -> bool:
    """Whether htmx sent the request (it swaps the answer into a part of the page)."""
    return request.headers.get("HX-Request") == "true"


def render_page(
    request: Request,
    template: str,
    context: dict[str, Any],
    *,
    status_code: int = 200,
    headers: Mapping[str, str] | None = None,
) -> HTMLResponse:
    """``template`` rendered with ``context``, with the page headers (and ``headers``)."""
    return templates.TemplateResponse(
        request,
        template,
        context,
        status_code=status_code,
        headers={**PAGE_HEADERS, **(headers or {})},
    )


def error_page(request: Request, principal: Principal | None, error: PmsgateError) -> HTMLResponse:
    """The error as a page of the console (its status, code, message and hint)."""
    return render_page(
        request, "error.html", {"principal": principal, "error": error}, status_code=error.status
    )


def customer_path(student_id: str) -> str:
    """The console page of a customer."""
    return f"/console/customers/{quote(student_id, safe='')}"


def login_redirect(request: Request, *, expired: bool = False) -> Response:
    """To the login page, back here afterwards (htmx: the whole page goes, not a fragment).

    ``expired``: the request came with a session that has ended; the sign-in page says so.
    """
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    location = f"/login?next={quote(target, safe='/')}" + ("&expired=1" if expired else "")
    if is_htmx(request):
        # htmx would swap the login page into a panel; it follows HX-Redirect instead.
        return Response(status_code=200, headers={"HX-Redirect": location})
    return RedirectResponse(location, status_code=303)


class SignInFirst(PmsgateError):
    """A page opened without a session: answered by the way to the sign-in page."""

    code = "not_authenticated"
    status = 401
    hint = "Sign in at /login."


async def page_principal(request: Request) -> Principal:
    """The signed-in reader of a page; :class:`SignInFirst` (303 to ``/login``) without one."""
    principal = await optional_principal(request)
    if principal is None:
        raise SignInFirst("Sign in first: this page needs a session.")
    return principal


MaybePrincipal = Annotated[Principal | None, Depends(optional_principal)]
PagePrincipal = Annotated[Principal, Depends(page_principal)]


def is_page(request: Request) -> bool:
    """Whether the request is for a console page (or one of its htmx fragments)."""
    path = request.url.path
    return path == "/" or any(path == p or path.startswith(p + "/") for p in PAGE_PATHS)


def render_console_error(request: Request, error: PmsgateError) -> Response | None:
    """A console page's error as a page: sign in again, reload, or the error page.

    The one exception handler of the console's routes (``create_app`` installs it with
    :func:`pmsgate.errors.install_error_handlers`); None for every other path, which gets
    the JSON error body. The error page names the reader a route had already read.
    """
    if not is_page(request):
        return None
    if isinstance(error, SignInFirst):
        return login_redirect(request)
    if error.code == "not_authenticated":
        response = login_redirect(request, expired=bool(request.cookies.get(SESSION_COOKIE)))
        keep_on(response, request)  # what a refused form had typed, back after signing in
        return response
    if error.code == "csrf_failed" and is_htmx(request):
        # A page older than its session: reload it, which brings a fresh token.
        return Response(status_code=200, headers={"HX-Refresh": "true"})
    return error_page(request, known_principal(request), error)
