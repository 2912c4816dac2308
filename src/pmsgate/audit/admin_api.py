"""Every admin API action in the audit trail (``admin.action``), recorded once for all routes.

:func:`admin_action_recorder` is a router-level dependency: the app attaches it where it
includes the admin router, so each route — today's and any added later — is recorded
without a line of its own. It wraps the request: it records after the route answered
(or failed), with the method, the route's template (``/admin/facilities/{hotel_id}/keys``,
never the filled-in path), the status and error code, the outcome, and — from
:mod:`pmsgate.request_context` — the request id and client address.

What is recorded: every call that may change something (any method but GET, HEAD and
OPTIONS), including those refused before the route ran: a wrong or missing admin token
(401 ``invalid_admin_token``), the API switched off, plain HTTP from another machine.
Those are ``refused`` with the system as actor (the caller proved nothing); a call
with the token is the admin's (:data:`ADMIN_TOKEN_ACTOR`: there is one admin token, so
that is all the trail can say about who). No admin GET reveals a key (a raw key is only
in the answers of the POSTs that mint one), so reads are not recorded.

Being a dependency with ``yield``, it sees the route's exception before the error
handler turns it into the JSON body: a ``PmsgateError`` gives its status and code,
FastAPI's validation error is a 422 ``invalid_input``. A route that returns records the
route's declared status (what the admin routes answer on success).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import anyio
from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError

from pmsgate.audit.actions import Actor, AuditAction, Outcome
from pmsgate.audit.trail import AuditTrail
from pmsgate.errors import PmsgateError

# Methods that read only: not recorded (no admin read reveals a secret).
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# The admin API has one credential, PMSGATE_ADMIN_TOKEN: its holder is the actor.
ADMIN_TOKEN_ACTOR = Actor.admin("admin-api")
# A caller the admin API refused before it proved anything.
UNAUTHENTICATED = Actor.system("unauthenticated caller")
# Refusals made before the token was accepted (the caller is not known to be the admin).
REFUSED_BEFORE_TOKEN = frozenset(
    {"invalid_admin_token", "admin_api_disabled", "admin_https_required"}
)


def admin_action_recorder(
    audit: Callable[[], AuditTrail],
) -> Callable[[Request], AsyncIterator[None]]:
    """The dependency recording each admin API action (``audit()``: the process's trail)."""

    async def record_admin_action(request: Request) -> AsyncIterator[None]:
        if request.method.upper() in READ_METHODS:
            yield
            return
        route = request.scope.get("route")
        template = getattr(route, "path", None) or request.url.path
        status: int | None = getattr(route, "status_code", None) or 200
        error_code: str | None = None
        try:
            yield
        except PmsgateError as error:
            status, error_code = error.status, error.code
            raise
        except RequestValidationError:
            status, error_code = 422, "invalid_input"
            raise
        except HTTPException as error:
            status, error_code = error.status_code, "http_error"
            raise
        except BaseException as error:
            status, error_code = None, type(error).__name__
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await _record(audit(), request, template, status, error_code)

    return record_admin_action


async def _record(
    trail: AuditTrail, request: Request, template: str, status: int | None, error_code: str | None
) -> None:
    if error_code in REFUSED_BEFORE_TOKEN:
        actor, outcome = UNAUTHENTICATED, Outcome.REFUSED
    elif status is None:
        actor, outcome = ADMIN_TOKEN_ACTOR, Outcome.UNKNOWN
    elif status >= 400:
        refused = status in (401, 403)
        actor, outcome = ADMIN_TOKEN_ACTOR, Outcome.REFUSED if refused else Outcome.FAILURE
    else:
        actor, outcome = ADMIN_TOKEN_ACTOR, Outcome.SUCCESS
    hotel_id = request.path_params.get("hotel_id")
    key_id = request.path_params.get("key_id")
    details: dict[str, object] = {
        "method": request.method.upper(),
        "route": template,
        "status": status,
    }
    if key_id is not None:
        details["key_id"] = str(key_id)
    if error_code is not None:
        details["error_code"] = error_code
    await trail.record(
        AuditAction.ADMIN_ACTION,
        actor=actor,
        subject=f"facility:{hotel_id}" if hotel_id else "admin",
        outcome=outcome,
        details=details,
        hotel_id=str(hotel_id) if hotel_id else None,
    )
