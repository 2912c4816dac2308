"""The admin console's forms and the sign-in locks page.

- ``POST /console/customers/{student_id}/invite``: a new invitation for the customer's
  console account;
- ``POST /console/customers/{student_id}/onboarding/{step_id}/confirm|reopen``: a person's
  evidence for a manual onboarding step, or taking it back;
- ``/console/sign-in-locks``: recent sign-in pauses, and lifting one.

The admin's pages themselves (``/console`` and a customer's page) are
:mod:`pmsgate.web.admin_pages`; the incidents are :mod:`pmsgate.web.incident_console`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from pmsgate.customers.checks import customer_not_found
from pmsgate.errors import PmsgateError
from pmsgate.onboarding.runner import confirm_step, reopen_step
from pmsgate.web.admin_pages import admin_only, onboarding_services
from pmsgate.web.auth import AdminWrite, actor_of, safe_next
from pmsgate.web.context import web_services
from pmsgate.web.form_tokens import with_query
from pmsgate.web.forms import act_once
from pmsgate.web.pages import PagePrincipal, customer_path, render_page
from pmsgate.web.sign_in_locks import recent_locks, unlock_sign_ins
from pmsgate.web.users import Principal

router = APIRouter(include_in_schema=False)

# The one-time token purpose of the invitation form (pmsgate.web.form_tokens).
INVITE_FORM = "invite"


@router.post("/console/customers/{student_id}/invite", response_class=RedirectResponse)
async def send_invitation(request: Request, student_id: str, principal: AdminWrite) -> Response:
    """Send the customer's console account a new invitation (created first when absent).

    303 back to the customer's page, which says it was sent (or why not); audited
    ``account.invited`` with the admin as actor. One e-mail per form: a reload or a double
    click sends no second invitation.
    """
    web = web_services(request)
    back = customer_path(student_id)

    async def invite() -> str:
        customer = await web.customers.customers.find(student_id)
        if customer is None:
            raise customer_not_found(student_id)
        account, _ = await web.users.ensure_customer_account(student_id, customer.email)
        await web.invitations.send(account, "invite", actor=actor_of(principal))
        return f"{back}?invited=1#account"

    return await act_once(
        request,
        INVITE_FORM,
        invite,
        repeated_to=f"{back}#account",
        refused_to=lambda error: f"{back}?{urlencode({'invite_error': error.code})}#account",
    )


# --- manual onboarding steps: confirmed or reopened from the customer page ----------------------

# The one-time token purposes of the step forms (a reload records nothing twice).
CONFIRM_STEP_FORM = "confirm_step"
REOPEN_STEP_FORM = "reopen_step"


def _step_path(student_id: str, **params: str) -> str:
    query = f"?{urlencode(params)}" if params else ""
    return f"{customer_path(student_id)}{query}#onboarding"


@dataclass(frozen=True)
class PersonStepForm:
    """A form on a manual step of the checklist: who sends it, for which customer and step."""

    request: Request
    principal: Principal
    student_id: str
    step_id: str

    async def act(self, purpose: str, text: str, item: str) -> Response:
        """Confirm or reopen the step once per form, audited; 303 to the checklist (PRG)."""
        record = confirm_step if purpose == CONFIRM_STEP_FORM else reopen_step
        student_id, step_id, principal = self.student_id, self.step_id, self.principal

        async def work() -> str:
            await record(
                onboarding_services(self.request),
                student_id,
                step_id,
                text,
                item=item or None,
                person=principal.email,
                actor=actor_of(principal),
            )
            return _step_path(student_id, step_done=purpose, step=step_id)

        return await act_once(
            self.request,
            purpose,
            work,
            repeated_to=_step_path(student_id),
            refused_to=lambda error: _step_path(student_id, step_error=error.code, step=step_id),
        )


async def person_step_form(
    request: Request, student_id: str, step_id: str, principal: AdminWrite
) -> PersonStepForm:
    """The admin's form on the step of the path (CSRF-checked)."""
    return PersonStepForm(request, principal, student_id, step_id)


StepForm = Annotated[PersonStepForm, Depends(person_step_form)]
StepText = Annotated[str, Form(max_length=2000)]
StepItem = Annotated[str, Form(max_length=64)]


@router.post(
    "/console/customers/{student_id}/onboarding/{step_id}/confirm",
    response_class=RedirectResponse,
)
async def confirm_manual_step(
    form: StepForm, evidence: StepText = "", item: StepItem = ""
) -> Response:
    """Record the admin's evidence for a step (or one item) a person does; audited."""
    return await form.act(CONFIRM_STEP_FORM, evidence, item)


@router.post(
    "/console/customers/{student_id}/onboarding/{step_id}/reopen",
    response_class=RedirectResponse,
)
async def reopen_manual_step(form: StepForm, note: StepText = "", item: StepItem = "") -> Response:
    """Take back a person's confirmation of a step (or one item); audited."""
    return await form.act(REOPEN_STEP_FORM, note, item)


# --- sign-in locks: lift a pause of an account or an address ----------------------------------

SIGN_IN_LOCKS_PATH = "/console/sign-in-locks"


@router.get(SIGN_IN_LOCKS_PATH, response_class=HTMLResponse)
async def sign_in_locks_page(request: Request, principal: PagePrincipal) -> Response:
    """Recent sign-in pauses, and the form to unlock an account or an address by typing it."""
    admin_only(principal, "Only an admin sees every customer.")
    web = web_services(request)
    settings = web.settings
    return render_page(
        request,
        "admin_sign_in_locks.html",
        {
            "principal": principal,
            "locks": await recent_locks(web),
            "unlocked": request.query_params.get("unlocked"),
            "unlock_error": request.query_params.get("unlock_error"),
            "window_min": round(settings.login_failure_window_s / 60),
            "ceilings": {
                "pair": settings.login_max_failures,
                "address": settings.login_address_max_failures,
                "account": settings.login_account_max_failures,
            },
        },
    )


@router.post(f"{SIGN_IN_LOCKS_PATH}/unlock", response_class=RedirectResponse)
async def unlock_sign_in(
    request: Request,
    principal: AdminWrite,
    email: Annotated[str, Form(max_length=320)] = "",
    address: Annotated[str, Form(max_length=64)] = "",
    next_url: Annotated[str | None, Form(alias="next", max_length=2048)] = None,
) -> Response:
    """Lift the pause of an account and/or an address (audited); 303 back with what happened."""
    back = safe_next(next_url) or SIGN_IN_LOCKS_PATH
    try:
        done = await unlock_sign_ins(
            web_services(request), email=email, address=address, actor=actor_of(principal)
        )
    except PmsgateError as error:
        return RedirectResponse(with_query(back, unlock_error=error.code), status_code=303)
    what = "both" if done.email and done.address else ("account" if done.email else "address")
    return RedirectResponse(with_query(back, unlocked=what), status_code=303)
