"""Talking to the booking-system emulator over HTTP as a client would (its tests' helpers)."""

from __future__ import annotations

from datetime import date
from typing import Any

import httpx

UA = {"User-Agent": "Mozilla/5.0 (X11; Linux x86_64) pmsgate-tests"}
ROOMY = {"per_minute": 100_000, "per_hour": 100_000, "per_day": 100_000}
TODAY = date(2026, 11, 22)  # ManualClock's default start
# The variant switches as seeded and after a reset (docs/kross-api.md).
DEFAULTS = {
    "ignore_date_filters": True,
    "token_location": "data",
    "guest_portal_shape": "block",
    "ignore_offset": False,
    "omit_total_count": False,
    "max_page_size": None,
    "login_refusal": "401",
    "token_rejection": "401",
    "grouped_paths": False,
    "unknown_operation": "named",
}


async def facilities(http: httpx.AsyncClient) -> list[dict[str, Any]]:
    """The seeded facilities, with their credentials (the emulator's control endpoint)."""
    answer = await http.get("/_sandbox/facilities")
    assert answer.status_code == 200
    result: list[dict[str, Any]] = answer.json()
    return result


async def facility_of(http: httpx.AsyncClient, kind: str = "own") -> dict[str, Any]:
    """The first seeded facility of ``kind`` (own or partner)."""
    return next(f for f in await facilities(http) if f["kind"] == kind)


def credentials(facility: dict[str, Any]) -> dict[str, Any]:
    """The body of a get-token request for ``facility``."""
    return {k: facility[k] for k in ("api_key", "hotel_id", "username", "password")}


async def get_token(http: httpx.AsyncClient, facility: dict[str, Any]) -> httpx.Response:
    return await http.post("/v5/auth/get-token", headers=UA, json=credentials(facility))


async def session(
    http: httpx.AsyncClient, kind: str = "own", *, roomy: bool = True
) -> tuple[dict[str, Any], dict[str, str]]:
    """A facility and headers with a valid token; roomy lifts the rate limits out of the way."""
    facility = await facility_of(http, kind)
    if roomy:
        await http.put(f"/_sandbox/facilities/{facility['hotel_id']}/limits", json=ROOMY)
    answer = await get_token(http, facility)
    assert answer.status_code == 200, answer.text
    return facility, {**UA, "Authorization": f"Bearer {answer.json()['data']['auth_token']}"}


async def call(
    http: httpx.AsyncClient, headers: dict[str, str], operation: str, body: dict[str, Any]
) -> httpx.Response:
    """POST one /v5 operation with ``headers`` (a session's)."""
    return await http.post(f"/v5/{operation}", headers=headers, json=body)


# A guest registration the emulator accepts.
GUEST = {
    "first_name": "Ada",
    "last_name": "Esempio",
    "birth_date": "1990-01-01",
    "nationality": "IT",
    "document_type": "passport",
    "document_number": "X0000001",
}
