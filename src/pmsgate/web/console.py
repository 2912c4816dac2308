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
from datetime import datetime, timedelta
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import SecretStr

from pmsgate.customers.reconnect import connect_kross
from pmsgate.customers.registry_check import latest_registry_check
from pmsgate.errors import Forbidden, InvalidInput, NotFound, PmsgateError
from pmsgate.i18n import N_, gettext
from pmsgate.storage.audit import AuditFilter
from pmsgate.web.admin_console import admin_customer_page, overview_page
from pmsgate.web.api import ready_for_sync
from pmsgate.web.app import login_redirect
from pmsgate.web.audit import console_action
from pmsgate.web.auth import (
    AdminWrite,
    SignedInWrite,
    actor_of,
    ensure_can_act_on,
    optional_principal,
)
from pmsgate.web.charts import Chart, Series, chart_figure, hourly_chart, time_chart, usd_label
from pmsgate.web.context import WebDep, WebServices, web_services
from pmsgate.web.customer_view import (
    CustomerHome,
    booking_state,
    customer_home,
    error_words,
    explain_job,
    reconnect_words,
)
from pmsgate.web.form_tokens import repeated_path, spend_form_token, take_handoff, with_query
from pmsgate.web.kept_input import forget_kept, read_kept
from pmsgate.web.templating import templates
from pmsgate.web.users import Principal
from pmsgate.web.views import (
    COMMIT_COUNTERS,
    DRY_RUN_COUNTERS,
    CustomerPage,
    customer_page,
)

router = APIRouter(include_in_schema=False)

# What a browser without JavaScript re-reads while a sync runs, in seconds.
NO_SCRIPT_REFRESH_S = 3
# How often htmx polls a running sync's panel.
POLL_EVERY = "1s"
# The longest expiry the mint form accepts, in days (about ten years).
MAX_KEY_EXPIRY_DAYS = 3650

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

MaybePrincipal = Annotated[Principal | None, Depends(optional_principal)]


def _is_htmx(request: Request) -> bool:
    return request.headers.get("HX-Request") == "true"


def _render(
    request: Request,
    template: str,
    context: dict[str, Any],
    *,
    status_code: int = 200,
) -> HTMLResponse:
    response = templates.TemplateResponse(
        request, template, context, status_code=status_code, headers=PAGE_HEADERS
    )
    return response


def error_page(request: Request, principal: Principal | None, error: PmsgateError) -> HTMLResponse:
    """The error as a page of the console (its status, code, message and hint)."""
    return _render(
        request,
        "error.html",
        {"principal": principal, "error": error},
        status_code=error.status,
    )


def customer_path(student_id: str) -> str:
    """The console page of a customer."""
    return f"/console/customers/{quote(student_id, safe='')}"


@router.get("/", response_class=RedirectResponse)
async def root() -> RedirectResponse:
    """The app's root is the console."""
    return RedirectResponse("/console", status_code=303)


@router.get("/console", response_class=HTMLResponse)
async def home(request: Request, web: WebDep, principal: MaybePrincipal) -> Response:
    """Admins: every customer at a glance; a customer: its own page."""
    if principal is None:
        return login_redirect(request)
    if not principal.is_admin:
        if principal.student_id is None:  # a customer login always has one (CHECK constraint)
            return error_page(request, principal, Forbidden("This login has no customer."))
        return RedirectResponse(customer_path(principal.student_id), status_code=303)
    return await overview_page(request, web, principal)


# The charts' empty states (translated where they are used: gettext(USAGE_EMPTY)).
USAGE_EMPTY = N_(
    "No usage yet — the first snapshot is taken when set-up finishes, then one every 6 hours."
)
HOURLY_EMPTY = N_("No assistant lookups in the last 48 hours.")


def _since_onboarding(page: CustomerPage) -> tuple[list[datetime], dict[str, list[float]]]:
    """The known snapshots' totals minus the baseline's (else the first known snapshot's).

    A snapshot recorded as unknown (the platform's usage could not be read) is left out,
    never drawn as zeros.
    """
    known = [s for s in page.snapshots if s.known]
    if not known:
        return [], {}
    base = next((s for s in known if s.kind == "baseline"), known[0])
    shown = [s for s in known if s.taken_at >= base.taken_at]

    def since(values: list[float]) -> list[float]:
        return [max(0.0, v - values[0]) for v in values]

    return [s.taken_at for s in shown], {
        "messages": since([float(s.messages or 0) for s in shown]),
        "tool calls": since([float(s.tool_calls or 0) for s in shown]),
        "usd": since([float(s.usd_spent or 0) for s in shown]),
    }


def console_charts(page: CustomerPage) -> list[Chart]:
    """The customer's charts: usage since onboarding, its cost, and the last 48 hours."""
    times, values = _since_onboarding(page)
    lookups = gettext("assistant lookups (tool calls)")
    usage = time_chart(
        gettext("Usage since onboarding"),
        times,
        [
            Series(gettext("guest messages"), values.get("messages", [])),
            Series(lookups, values.get("tool calls", [])),
        ],
        unit=gettext("count since onboarding"),
        empty=gettext(USAGE_EMPTY),
        key="usage-since-onboarding",
    )
    cost = time_chart(
        gettext("Spend since onboarding"),
        times,
        [Series(gettext("spend (US dollars)"), values.get("usd", []))],
        unit=gettext("US dollars"),
        empty=gettext(USAGE_EMPTY),
        y_format=usd_label,
        key="spend-since-onboarding",
    )
    hours = page.hours
    hourly = hourly_chart(
        gettext("Assistant lookups vs booking-system requests, per hour (last 48 hours)"),
        [h.hour for h in hours],
        [
            Series(lookups, [h.tool_calls for h in hours]),
            Series(gettext("booking-system requests"), [h.upstream_calls for h in hours]),
        ],
        unit=gettext("calls per hour"),
        empty=gettext(HOURLY_EMPTY),
        key="assistant-lookups-vs-booking-system-requ",
    )
    return [usage, cost, hourly]


def _charts(page: CustomerPage) -> dict[str, Any]:
    charts = console_charts(page)
    usage, _, hourly = charts
    return {
        "charts": charts,
        "chart_figures": [chart_figure(chart) for chart in charts],
        # One chart's figure alone (the admin page's slots).
        "usage_chart": chart_figure(usage),
        "hourly_chart": chart_figure(hourly),
    }


# How many of the customer's own audit events its page lists (the rest: /console/audit).
RECENT_EVENTS = 30  # grouped by day on the page: the same thing ten times is one line
# How many recent sync jobs the customer's page reads (the newest commit among them).
RECENT_JOBS = 10


async def _sync_open(web: WebServices, student_id: str) -> bool:
    """Whether the allowlist admits the customer's knowledge sync (read now, no cache)."""
    return await web.customers.allowlist.customer_allowed(student_id)


async def _home(web: WebServices, principal: Principal, page: CustomerPage) -> CustomerHome:
    """The plain-language page of a customer (its answers, to-dos, sync and events)."""
    student_id = page.ctx.student_id
    owner = await web.audit.owner(student_id)
    events = await web.audit.page(AuditFilter(owner=owner), limit=RECENT_EVENTS)
    return customer_home(
        page,
        jobs=await web.sync_jobs.repo.jobs_of(student_id, limit=RECENT_JOBS),
        events=events.events,
        sync_open=await _sync_open(web, student_id),
        viewer=principal.email,
    )


async def _customer_context(
    request: Request, principal: Principal, student_id: str, **extra: Any
) -> dict[str, Any]:
    web = web_services(request)
    page = await customer_page(web, student_id)
    job = extra.pop("job", None) or page.row.last_sync
    booking = booking_state(page)
    return {
        "principal": principal,
        "page": page,
        "job": job,
        "booking": booking,
        "sync_words": explain_job(job, booking) if job is not None else None,
        "home": None if principal.is_admin else await _home(web, principal, page),
        "error_words": error_words,
        # A panel swapped by htmx brings the customer's summary along (out of band).
        "oob_status": _is_htmx(request) and not principal.is_admin,
        "reconnect_words": reconnect_words,
        "dry_run_counters": DRY_RUN_COUNTERS,
        "commit_counters": COMMIT_COUNTERS,
        "no_script_refresh_s": NO_SCRIPT_REFRESH_S,
        "poll_every": POLL_EVERY,
        "customer_path": customer_path(page.ctx.student_id),
        # The latest stored registry check (the check-registry job's or a console check).
        "registry": await latest_registry_check(web.customers, page.ctx.student_id),
        # A stored check cannot vouch for the apartments while the booking system refuses us.
        "registry_paused": booking == "error",
        **_charts(page),
        **extra,
    }


def page_template(principal: Principal) -> str:
    """The whole page of a customer for this reader: the detailed one, or the plain one."""
    return "admin_customer.html" if principal.is_admin else "customer_home.html"


async def _customer_view(
    request: Request, principal: Principal | None, student_id: str, template: str | None = None
) -> Response:
    if principal is None:
        return login_redirect(request)
    extra: dict[str, Any] = {}
    kept = read_kept(request, customer_path(student_id))
    if kept is not None:
        # Back after signing in again: the form's typed fields (never a password) and why.
        extra.update(session_expired=True, kept=kept["fields"])
        if "username" in kept["fields"]:
            extra["username"] = kept["fields"]["username"]
    try:
        ensure_can_act_on(principal, student_id)
        context = await _customer_context(request, principal, student_id, **extra)
        if template is None and request.query_params.get("reconnected"):
            context["reconnected"] = ReconnectShown(context["booking"])
    except PmsgateError as error:
        return error_page(request, principal, error)
    response = _render(request, template or page_template(principal), context)
    if kept is not None:
        forget_kept(response)
    return response


@dataclass(frozen=True)
class ReconnectShown:
    """A reconnect's success as the page after its redirect shows it (no JavaScript)."""

    status: str
    listings_sync: str | None = None


@router.get("/console/customers/{student_id}", response_class=HTMLResponse)
async def customer(request: Request, student_id: str, principal: MaybePrincipal) -> Response:
    """One customer's page: admins the detailed one, a customer's user the plain one."""
    if principal is not None and principal.is_admin:
        return await admin_customer_page(request, principal, student_id)
    return await _customer_view(request, principal, student_id)


@router.get("/console/customers/{student_id}/sync", response_class=HTMLResponse)
async def sync_panel(request: Request, student_id: str, principal: MaybePrincipal) -> Response:
    """The knowledge-sync panel alone for htmx (it polls it while a sync runs).

    Opened directly (a bookmark, a reload of the polled URL), it is the whole page at the
    panel: a fragment is never shown unstyled.
    """
    if principal is not None and not _is_htmx(request):
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
    try:
        # Whose page it is comes first: a refusal must not render the other customer's panel.
        ensure_can_act_on(principal, student_id)
        ctx = await web.customers.context(student_id)
        spend = await spend_form_token(request, START_SYNC_FORM)
    except PmsgateError as error:
        return error_page(request, principal, error)
    done_path = customer_path(student_id) + "#knowledge"
    if spend.repeated:
        if _is_htmx(request):
            return _render(
                request, "_sync_panel.html", await _customer_context(request, principal, student_id)
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
        if not _is_htmx(request) and principal.is_admin:
            return error_page(request, principal, error)
        context = await _customer_context(request, principal, student_id, sync_error=error)
        if not _is_htmx(request):
            return _render(request, page_template(principal), context, status_code=error.status)
        return _render(request, "_sync_panel.html", context)
    await web.form_tokens.finish(spend, result_path=done_path)
    if not _is_htmx(request):
        return RedirectResponse(done_path, status_code=303)
    return _render(
        request, "_sync_panel.html", await _customer_context(request, principal, student_id)
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
    try:
        ensure_can_act_on(principal, student_id)
        await web.customers.context(student_id)
    except PmsgateError as error:
        return error_page(request, principal, error)
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
        status = error.status if not _is_htmx(request) else 200
        template = "_pms_panel.html" if _is_htmx(request) else page_template(principal)
        context = await _customer_context(
            request, principal, student_id, reconnect_error=error, username=username
        )
        return _render(request, template, context, status_code=status)
    if not _is_htmx(request):
        # The success where the eye is: the page opens at the result, not at the form.
        return RedirectResponse(
            customer_path(student_id) + "?reconnected=1#reconnect-result", status_code=303
        )
    context = await _customer_context(request, principal, student_id, reconnected=result)
    return _render(request, "_pms_panel.html", context)


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
    try:
        context = await _customer_context(request, principal, student_id, keys_error=error)
    except PmsgateError as page_error:
        return error_page(request, principal, page_error)
    return _render(request, page_template(principal), context, status_code=error.status)


def _keys_done(student_id: str) -> RedirectResponse:
    return RedirectResponse(customer_path(student_id) + "#keys", status_code=303)


# The one-time token purposes of the console's creating forms (pmsgate.web.form_tokens).
MINT_KEY_FORM = "mint_key"
START_SYNC_FORM = "start_sync"
# The query parameter naming a mint's one-time hand-off on the page after its redirect.
MINTED_PARAM = "minted"


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
    try:
        hotel_id = await _hotel_of(web, student_id)
        spend = await spend_form_token(request, MINT_KEY_FORM)
    except PmsgateError as error:
        return error_page(request, principal, error)
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


async def minted_key_context(request: Request, page: CustomerPage) -> dict[str, Any]:
    """The page after a mint: the new key's row and its raw value, this once; else why not."""
    ref = request.query_params.get(MINTED_PARAM)
    if not ref:
        return {}
    handoff = await take_handoff(request, ref)
    if handoff is None:
        # Reloaded, opened from history or by another session: the key is not shown again.
        return {"minted_gone": True}
    key_id, _, raw = handoff.partition(":")
    row = next((row for row in page.keys if str(row.key.id) == key_id), None)
    return {"minted_key": row.key if row is not None else None, "minted_raw": raw}


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
    try:
        hotel_id = await _hotel_of(web, student_id)
    except PmsgateError as error:
        return error_page(request, principal, error)
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
    try:
        hotel_id = await _hotel_of(web, student_id)
    except PmsgateError as error:
        return error_page(request, principal, error)
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
