"""The console: server-rendered pages (Jinja2) that htmx makes live, readable without JavaScript.

Pages: ``/console`` (admins: every customer; a customer is sent to its own page) and
``/console/customers/{student_id}``. Actions are plain HTML forms (CSRF token in a
hidden field) that htmx upgrades to partial updates: without JavaScript a form posts,
the server answers 303 back to the page, and a page with a running sync refreshes
itself every few seconds; with htmx the panel alone is swapped and polled.

The actions call the same operations as the JSON API (:mod:`pmsgate.web.api`), so the
console can never do what the API would refuse.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import SecretStr

from pmsgate.customers.reconnect import connect_kross
from pmsgate.errors import Forbidden, InvalidInput, NotFound, PmsgateError
from pmsgate.web.actions import console_action, ready_for_sync
from pmsgate.web.admin_pages import admin_customer_page, overview_page
from pmsgate.web.auth import AdminWrite, SignedInWrite, actor_of, ensure_can_act_on
from pmsgate.web.context import WebDep, WebServices
from pmsgate.web.customer_pages import MINTED_PARAM, customer_context, page_template
from pmsgate.web.form_tokens import repeated_path, with_query
from pmsgate.web.forms import spend_form_token
from pmsgate.web.kept_input import forget_kept, read_kept
from pmsgate.web.pages import PagePrincipal, customer_path, is_htmx, render_page
from pmsgate.web.users import Principal

router = APIRouter(include_in_schema=False)

# The longest expiry the mint form accepts, in days (about ten years).
MAX_KEY_EXPIRY_DAYS = 3650


@router.get("/", response_class=RedirectResponse)
async def root() -> RedirectResponse:
    """The app's root is the console."""
    return RedirectResponse("/console", status_code=303)


@router.get("/console", response_class=HTMLResponse)
async def home(request: Request, web: WebDep, principal: PagePrincipal) -> Response:
    """Admins: every customer at a glance; a customer: its own page."""
    if not principal.is_admin:
        if principal.student_id is None:  # a customer login always has one (CHECK constraint)
            raise Forbidden("This login has no customer.")
        return RedirectResponse(customer_path(principal.student_id), status_code=303)
    return await overview_page(request, web, principal)


async def _customer_view(
    request: Request, principal: Principal, student_id: str, template: str | None = None
) -> Response:
    extra: dict[str, Any] = {}
    kept = read_kept(request, customer_path(student_id))
    if kept is not None:
        # Back after signing in again: the form's typed fields (never a password) and why.
        extra.update(session_expired=True, kept=kept["fields"])
        if "username" in kept["fields"]:
            extra["username"] = kept["fields"]["username"]
    ensure_can_act_on(principal, student_id)
    context = await customer_context(request, principal, student_id, **extra)
    if template is None and request.query_params.get("reconnected"):
        context["reconnected"] = ReconnectShown(context["booking"])
    response = render_page(request, template or page_template(principal), context)
    if kept is not None:
        forget_kept(response)
    return response


@dataclass(frozen=True)
class ReconnectShown:
    """A reconnect's success as the page after its redirect shows it (no JavaScript)."""

    status: str
    listings_sync: str | None = None


@router.get("/console/customers/{student_id}", response_class=HTMLResponse)
async def customer(request: Request, student_id: str, principal: PagePrincipal) -> Response:
    """One customer's page: admins the detailed one, a customer's user the plain one."""
    if principal.is_admin:
        return await admin_customer_page(request, principal, student_id)
    return await _customer_view(request, principal, student_id)


@router.get("/console/customers/{student_id}/sync", response_class=HTMLResponse)
async def sync_panel(request: Request, student_id: str, principal: PagePrincipal) -> Response:
    """The knowledge-sync panel alone for htmx (it polls it while a sync runs).

    Opened directly (a bookmark, a reload of the polled URL), it is the whole page at the
    panel: a fragment is never shown unstyled.
    """
    if not is_htmx(request):
        return RedirectResponse(customer_path(student_id) + "#knowledge", status_code=303)
    return await _customer_view(request, principal, student_id, "_sync_panel.html")


@router.get("/console/customers/{student_id}/reconnect", response_class=RedirectResponse)
async def reconnect_page(student_id: str) -> RedirectResponse:
    """The reconnect form's address opened directly (a reload after posting it): its page."""
    return RedirectResponse(customer_path(student_id) + "#reconnect", status_code=303)


@router.post("/console/customers/{student_id}/sync", response_class=HTMLResponse)
async def start_sync(
    request: Request,
    web: WebDep,
    student_id: str,
    principal: SignedInWrite,
    commit: Annotated[str, Form()] = "false",
) -> Response:
    """Start a dry run or a commit in the background, once per form; show its live progress.

    The form's one-time token makes a reload or a double click land on the running sync
    instead of starting (or being refused) a second time.
    """
    # Whose page it is comes first: a refusal must not render the other customer's panel.
    ensure_can_act_on(principal, student_id)
    ctx = await web.customers.context(student_id)
    spend = await spend_form_token(request, START_SYNC_FORM)
    done_path = customer_path(student_id) + "#knowledge"
    if spend.repeated:
        if is_htmx(request):
            return render_page(
                request, "_sync_panel.html", await customer_context(request, principal, student_id)
            )
        return RedirectResponse(repeated_path(spend, done_path), status_code=303)
    as_commit = commit.strip().lower() == "true"
    try:
        async with console_action(
            web, principal, "knowledge.sync", student_id=student_id, details={"commit": as_commit}
        ):
            ready_for_sync(ctx)
            await web.sync_jobs.start(student_id, commit=as_commit)
    except PmsgateError as error:
        await web.form_tokens.release(spend)  # nothing started: the form may be sent again
        if not is_htmx(request) and principal.is_admin:
            raise
        context = await customer_context(request, principal, student_id, sync_error=error)
        if not is_htmx(request):
            return render_page(request, page_template(principal), context, status_code=error.status)
        return render_page(request, "_sync_panel.html", context)
    await web.form_tokens.finish(spend, result_path=done_path)
    if not is_htmx(request):
        return RedirectResponse(done_path, status_code=303)
    return render_page(
        request, "_sync_panel.html", await customer_context(request, principal, student_id)
    )


@router.post("/console/customers/{student_id}/reconnect", response_class=HTMLResponse)
async def reconnect(
    request: Request,
    web: WebDep,
    student_id: str,
    principal: SignedInWrite,
    username: Annotated[str, Form()] = "",
    password: Annotated[str, Form()] = "",
    api_key: Annotated[str, Form()] = "",
) -> Response:
    """Try new booking-system credentials; on success the integration is ``connected``."""
    ensure_can_act_on(principal, student_id)
    await web.customers.context(student_id)
    try:
        async with console_action(
            web, principal, "kross.reconnect", student_id=student_id, details={"username": username}
        ):
            result = await connect_kross(
                web.customers,
                web.gateway,
                student_id,
                username=username,
                password=SecretStr(password),
                api_key=SecretStr(api_key) if api_key.strip() else None,
                actor=actor_of(principal),
            )
    except PmsgateError as error:
        status = error.status if not is_htmx(request) else 200
        template = "_kross_panel.html" if is_htmx(request) else page_template(principal)
        context = await customer_context(
            request, principal, student_id, reconnect_error=error, username=username
        )
        return render_page(request, template, context, status_code=status)
    if not is_htmx(request):
        # The success where the eye is: the page opens at the result, not at the form.
        return RedirectResponse(
            customer_path(student_id) + "?reconnected=1#reconnect-result", status_code=303
        )
    context = await customer_context(request, principal, student_id, reconnected=result)
    return render_page(request, "_kross_panel.html", context)


# --- gateway keys (admins act; a customer sees its own facility's keys read-only) ----------


def expiry_days(value: str) -> int | None:
    """The mint form's optional expiry: empty is never, else whole days in 1..MAX (422)."""
    text = value.strip()
    if not text:
        return None
    days = int(text) if text.isdigit() else 0
    if not 1 <= days <= MAX_KEY_EXPIRY_DAYS:
        raise InvalidInput(
            f"The expiry must be a whole number of days from 1 to {MAX_KEY_EXPIRY_DAYS}.",
            code="invalid_expiry",
            hint="Leave it empty for a key that does not expire.",
        )
    return days


async def _hotel_of(web: WebServices, student_id: str) -> str:
    """The customer's facility (404 when none is linked yet)."""
    ctx = await web.customers.context(student_id)
    if ctx.hotel_id is None:
        raise NotFound(
            f"Customer {student_id} has no booking-system facility linked yet.",
            code="facility_not_found",
            hint="Onboarding step 1 links the facility; its keys can be managed after.",
        )
    return ctx.hotel_id


async def _keys_answer(
    request: Request, principal: Principal, student_id: str, error: PmsgateError
) -> Response:
    """The customer's page with the keys panel's error (nothing was changed)."""
    context = await customer_context(request, principal, student_id, keys_error=error)
    return render_page(request, page_template(principal), context, status_code=error.status)


def _keys_done(student_id: str) -> RedirectResponse:
    return RedirectResponse(customer_path(student_id) + "#keys", status_code=303)


# The one-time token purposes of the console's creating forms (pmsgate.web.form_tokens).
MINT_KEY_FORM = "mint_key"
START_SYNC_FORM = "start_sync"


@router.post("/console/customers/{student_id}/keys", response_class=HTMLResponse)
async def mint_key(
    request: Request,
    web: WebDep,
    student_id: str,
    principal: AdminWrite,
    label: Annotated[str, Form()] = "",
    scopes: Annotated[list[str] | None, Form()] = None,
    expires_in_days: Annotated[str, Form()] = "",
) -> Response:
    """Mint a key once per form (its one-time token); 303 to the page that shows it once.

    The raw key never travels in the URL: it waits, encrypted, as the form token's
    one-time hand-off, and the customer page after the redirect takes it (same session,
    once). A reload or a second click of the same form mints nothing and lands on that
    page with a plain "already sent".
    """
    hotel_id = await _hotel_of(web, student_id)
    spend = await spend_form_token(request, MINT_KEY_FORM)
    if spend.repeated:
        return RedirectResponse(repeated_path(spend, _keys_path(student_id)), status_code=303)
    try:
        async with console_action(
            web, principal, "gateway.mint_key", student_id=student_id, details={"label": label}
        ):
            days = expiry_days(expires_in_days)
            expires_at = web.clock.now() + timedelta(days=days) if days is not None else None
            view, raw = await web.gateway.facilities.mint_key(
                hotel_id,
                label,
                scopes=scopes or [],
                expires_at=expires_at,
                actor=actor_of(principal),
            )
    except PmsgateError as error:
        await web.form_tokens.release(spend)  # nothing was minted: the form may be sent again
        return await _keys_answer(request, principal, student_id, error)
    shown = with_query(_keys_path(student_id), **{MINTED_PARAM: spend.ref})
    await web.form_tokens.finish(spend, result_path=shown, handoff=f"{view.id}:{raw}")
    return RedirectResponse(shown, status_code=303)


def _keys_path(student_id: str) -> str:
    return customer_path(student_id) + "#keys"


@router.post("/console/customers/{student_id}/keys/{key_id}/revoke", response_class=HTMLResponse)
async def revoke_key(
    request: Request,
    web: WebDep,
    student_id: str,
    key_id: int,
    principal: AdminWrite,
    confirm: Annotated[str, Form()] = "",
) -> Response:
    """Revoke a key once the admin ticked the confirmation (a revoked key stays revoked)."""
    hotel_id = await _hotel_of(web, student_id)
    try:
        async with console_action(
            web, principal, "gateway.revoke_key", student_id=student_id, details={"key_id": key_id}
        ):
            if confirm != "yes":
                raise InvalidInput(
                    "Revoking a key needs its confirmation.",
                    code="confirmation_required",
                    hint="Tick the box to confirm: a revoked key cannot be restored.",
                )
            await web.gateway.facilities.revoke_key(hotel_id, key_id, actor=actor_of(principal))
    except PmsgateError as error:
        return await _keys_answer(request, principal, student_id, error)
    return _keys_done(student_id)


@router.post("/console/customers/{student_id}/keys/{key_id}/scopes", response_class=HTMLResponse)
async def set_key_scopes(
    request: Request,
    web: WebDep,
    student_id: str,
    key_id: int,
    principal: AdminWrite,
    scopes: Annotated[list[str] | None, Form()] = None,
) -> Response:
    """Replace a key's scopes with the ticked ones (the key itself is unchanged)."""
    hotel_id = await _hotel_of(web, student_id)
    try:
        async with console_action(
            web,
            principal,
            "gateway.set_key_scopes",
            student_id=student_id,
            details={"key_id": key_id, "scopes": list(scopes or [])},
        ):
            await web.gateway.facilities.set_key_scopes(
                hotel_id, key_id, scopes or [], actor=actor_of(principal)
            )
    except PmsgateError as error:
        return await _keys_answer(request, principal, student_id, error)
    return _keys_done(student_id)
