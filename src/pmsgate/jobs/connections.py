"""The connection check: one cheap read per connected facility, so a changed password shows.

Without it, a customer who changes the booking-system password is only noticed when a
guest's question makes the assistant call a tool — the `error` state
(docs/requirements.md R11.2) would wait for a guest. Every 15 minutes (by default) each
facility in ``connected`` state gets one read through the gateway's normal path (state
guard, token, permit from the facility's budget at **background** priority, so it never
takes a permit an interactive call needs). The read is the smallest the booking system
has: one reservation row without rooms (``limit: 1``). When the password changed, the
booking system rejects the token, the gateway asks for a new one, that fails, and the
gateway itself marks the facility (and its customer's kross integration row) ``error`` —
the check adds no state logic of its own.

Facilities already in ``error`` are skipped: the gateway retries their
authentication once per re-auth interval, and a reconnect brings them back.
A facility whose background budget is spent, or whose guest's call waits for a permit
(background work yields to it, docs/requirements.md R7.8), is *deferred*: it is busy,
so its own calls exercise the credentials anyway.
"""

from __future__ import annotations

from typing import Any, Literal

import structlog

from pmsgate.errors import PmsgateError
from pmsgate.gateway.context import GatewayServices
from pmsgate.gateway.limiter import BudgetExhausted, Priority
from pmsgate.gateway.upstream_errors import translate
from pmsgate.integrations.kross import errors as kross
from pmsgate.jobs.spec import error_detail, tick_summary

log = structlog.get_logger(__name__)

CHECK_CONNECTIONS = "check-connections"
CHECK_OPERATION = "reservations/get-list"
# Public filter names only (docs/kross-api.md): one row, without its rooms.
CHECK_PAYLOAD: dict[str, Any] = {"limit": 1, "with_rooms": False}
AUTH_FAILED = "pms_auth_failed"

CheckOutcome = Literal["ok", "now_in_error", "skipped", "deferred", "failed"]


async def check_facility(
    services: GatewayServices, hotel_id: str
) -> tuple[CheckOutcome, dict[str, str]]:
    """Check one facility's booking-system access with one background read."""
    # Read again: another replica's check (or a caller) may have just marked it.
    facility = await services.facilities.get(hotel_id)
    # An unverified facility is checked like a connected one: the check settles it.
    if facility.status == "error":
        return "skipped", {"status": facility.status}
    try:
        await services.gateway.read(
            facility, CHECK_OPERATION, CHECK_PAYLOAD, priority=Priority.BACKGROUND
        )
    except BudgetExhausted as error:
        return "deferred", error_detail(error)
    except kross.KrossError as error:
        return "failed", error_detail(translate(error))
    except PmsgateError as error:
        if error.code == AUTH_FAILED:
            return "now_in_error", error_detail(error)
        return "failed", error_detail(error)
    return "ok", {}


async def check_connections(services: GatewayServices) -> dict[str, Any]:
    """Check every connected facility; the tick fails when a check could not be done."""
    found: dict[str, list[Any]] = {
        "ok": [],
        "now_in_error": [],
        "skipped": [],
        "deferred": [],
        "failed": [],
    }
    for facility in await services.facilities.list():
        if facility.status == "error":
            found["skipped"].append(facility.hotel_id)
            continue
        try:
            outcome, detail = await check_facility(services, facility.hotel_id)
        except Exception as error:  # one facility's failure never stops the others
            outcome, detail = "failed", error_detail(error)
        if outcome == "now_in_error":
            log.warning("kross_check_auth_failed", hotel_id=facility.hotel_id)
        if outcome in ("ok", "skipped"):
            found[outcome].append(facility.hotel_id)
        else:
            found[outcome].append({"hotel_id": facility.hotel_id, **detail})
    return tick_summary(dict(found), found["failed"], "facilities could not be checked")
