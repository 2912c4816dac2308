"""What a ``/metrics`` scrape does: refresh the facility snapshot when it is old, render.

The facility gauges come from :class:`pmsgate.gateway.metrics.FacilitySnapshot`: one query
of the facilities and one budget read per facility, at most every
``FacilitySnapshot.max_age_s`` seconds however often Prometheus (or several of them)
scrapes. Between refreshes a scrape only renders what is held (docs/operations.md).
"""

from __future__ import annotations

from fastapi import Response

from pmsgate.gateway.context import GatewayServices
from pmsgate.gateway.metrics import FacilityState

CONTENT_TYPE = "text/plain; version=0.0.4"


async def facility_states(services: GatewayServices) -> list[FacilityState]:
    """Every facility's status, remaining budget and limits, now."""
    states = []
    for facility in await services.facilities.list():
        key = services.gateway.limit_key(facility)
        remaining = await services.limiter.remaining(key, facility.limits)
        limits = {
            "minute": facility.limits.per_minute,
            "hour": facility.limits.per_hour,
            "day": facility.limits.per_day,
        }
        states.append(FacilityState(facility.hotel_id, facility.status, remaining, limits))
    return states


async def scrape(services: GatewayServices) -> Response:
    """The Prometheus text exposition, the facility snapshot refreshed first if it is old."""
    metrics = services.metrics
    await metrics.facilities.refresh(services.clock.now(), lambda: facility_states(services))
    return Response(metrics.render(), media_type=CONTENT_TYPE)
