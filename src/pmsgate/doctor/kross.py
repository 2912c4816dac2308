"""The booking system: is it reachable, and how does a real facility answer?

The live probe spends at most :data:`PROBE_REQUESTS` requests of the facility's budget
(10 a minute), each through the facility's limiter and token manager, and reads only.
It finds out what public integrations disagree on (docs/kross-api.md): where
the token comes, whether the list envelope carries ``total_count``, the server's page
cap, whether ``offset`` and the date filters are honoured, the ``guest_portal`` shape,
and which path form the per-apartment reads live under.

The page cap: the first list read asks for one row more than the gateway's own page
(``page_size`` of ``reservations/get-list``, 100), so any cap that can matter to the
gateway, a cap of exactly that page included, shows as a smaller ``limit`` (or, when
the answer does not echo ``limit``, as fewer rows than ``total_count`` says exist).
The offset: the second read starts at ``offset`` 1, so it tells an honoured offset
(the rows move by one) from an ignored one (the first row again) whatever the cap,
even on a facility with a single reservation.
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
from pmsgate.gateway.limiter import Priority
from pmsgate.gateway.window import DEFAULT_PAGE_SIZE
from pmsgate.integrations.kit.http import NOT_SENT
from pmsgate.integrations.kross.client import BROWSER_UA_PREFIX
from pmsgate.integrations.kross.errors import InvalidRequest, KrossError

if TYPE_CHECKING:
    from pmsgate.gateway.facilities import FacilityView

AREA = "booking system"
# One token, two list pages, one filtered list, one per-apartment read; one list page more
# when the server refuses the larger first page.
PROBE_REQUESTS = 6
# Rows of the offset and date-filter reads: they only compare the first rows.
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
    page_size = _page_size(services)
    asked = page_size + 1
    first = await _first_page(services, facility, report, asked, page_size)
    if first is None:
        return
    page, read_with = first
    rows = _rows(page.data)
    _report_envelope(report, page)
    if read_with == asked:
        _report_page_cap(report, page, rows, asked, page_size)
    _report_portal_shape(report, rows)
    await _probe_offset(services, facility, report, rows)
    await _probe_filters(services, facility, report)
    await _probe_paths(services, facility, report, rows)


async def _token(services: GatewayServices, facility: FacilityView, report: Report) -> bool:
    try:
        await services.tokens.token(facility.hotel_id)
    except (KrossError, PmsgateError) as error:
        report.add(AREA, "login", Status.FAIL, _describe(error), _hint(error))
        return False
    where = services.kross.token_place(facility.hotel_id)
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


def _list_body(
    services: GatewayServices, offset: int, limit: int = PROBE_PAGE, **extra: Any
) -> dict[str, Any]:
    op = services.kross.operations.resolve(LIST)
    body: dict[str, Any] = {"with_rooms": True, "limit": limit, "offset": offset, **extra}
    return {op.wire_name(k): v for k, v in body.items()}


def _page_size(services: GatewayServices) -> int:
    """The rows a page of the gateway's own list reads asks for."""
    return services.kross.operations.resolve(LIST).page_size or DEFAULT_PAGE_SIZE


async def _first_page(
    services: GatewayServices,
    facility: FacilityView,
    report: Report,
    asked: int,
    page_size: int,
) -> tuple[Any, int] | None:
    """The first list page and the limit it was read with (the gateway's page if refused)."""
    try:
        body = _list_body(services, 0, asked)
        # An operator waits for the doctor's answer: interactive.
        result = await services.gateway.read(facility, LIST, body, priority=Priority.INTERACTIVE)
        return result, asked
    except InvalidRequest as error:
        # Refused rather than lowered: the gateway's own page size is what has to work.
        report.add(
            AREA,
            "page size",
            Status.WARN,
            f"The server refuses limit={asked} ({_describe(error)}) instead of capping it.",
            f"Keep page_size of {LIST} in operations.yaml at {page_size} or less; the probe "
            f"read the list with limit={page_size}.",
            refused=asked,
        )
    except (KrossError, PmsgateError) as error:
        report.add(AREA, "list envelope", Status.FAIL, _describe(error), _hint(error))
        return None
    result = await _read(
        services, facility, report, "list envelope", _list_body(services, 0, page_size)
    )
    return None if result is None else (result, page_size)


async def _read(
    services: GatewayServices,
    facility: FacilityView,
    report: Report,
    check: str,
    body: Mapping[str, Any],
    operation: str = LIST,
) -> Any:
    try:
        return await services.gateway.read(facility, operation, body, priority=Priority.INTERACTIVE)
    except (KrossError, PmsgateError) as error:
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


def page_cap(page: Any, rows: int, asked: int) -> int | None:
    """The server's page cap as one answer to ``limit=asked`` shows it; None when none shows.

    The answer's ``limit`` is what the server applied; without it, fewer rows than asked
    while ``total_count`` says more exist is the cap too.
    """
    if page.limit is not None and 0 < page.limit < asked:
        return int(page.limit)
    if page.limit is None and page.total_count is not None and rows < min(asked, page.total_count):
        return rows
    return None


def _report_page_cap(report: Report, page: Any, rows: Sequence[Any], asked: int, size: int) -> None:
    cap = page_cap(page, len(rows), asked)
    if cap is not None and cap < size:
        report.add(
            AREA,
            "page size",
            Status.WARN,
            f"Asked for {asked} rows, the server caps pages at {cap}.",
            f"Set page_size of {LIST} in operations.yaml to at most {cap}, so that a capped "
            "page is never taken for the last one when an answer lacks limit and total_count.",
            cap=cap,
            page_size=size,
        )
    elif cap is not None:
        report.add(
            AREA,
            "page size",
            Status.OK,
            f"Asked for {asked} rows, the server caps pages at {cap}; the gateway's pages of "
            f"{size} fit.",
            cap=cap,
            page_size=size,
        )
    elif len(rows) >= asked or page.limit == asked:
        report.add(
            AREA,
            "page size",
            Status.OK,
            f"No page cap up to {asked} rows (the server applied limit={asked}).",
            cap=None,
            page_size=size,
        )
    else:
        report.add(
            AREA,
            "page size",
            Status.SKIP,
            f"{len(rows)} rows came back for limit={asked} and the answer says neither the "
            "limit applied nor total_count: cannot tell a cap from the end of the list.",
            cap=None,
            page_size=size,
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
    if not first:
        report.add(AREA, "offset", Status.SKIP, "No reservation: cannot tell.")
        return
    page = await _read(services, facility, report, "offset", _list_body(services, 1))
    if page is None:
        return
    verdict = offset_verdict(_ids(first), _ids(_rows(page.data)), page.offset)
    if verdict == "ignored":
        report.add(
            AREA,
            "offset",
            Status.WARN,
            "The server ignores offset: the read at offset 1 starts with the first row again.",
            f"Raise page_size of {LIST} in operations.yaml so one page holds the window "
            "(refreshes stop at a repeated page and say meta.truncated).",
        )
    elif verdict == "honoured":
        report.add(
            AREA, "offset", Status.OK, "offset is honoured (offset 1 starts at the second row)."
        )
    else:
        report.add(
            AREA,
            "offset",
            Status.WARN,
            "The read at offset 1 does not start at the second row of the first read (does "
            "the server count offset in pages, or sort differently?).",
            "Compare a few pages by hand; refreshes stop at a repeated page and say "
            "meta.truncated, but rows may be skipped if offset counts pages.",
        )


def offset_verdict(first: Sequence[str], second: Sequence[str], applied: int | None) -> str:
    """``honoured``, ``ignored`` or ``unclear``: what a read at offset 1 says of ``offset``.

    ``first`` and ``second`` are the row ids of the reads at offset 0 and 1; ``applied`` the
    offset the second answer says it used.
    """
    if applied is not None and applied != 1:
        return "ignored"
    if not second:
        # Only one reservation: a server ignoring offset would have answered it again.
        return "honoured" if len(first) == 1 else "unclear"
    if second[0] == first[0]:
        return "ignored"
    if len(first) == 1 or second[0] == first[1]:
        return "honoured"
    return "unclear"


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
            "Nothing to set: the gateway checks every date itself; refreshes may "
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
    default = services.kross.operations.resolve(INSTRUCTIONS).path
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
    resolved = getattr(services.kross, "resolved_paths", None)
    return dict(resolved()) if callable(resolved) else {}


def _describe(error: KrossError | PmsgateError) -> str:
    return f"{error.code}: {error.message}"


def _hint(error: KrossError | PmsgateError) -> str | None:
    return error.hint
