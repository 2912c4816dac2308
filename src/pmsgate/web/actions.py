"""What the console and the web API do the same way on a customer's behalf.

:func:`console_action` leaves the audit event of every console action (success, or
failure with its code); :func:`ready_for_sync` refuses at once a knowledge sync the job
would fail on first.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from pmsgate.audit.actions import AuditAction, Outcome
from pmsgate.customers.context import CustomerContext, NotionNotConnected
from pmsgate.customers.service import workspace_not_created
from pmsgate.errors import PmsgateError
from pmsgate.web.auth import actor_of
from pmsgate.web.context import WebServices
from pmsgate.web.users import Principal


@asynccontextmanager
async def console_action(
    web: WebServices,
    principal: Principal,
    operation: str,
    *,
    student_id: str,
    details: Mapping[str, Any] | None = None,
) -> AsyncIterator[None]:
    """Record ``console.action`` for what the block does: success, or failure with its code.

    The event is written after the block, in its own transaction: a failed action still
    leaves its event.
    """
    base = {"operation": operation, **(details or {})}

    async def record(outcome: Outcome, details: dict[str, Any]) -> None:
        await web.audit.record(
            AuditAction.CONSOLE_ACTION,
            actor=actor_of(principal),
            subject=f"customer:{student_id}",
            outcome=outcome,
            details=details,
            student_id=student_id,
        )

    try:
        yield
    except PmsgateError as error:
        await record(Outcome.FAILURE, {**base, "error": error.code})
        raise
    await record(Outcome.SUCCESS, base)


def ready_for_sync(ctx: CustomerContext) -> None:
    """Refuse at once what the job would fail on first (same codes as the job's)."""
    if ctx.workspace_id is None:
        raise workspace_not_created(ctx.student_id)
    if ctx.notes is None or not ctx.notes.has_token:
        raise NotionNotConnected(
            f"Customer {ctx.student_id} has no notes integration with a token."
        )
