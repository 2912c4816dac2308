"""Arguments that call the documented tools on one reservation of the emulator."""

from __future__ import annotations

import datetime as dt
from typing import Any


def documented_tool_calls(
    reservation_id: int, arrival: dt.date, *, listing: str
) -> dict[str, dict[str, Any]]:
    """Five of the six documented tools with their arguments: availability for two nights
    from ``arrival``, the four that read ``reservation_id``, and ``listing`` (one of the two
    that list reservations) without arguments."""
    return {
        "check-availability": {
            "arrival": arrival.isoformat(),
            "departure": (arrival + dt.timedelta(days=2)).isoformat(),
        },
        "get-reservation-status": {"reservation_id": reservation_id},
        listing: {},
        "check-portal-status": {"reservation_id": reservation_id},
        "get-checkin-instructions": {"reservation_id": reservation_id},
    }
