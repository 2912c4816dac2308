"""The console's webhooks page: subscriptions, their secrets once, the delivery log, replay.

| route | who | what |
|---|---|---|
| ``GET /console/webhooks`` | customer: its own; admin: the team's and every customer's | subscriptions, the delivery log (``?customer=``, ``?status=`` filter an admin's) |
| ``POST /console/webhooks`` | signed in, one-time form token | a new subscription (an admin's: the team's, or a customer's); its secret shown once |
| ``POST /console/webhooks/{id}/rotate`` | its customer or an admin, one-time form token | a new secret shown once; the previous one signs during the overlap |
| ``POST /console/webhooks/{id}/remove`` | its customer or an admin, CSRF, confirmation | the subscription and its deliveries go |
| ``POST /console/webhooks/{id}/enable`` | its customer or an admin, CSRF | enabled again (after a 410) |
| ``POST /console/webhooks/deliveries/{id}/replay`` | its customer or an admin, CSRF | sent again on the next tick, same ``webhook-id`` |

A secret never travels in a URL: it waits, encrypted, as the form token's one-time hand-off,
and the page after the redirect takes it once (docs/web.md, one-time forms).
"""  # noqa: E501

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import APIRouter, Form, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from pmsgate.errors import Forbidden, InvalidInput, PmsgateError
from pmsgate.i18n import gettext
from pmsgate.web.auth import actor_of, check_csrf
from pmsgate.web.context import WebDep, WebServices
from pmsgate.web.form_tokens import repeated_path, with_query
from pmsgate.web.forms import spend_form_token, take_handoff
from pmsgate.web.pages import PagePrincipal, render_page
from pmsgate.web.users import Principal
from pmsgate.webhooks.events import EVENT_TYPES, EVENT_WORDS
from pmsgate.webhooks.service import DELIVERY_STATUSES, EVERY_OWNER, NewSecret, check_status

router = APIRouter(include_in_schema=False)

WEBHOOKS = "/console/webhooks"
SUBSCRIBE_FORM = "webhook_subscribe"
ROTATE_FORM = "webhook_rotate"
SECRET_PARAM = "secret"
TEAM = "team"
_ID = Path(ge=1, le=2**31 - 1)
# What a secret-answering form does: create or rotate, answering the secret once.
NewSecretAction = Callable[[], Awaitable[NewSecret]]


def _scope(principal: Principal) -> str | None:
    """What the user may see and change: every subscription (admin), or its customer's."""
    if principal.is_admin:
        return EVERY_OWNER
    if principal.student_id is None:  # a customer login always has one (CHECK constraint)
        raise Forbidden("This login has no customer.")
    return principal.student_id


def event_words(event: str) -> str:
    """An event as the page says it, in the reader's language."""
    return gettext(EVENT_WORDS[event]) if event in EVENT_WORDS else event


async def _page(
    request: Request,
    web: WebServices,
    principal: Principal,
    *,
    error: PmsgateError | None = None,
    **shown: str | None,
) -> Response:
    """The page; ``shown``: the new ``secret`` once, the ``customer`` and ``status`` filters."""
    scope = _scope(principal)
    customer, status = shown.get("customer"), shown.get("status")
    listed = customer if principal.is_admin and customer else scope
    subscriptions = await web.webhooks.subscriptions(listed)
    deliveries = await web.webhooks.deliveries(listed, status=status, limit=100)
    return render_page(
        request,
        "webhooks.html",
        {
            "principal": principal,
            "subscriptions": subscriptions,
            "deliveries": deliveries,
            "events": EVENT_TYPES,
            "event_words": event_words,
            "statuses": DELIVERY_STATUSES,
            "customer": customer or "",
            "status": status or "",
            "secret": shown.get("secret"),
            "error": error,
            "repeated": request.query_params.get("repeated") == "1",
        },
        status_code=error.status if error is not None else 200,
        headers={"Cache-Control": "no-store"},
    )


@router.get(WEBHOOKS, response_class=HTMLResponse)
async def webhooks_page(
    request: Request,
    web: WebDep,
    principal: PagePrincipal,
    secret: Annotated[str | None, Query(alias=SECRET_PARAM, max_length=100)] = None,
    customer: Annotated[str | None, Query(max_length=64)] = None,
    status: Annotated[str | None, Query(max_length=16)] = None,
) -> Response:
    """The subscriptions and the delivery log; a new secret once, after its form."""
    if status:
        check_status(status)
    shown = await take_handoff(request, secret)
    return await _page(
        request, web, principal, secret=shown, customer=customer, status=status or None
    )


async def _with_secret(
    request: Request,
    web: WebServices,
    principal: Principal,
    purpose: str,
    act: NewSecretAction,
) -> Response:
    """A form that answers with a secret, acted on once: spend its token, act, hand the
    secret off (encrypted, one read) and 303 to the page that shows it."""
    spend = await spend_form_token(request, purpose)
    if spend.repeated:
        return RedirectResponse(repeated_path(spend, WEBHOOKS), status_code=303)
    try:
        created = await act()
    except PmsgateError as error:
        await web.form_tokens.release(spend)  # nothing changed: the form may be sent again
        return await _page(request, web, principal, error=error)
    shown = with_query(WEBHOOKS, **{SECRET_PARAM: spend.ref})
    await web.form_tokens.finish(spend, result_path=shown, handoff=created.secret)
    return RedirectResponse(shown, status_code=303)


@router.post(WEBHOOKS, response_class=HTMLResponse)
async def subscribe(
    request: Request,
    web: WebDep,
    principal: PagePrincipal,
    url: Annotated[str, Form(max_length=2000)] = "",
    events: Annotated[list[str] | None, Form()] = None,
    description: Annotated[str, Form(max_length=200)] = "",
    owner: Annotated[str, Form(max_length=64)] = TEAM,
) -> Response:
    """A new subscription: a customer's own; an admin's for the team or a customer."""
    await check_csrf(request, principal)
    scope = _scope(principal)
    target = (None if owner.strip() in ("", TEAM) else owner) if principal.is_admin else scope

    async def act() -> NewSecret:
        return await web.webhooks.subscribe(
            target, url, events or [], actor=actor_of(principal), description=description
        )

    return await _with_secret(request, web, principal, SUBSCRIBE_FORM, act)


@router.post(WEBHOOKS + "/{subscription_id}/rotate", response_class=HTMLResponse)
async def rotate(
    request: Request, web: WebDep, principal: PagePrincipal, subscription_id: Annotated[int, _ID]
) -> Response:
    """A new secret; the previous one keeps signing for the configured overlap."""
    await check_csrf(request, principal)
    scope = _scope(principal)

    async def act() -> NewSecret:
        return await web.webhooks.rotate(subscription_id, scope, actor=actor_of(principal))

    return await _with_secret(request, web, principal, ROTATE_FORM, act)


async def _act(
    request: Request,
    web: WebServices,
    principal: Principal,
    change: Callable[..., Awaitable[object]],
    number: int,
    *,
    done: str = WEBHOOKS,
    confirmed: bool = True,
) -> Response:
    """A CSRF-checked ``change`` of ``number`` in the user's scope (refused unless
    ``confirmed``): 303 to ``done``, or the page with its error."""
    await check_csrf(request, principal)
    try:
        if not confirmed:
            raise InvalidInput(
                "Removing a subscription needs its confirmation.",
                code="confirmation_required",
                hint="Tick the box to confirm: its deliveries go with it.",
            )
        await change(number, _scope(principal), actor=actor_of(principal))
    except PmsgateError as error:
        return await _page(request, web, principal, error=error)
    return RedirectResponse(done, status_code=303)


@router.post(WEBHOOKS + "/{subscription_id}/remove", response_class=HTMLResponse)
async def remove(
    request: Request,
    web: WebDep,
    principal: PagePrincipal,
    subscription_id: Annotated[int, _ID],
    confirm: Annotated[str, Form(max_length=8)] = "",
) -> Response:
    """Delete a subscription once the box is ticked."""
    return await _act(
        request, web, principal, web.webhooks.remove, subscription_id, confirmed=confirm == "yes"
    )


@router.post(WEBHOOKS + "/{subscription_id}/enable", response_class=HTMLResponse)
async def enable(
    request: Request, web: WebDep, principal: PagePrincipal, subscription_id: Annotated[int, _ID]
) -> Response:
    """Enable a subscription again (a receiver's 410 disabled it)."""
    return await _act(request, web, principal, web.webhooks.enable, subscription_id)


@router.post(WEBHOOKS + "/deliveries/{delivery_id}/replay", response_class=HTMLResponse)
async def replay(
    request: Request, web: WebDep, principal: PagePrincipal, delivery_id: Annotated[int, _ID]
) -> Response:
    """Send a delivery again on the next tick (the same event, the same ``webhook-id``)."""
    return await _act(
        request, web, principal, web.webhooks.replay, delivery_id, done=WEBHOOKS + "#deliveries"
    )
