"""A facility's status as the booking system's answers settle it, and its integration row.

``connected``, ``unverified`` or ``error`` (:data:`~pmsgate.gateway.facilities.FacilityStatus`).
The gateway marks a facility ``error`` when the booking system refuses its credentials and
``connected`` when it issues a token again; every real change is recorded in the audit trail
(``facility.status_changed``: from, to, cause) in the transaction that makes it, together
with the facility's kross integration row and, for a move to or out of ``error``, the
signed webhook event (``facility.connection_lost`` / ``facility.connection_restored``,
docs/webhooks.md).
"""

from __future__ import annotations

from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from pmsgate.audit.actions import Actor, AuditAction, Outcome
from pmsgate.audit.trail import AuditTrail
from pmsgate.gateway.facilities import (
    MAX_REASON,
    FacilityPart,
    facility_not_found,
    require_facility,
    subject_of,
)
from pmsgate.storage.facilities import FacilityRepository
from pmsgate.storage.models import Facility
from pmsgate.storage.webhooks import WebhookRepository

log = structlog.get_logger(__name__)

# Status changes the gateway itself makes after an upstream answer.
GATEWAY_ACTOR = Actor.system("gateway")

# Causes of status changes, as the audit trail records them (facility.status_changed).
CAUSE_REFUSED = "token refused by the booking system"
CAUSE_VERIFIED_ON_FIRST_USE = "verified on first use"
CAUSE_ACCEPTED_AGAIN = "token issued again"
CAUSE_RECONNECTED = "reconnected"


def integration_status(status: str) -> str:
    """The kross integration row's status for a facility status (the row knows no unverified).

    An unverified facility is used like a connected one, so its row says connected.
    """
    return "error" if status == "error" else "connected"


async def record_status_change(
    audit: AuditTrail,
    session: AsyncSession,
    actor: Actor,
    facility: Facility,
    change: tuple[str, str],
    cause: str,
    reason: str | None = None,
) -> None:
    """Record ``facility.status_changed`` (``change``: from, to) in ``session``'s transaction."""
    before, after = change
    details: dict[str, Any] = {"from": before, "to": after, "cause": cause}
    if reason:
        details["reason"] = reason
    recorded = await audit.record_in(
        session,
        AuditAction.FACILITY_STATUS_CHANGED,
        actor=actor,
        subject=subject_of(facility.hotel_id),
        outcome=Outcome.FAILURE if after == "error" else Outcome.SUCCESS,
        details=details,
        facility_id=facility.id,
    )
    # The signed webhook of a lost or restored connection, committed with the change.
    event = _connection_event(before, after)
    if event is not None:
        data: dict[str, Any] = {
            "hotel_id": facility.hotel_id,
            "status": after,
            "previous_status": before,
        }
        if after == "error" and reason:
            data["reason"] = reason
        await WebhookRepository(session).add_event(
            event, data, occurred_at=recorded.occurred_at, facility_id=facility.id
        )


def _connection_event(before: str, after: str) -> str | None:
    """``facility.connection_lost`` on a move to error, ``…_restored`` on one out of it."""
    if after == "error" and before != "error":
        return "facility.connection_lost"
    if before == "error" and after != "error":
        return "facility.connection_restored"
    return None


class FacilityStatuses(FacilityPart):
    """Marks facilities ``error`` or ``connected`` and remembers their authentication attempts."""

    async def mark_error(
        self,
        hotel_id: str,
        reason: str,
        *,
        cause: str = CAUSE_REFUSED,
        actor: Actor = GATEWAY_ACTOR,
    ) -> None:
        """Record that the facility's credentials stopped working (a safe reason, no secrets)."""
        await self._set_status(
            hotel_id, "error", reason.strip()[:MAX_REASON] or "error", cause=cause, actor=actor
        )
        log.warning("facility_marked_error", hotel_id=hotel_id, reason=reason[:MAX_REASON])

    async def mark_connected(
        self, hotel_id: str, *, cause: str = CAUSE_ACCEPTED_AGAIN, actor: Actor = GATEWAY_ACTOR
    ) -> None:
        """Record that the facility's credentials work (an unverified facility: now proven)."""
        await self._set_status(hotel_id, "connected", None, cause=cause, actor=actor)

    async def record_auth_attempt(self, hotel_id: str) -> None:
        """Remember when the gateway last tried to authenticate the facility upstream."""
        async with self._sessions.begin() as session:
            if not await FacilityRepository(session).update(
                hotel_id, last_auth_attempt_at=self._clock.now()
            ):
                raise facility_not_found(hotel_id)

    async def _set_status(
        self, hotel_id: str, status: str, last_error: str | None, *, cause: str, actor: Actor
    ) -> None:
        """The facility's status and its kross integration row's, in one transaction.

        A real change is recorded (``facility.status_changed``, from → to, with its cause) in
        the same transaction.
        """
        now = self._clock.now()
        async with self._sessions.begin() as session:
            row = await require_facility(session, hotel_id)
            before = row.status
            row.status = status
            row.last_error = last_error
            row.updated_at = now
            if before != status:
                row.status_changed_at = now  # names the incident when it is a move to error
            await session.flush()
            await FacilityRepository(session).set_integration_status(
                row.id, integration_status(status), last_error, now
            )
            if before != status:
                await record_status_change(
                    self._audit, session, actor, row, (before, status), cause, last_error
                )
        await self._changed()
