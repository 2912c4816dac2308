"""Which language and time zone a web request is answered in, and the language switch.

The language, first that applies:

1. the switch on the page (``POST /language``: a cookie, a year long);
2. a customer account's customer's setting (the customer file's ``language``);
3. the browser's ``Accept-Language`` (Italian or English, by preference);
4. Italian — the customers are Italian property operators.

Admins read an English console (the platform team's working language): their pages are
English whatever the browser says. The time zone is the customer's (the customer file's
``timezone``), Europe/Rome for everyone else. ``now`` comes from the injected clock, so
"3 hours ago" is testable.
"""

from __future__ import annotations

from typing import Annotated

from babel import negotiate_locale
from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse

from pmsgate import i18n
from pmsgate.web.auth import optional_principal, safe_next
from pmsgate.web.context import web_services
from pmsgate.web.signing import set_console_cookie
from pmsgate.web.users import Principal

LANGUAGE_COOKIE = "pmsgate_language"
LANGUAGE_COOKIE_MAX_AGE = 365 * 86400

router = APIRouter(include_in_schema=False)


def accepted_languages(header: str | None) -> list[str]:
    """The ``Accept-Language`` header's languages, most wanted first (``q=0`` left out)."""
    weighted: list[tuple[float, int, str]] = []
    for index, part in enumerate((header or "").split(",")):
        tag, _, params = part.strip().partition(";")
        quality = 1.0
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name.strip() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if tag and tag != "*" and quality > 0:
            weighted.append((-quality, index, tag.strip().replace("-", "_")))
    return [tag for _q, _i, tag in sorted(weighted)]


def browser_language(header: str | None) -> i18n.Language | None:
    """The first supported language the browser asks for, if any."""
    found = negotiate_locale(accepted_languages(header), list(i18n.LANGUAGES), sep="_")
    return i18n.language_of(found) if found else None


def request_language(request: Request, principal: Principal | None) -> i18n.Language:
    """The language to answer ``request`` in (see the module's docstring)."""
    if principal is not None and principal.is_admin:
        return "en"
    chosen = request.cookies.get(LANGUAGE_COOKIE)
    if chosen in i18n.LANGUAGES:
        return i18n.language_of(chosen)
    if principal is not None and principal.language:
        return i18n.language_of(principal.language)
    return browser_language(request.headers.get("accept-language")) or i18n.DEFAULT_LANGUAGE


async def use_request_reader(request: Request) -> None:
    """Set the reader of this request (a router dependency of every web route)."""
    principal = await optional_principal(request)
    timezone = principal.timezone if principal is not None and principal.timezone else None
    i18n.set_reader(
        i18n.Reader(
            language=request_language(request, principal),
            timezone=timezone or i18n.DEFAULT_TIMEZONE,
            now=web_services(request).clock.now(),
        )
    )


@router.post("/language")
async def switch_language(
    request: Request,
    language: Annotated[str, Form(max_length=8)] = "",
    next_url: Annotated[str | None, Form(alias="next", max_length=2048)] = None,
) -> RedirectResponse:
    """Remember the language chosen on the page, and go back to it (303).

    No CSRF token: choosing a language changes nothing but how pages read, and the form
    is on the sign-in page too, where there is no session yet.
    """
    response = RedirectResponse(safe_next(next_url) or "/console", status_code=303)
    if language in i18n.LANGUAGES:
        set_console_cookie(
            response,
            LANGUAGE_COOKIE,
            language,
            max_age=LANGUAGE_COOKIE_MAX_AGE,
            secure=request.url.scheme == "https",
        )
    return response
