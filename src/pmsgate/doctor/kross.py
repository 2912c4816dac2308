"""The booking system: is it reachable, and how does a real facility answer?

The live probe spends at most :data:`PROBE_REQUESTS` requests of the facility's budget
(10 a minute), each through the facility's limiter and token manager, and reads only.
It finds out what public integrations disagree on (reference/upstreams.md §1): where
the token comes, whether the list envelope carries ``total_count``, whether ``offset``
and the date filters are honoured, the ``guest_portal`` shape, and which path form
the per-apartment reads live under.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import httpx

from pmsgate.config import Settings
from pmsgate.doctor.findings import Report, Status
from pmsgate.errors import PmsgateError
from pmsgate.gateway.context import GatewayServices
from pmsgate.integrations.kit.http import NOT_SENT
from pmsgate.integrations.kross.client import BROWSER_UA_PREFIX
from pmsgate.integrations.kross.errors import PmsError

if TYPE_CHECKING:
    from pmsgate.gateway.facilities import FacilityView

AREA = "booking system"
# One token, two list pages, one filtered list, one per-apartment read.
PROBE_REQUESTS = 5
PROBE_PAGE = 5
LIST = "reservations/get-list"
_PLACES = {"data": "data.auth_token", "top": "a top-level auth_token", "nested": "data.data"}
INSTRUCTIONS = "get-check-in-instructions"


async def check_reachable(settings: Settings, http: httpx.AsyncClient, report: Report) -> None:
    """One unauthenticated request to the host: DNS, TLS and the edge's User-Agent rule."""
    url = settings.kross_base_url.rstrip("/") + "/v5/"
    try:
        response = await http.get(url, headers={"User-Agent": settings.user_agent}, timeout=10)
    except (httpx.TransportError, TimeoutError) as error:
        reason = "not reached" if isinstance(error, NOT_SENT) else "no answer"
        report.add(
            AREA,
            "reachable",
            Status.FAIL,
            f"{settings.kross_base_url} {reason} ({type(error).__name__}).",
            "Check PMSGATE_KROSS_BASE_URL, DNS and the outbound firewall (the gateway's "
            "address must be whitelisted by the booking system).",
        )
        return
    if response.status_code == 403 and "1010" in response.text:
        report.add(
            AREA,
            "reachable",
            Status.FAIL,
            "The edge protection blocked the request (error 1010).",
            f"PMSGATE_USER_AGENT must start with {BROWSER_UA_PREFIX!r}.",
        )
        return
    report.add(
        AREA,
        "reachable",
        Status.OK,
        f"{settings.kross_base_url} answers (HTTP {response.status_code} on GET /v5/).",
    )


async def probe_facility(services: GatewayServices, hotel_id: str, report: Report) -> None:
    """The read-only first-contact probe of one registered facility."""
    try:
        facility = await services.facilities.get(hotel_id)
    except PmsgateError as error:
        report.add(AREA, "facility", Status.FAIL, error.message, error.hint)
        return
    if facility.status == "error":
        report.add(
            AREA,
            "facility",
            Status.FAIL,
            f"Facility {hotel_id} is in error state ({facility.last_error or 'no reason'}); "
            "the probe does not log in again.",
            "Reconnect it first: `pmsgate facilities reconnect HOTEL_ID`.",
        )
        return
    report.add(AREA, "facility", Status.OK, f"Facility {hotel_id} is {facility.status}.")
    if not await _token(services, facility, report):
        return
    page = await _read(services, facility, report, "list envelope", _list_body(services, 0))
    if page is None:
        return
    rows = _rows(page.data)
    _report_envelope(report, page)
    _report_portal_shape(report, rows)
    await _probe_offset(services, facility, report, rows)
    await _probe_filters(services, facility, report)
    await _probe_paths(services, facility, report, rows)


async def _token(services: GatewayServices, facility: FacilityView, report: Report) -> bool:
    try:
        await services.tokens.token(facility.hotel_id)
    except (PmsError, PmsgateError) as error:
        report.add(AREA, "login", Status.FAIL, _describe(error), _hint(error))
        return False
    where = services.pms.token_place(facility.hotel_id)
    found = (
        f"A token was obtained; the login answer carried it in {_PLACES.get(where, where)}."
        if where
        else "A stored token is valid (the place is named on a fresh login)."
    )
    report.add(
        AREA,
        "login",
        Status.OK,
        found,
        None if where in (None, "data") else "Nothing to set: the client reads every place.",
        token_location=where,
    )
    return True


def _list_body(services: GatewayServices, offset: int, **extra: Any) -> dict[str, Any]:
    op = services.pms.operations.resolve(LIST)
    body: dict[str, Any] = {"with_rooms": True, "limit": PROBE_PAGE, "offset": offset, **extra}
    return {op.wire_name(k): v for k, v in body.items()}


async def _read(
    services: GatewayServices,
    facility: FacilityView,
    report: Report,
    check: str,
    body: Mapping[str, Any],
    operation: str = LIST,
) -> Any:
    try:
        return await services.gateway.read(facility, operation, body)
    except (PmsError, PmsgateError) as error:
        report.add(AREA, check, Status.FAIL, _describe(error), _hint(error))
        return None


def _report_envelope(report: Report, page: Any) -> None:
    fields = {
        "count": page.count,
        "total_count": page.total_count,
        "limit": page.limit,
        "offset": page.offset,
    }
    missing = sorted(k for k, v in fields.items() if v is None)
    if page.total_count is None:
        report.add(
            AREA,
            "list envelope",
            Status.WARN,
            f"List answers carry no total_count (missing: {', '.join(missing)}).",
            "Nothing to set: pages are read until a short page, within the budget share "
            "(meta.truncated says when a refresh had to stop).",
            missing=missing,
        )
    else:
        found = "data with " + ", ".join(f"{k}={v}" for k, v in fields.items() if v is not None)
        report.add(AREA, "list envelope", Status.OK, found + ".", missing=missing)
    if page.limit is not None and page.limit < PROBE_PAGE:
        report.add(
            AREA,
            "page size",
            Status.WARN,
            f"Asked for {PROBE_PAGE} rows a page, the server caps pages at {page.limit}.",
            f"Set page_size of {LIST} in operations.yaml to at most {page.limit}.",
        )


def _rows(data: Any) -> list[Mapping[str, Any]]:
    if not isinstance(data, list):
        return []
    return [row for row in data if isinstance(row, Mapping)]


def portal_shape(row: Mapping[str, Any]) -> str:
    """``block``, ``link`` or ``absent``: how one reservation row carries its portal."""
    portal = row.get("guest_portal")
    if isinstance(portal, Mapping):
        return "block"
    if (isinstance(portal, str) and portal) or isinstance(row.get("guest_portal_link"), str):
        return "link"
    return "absent"


def _report_portal_shape(report: Report, rows: Sequence[Mapping[str, Any]]) -> None:
    if not rows:
        report.add(AREA, "guest_portal", Status.SKIP, "No reservation to look at.")
        return
    shapes = Counter(portal_shape(row) for row in rows)
    seen = ", ".join(f"{shape}: {n}" for shape, n in sorted(shapes.items()))
    if set(shapes) == {"block"}:
        report.add(AREA, "guest_portal", Status.OK, f"The portal block is there ({seen}).")
        return
    report.add(
        AREA,
        "guest_portal",
        Status.WARN,
        f"Rows carry the portal as: {seen}.",
        "Nothing to set: the portal tools answer 'unknown' for what a link or a missing "
        "block cannot tell; a field under another name goes into response_fields of "
        f"{LIST} in operations.yaml.",
        shapes=dict(shapes),
    )


def _ids(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    return [json.dumps(row.get("id_reservation")) for row in rows]


async def _probe_offset(
    services: GatewayServices,
    facility: FacilityView,
    report: Report,
    first: Sequence[Mapping[str, Any]],
) -> None:
    if len(first) < PROBE_PAGE:
        report.add(
            AREA, "offset", Status.SKIP, f"Fewer than {PROBE_PAGE} reservations: cannot tell."
        )
        return
    page = await _read(services, facility, report, "offset", _list_body(services, PROBE_PAGE))
    if page is None:
        return
    second = _rows(page.data)
    if second and _ids(second) == _ids(first):
        report.add(
            AREA,
            "offset",
            Status.WARN,
            "The server ignores offset: the second page repeats the first.",
            f"Raise page_size of {LIST} in operations.yaml so one page holds the window "
            "(refreshes stop at a repeated page and say meta.truncated).",
        )
    else:
        report.add(AREA, "offset", Status.OK, "offset is honoured (the second page is new).")


async def _probe_filters(services: GatewayServices, facility: FacilityView, report: Report) -> None:
    # Nothing can have been booked in the future: any row means the filter was ignored.
    start = services.clock.now() + timedelta(days=2)
    body = _list_body(
        services,
        0,
        date_reservation_from=start.strftime("%Y-%m-%d %H:%M"),
        date_reservation_to=(start + timedelta(days=1)).strftime("%Y-%m-%d %H:%M"),
    )
    page = await _read(services, facility, report, "date filters", body)
    if page is None:
        return
    if _rows(page.data):
        report.add(
            AREA,
            "date filters",
            Status.WARN,
            "The server ignores date_reservation_from/_to (rows booked outside came back).",
            "Nothing to set: the gateway checks every date itself (spec §7); refreshes may "
            "read more pages, within the budget share.",
        )
    else:
        report.add(AREA, "date filters", Status.OK, "date_reservation_from/_to are honoured.")


async def _probe_paths(
    services: GatewayServices,
    facility: FacilityView,
    report: Report,
    rows: Sequence[Mapping[str, Any]],
) -> None:
    if not rows or rows[0].get("id_reservation") is None:
        report.add(AREA, "path form", Status.SKIP, "No reservation to ask instructions for.")
        return
    body = {"id_reservation": rows[0]["id_reservation"]}
    answer = await _read(services, facility, report, "path form", body, INSTRUCTIONS)
    if answer is None:
        return
    default = services.pms.operations.resolve(INSTRUCTIONS).path
    resolved = _resolved_paths(services).get(INSTRUCTIONS, default)
    if resolved == default:
        report.add(AREA, "path form", Status.OK, f"{INSTRUCTIONS} answers at /v5/{default}.")
        return
    report.add(
        AREA,
        "path form",
        Status.WARN,
        f"{INSTRUCTIONS} answers at /v5/{resolved}, not /v5/{default} (found by the fallback).",
        "Set PMSGATE_KROSS_PATHS so no request is spent on the fallback after a restart, e.g. "
        + json.dumps({INSTRUCTIONS: resolved}),
        path=resolved,
    )


def _resolved_paths(services: GatewayServices) -> dict[str, str]:
    resolved = getattr(services.pms, "resolved_paths", None)
    return dict(resolved()) if callable(resolved) else {}


def _describe(error: PmsError | PmsgateError) -> str:
    return f"{error.code}: {error.message}"


def _hint(error: PmsError | PmsgateError) -> str | None:
    return error.hint
