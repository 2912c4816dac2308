"""A console form's one-time token on the request side: issued into a page, spent by a route.

The tokens themselves (signed, spent once in the database, the one-time hand-off) are
:class:`pmsgate.web.form_tokens.FormTokens`, ``container.web.form_tokens``; these are
the helpers a route and a template use with the request's session.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Request
from fastapi.responses import RedirectResponse
from jinja2 import pass_context
from markupsafe import Markup, escape

from pmsgate.errors import PmsgateError
from pmsgate.web.auth import current_session_hash
from pmsgate.web.context import web_services
from pmsgate.web.form_tokens import (
    FORM_TOKEN_FIELD,
    FormTokenRefused,
    FormTokenSpend,
    repeated_path,
)
from pmsgate.web.templating import templates


def _session_hash(request: Request) -> str:
    found = current_session_hash(request)
    if found is None:  # the routes that spend tokens authenticate first
        raise FormTokenRefused("This form needs a signed-in session.")
    return found


async def spend_form_token(request: Request, purpose: str) -> FormTokenSpend:
    """Spend the ``form_token`` field of this request's form for ``purpose`` (see module)."""
    form = await request.form()
    value = form.get(FORM_TOKEN_FIELD)
    token = value if isinstance(value, str) else ""
    return await web_services(request).form_tokens.spend(
        token, purpose=purpose, session_hash=_session_hash(request)
    )


async def take_handoff(request: Request, ref: str | None) -> str | None:
    """The one-time hand-off ``ref`` names for this request's session, if still there."""
    session_hash = current_session_hash(request)
    if not ref or session_hash is None:
        return None
    return await web_services(request).form_tokens.take_handoff(ref, session_hash=session_hash)


async def act_once(
    request: Request,
    purpose: str,
    act: Callable[[], Awaitable[str]],
    *,
    repeated_to: str,
    refused_to: Callable[[PmsgateError], str],
) -> RedirectResponse:
    """A creating form's answer, acted on once per form: spend its token, act, then 303.

    A reload or a second click of the same form goes to ``repeated_to`` (marked repeated)
    and does nothing again; a refused act releases the token (the form may be sent again)
    and goes to ``refused_to(error)``; a done one to the path ``act`` returns.
    """
    tokens = web_services(request).form_tokens
    spend = await spend_form_token(request, purpose)
    if spend.repeated:
        return RedirectResponse(repeated_path(spend, repeated_to), status_code=303)
    try:
        done = await act()
    except PmsgateError as error:
        await tokens.release(spend)
        return RedirectResponse(refused_to(error), status_code=303)
    await tokens.finish(spend, result_path=done)
    return RedirectResponse(done, status_code=303)


@pass_context
def form_token_input(context: Any, purpose: str) -> Markup:
    """The hidden input carrying a new one-time token for a form of ``purpose`` (Jinja)."""
    request: Request = context["request"]
    session_hash = current_session_hash(request)
    if session_hash is None:
        return Markup("")
    token = web_services(request).form_tokens.issue(purpose, session_hash)
    return Markup('<input type="hidden" name="{}" value="{}">').format(
        FORM_TOKEN_FIELD, escape(token)
    )


# Every template may render ``{{ form_token("purpose") }}`` once this module is loaded (the
# routers that spend tokens import it; templating cannot import this module, which renders).
templates.env.globals["form_token"] = form_token_input
