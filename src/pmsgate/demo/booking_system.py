"""Demo chapter 1: the booking-system client against its emulator."""

from __future__ import annotations

import datetime as dt
from typing import Any

import httpx
from pydantic import SecretStr

from pmsgate.clock import Clock
from pmsgate.config import Settings
from pmsgate.demo.story import Story
from pmsgate.errors import PmsgateError
from pmsgate.integrations.kross.client import KrossClient
from pmsgate.integrations.kross.credentials import Credentials
from pmsgate.integrations.kross.dates import filter_by_stay
from pmsgate.integrations.kross.errors import KrossError
from pmsgate.integrations.kross.models import AvailabilityNight
from pmsgate.integrations.kross.reservation_rows import BOOKING_DATE_FORMAT, parse_rows


async def booking_system_chapter(
    story: Story,
    settings: Settings,
    http: httpx.AsyncClient,
    facility: dict[str, Any],
    clock: Clock,
) -> None:
    """The booking-system client: token, availability, reservations, the documented quirks."""
    story.chapter(1, "The booking-system client (Kross API v5) on its emulator")
    client = KrossClient.from_settings(settings, http, clock)
    credentials = Credentials(
        hotel_id=facility["hotel_id"],
        username=facility["username"],
        password=SecretStr(facility["password"]),
        api_key=SecretStr(facility["api_key"]),
    )
    token = await client.get_token(credentials)
    story.say(
        f"Facility [bold]{facility['name']}[/] (hotel_id {facility['hotel_id']}, "
        f"user {facility['username']}, {facility['kind']} key): token obtained, "
        f"valid until {token.expires_at:%Y-%m-%d %H:%M} UTC (the token itself is never shown)."
    )
    today = client.clock.now().date()
    week_end = today + dt.timedelta(days=6)
    await _availability(story, client, token, today, week_end)
    await _reservations(story, client, token, today, week_end)
    await _mistakes(story, client, settings, http, facility, token)


async def _availability(
    story: Story, client: KrossClient, token: Any, today: dt.date, week_end: dt.date
) -> None:
    """The week's free rooms per night, one row per apartment."""
    result = await client.call(
        "calendar/get-availability",
        {"date_from": today.isoformat(), "date_to": week_end.isoformat()},
        token,
    )
    days = [today + dt.timedelta(days=i) for i in range(7)]
    by_apartment: dict[str, dict[dt.date, int]] = {}
    for night in result.many(AvailabilityNight):
        by_apartment.setdefault(night.name_room_type or str(night.id_room_type), {})[night.date] = (
            night.rooms_available
        )
    story.table(
        f"Free rooms per night, {today:%a %d %b} to {week_end:%a %d %b}",
        ["apartment", *(f"{day:%a}\n{day:%d}" for day in days)],
        [
            [name, *(str(free.get(day, "-")) for day in days)]
            for name, free in sorted(by_apartment.items())
        ],
        right={f"{day:%a}\n{day:%d}" for day in days},
    )


async def _reservations(
    story: Story, client: KrossClient, token: Any, today: dt.date, week_end: dt.date
) -> None:
    """The reservation list, read by booking date, kept to the stays of the week."""
    # The filters public clients send: the booking (creation) date, not the stay dates; the
    # stay dates are checked on our side (docs/kross-api.md). Rows are read one by one.
    booked_from = client.clock.now() - dt.timedelta(days=400)
    listed = await client.call(
        "reservations/get-list",
        {
            "date_reservation_from": booked_from.strftime(BOOKING_DATE_FORMAT),
            "with_rooms": True,
            "limit": 100,
        },
        token,
    )
    response_fields = client.operations.resolve("reservations/get-list").response_fields
    parsed = parse_rows(listed.data if isinstance(listed.data, list) else [], response_fields)
    kept = filter_by_stay(parsed.items, today, week_end)
    story.say(
        f"Asked for the stays overlapping {today} … {week_end}, the booking system "
        f"returned [bold]{kept.returned}[/] reservations: it ignores date filters, so the "
        f"gateway checks every stay itself. [bold]{kept.dropped_out_of_range}[/] were outside "
        f"the week and dropped; [bold]{len(kept.items)}[/] kept."
    )
    story.table(
        "Reservations this week",
        ["id", "arrival", "departure", "apartment", "status", "portal"],
        [
            [
                str(reservation.id_reservation),
                reservation.arrival.isoformat(),
                reservation.departure.isoformat(),
                ", ".join(r.name_room_type or "" for r in reservation.rooms),
                reservation.cod_reservation_status or "",
                reservation.portal_status or "unknown",
            ]
            for reservation in sorted(kept.items, key=lambda r: r.arrival)[:10]
        ],
        wrap="apartment",
    )
    story.measured(
        "Booking system",
        f"a token; {kept.returned} reservations returned for one week, "
        f"{kept.dropped_out_of_range} dropped by the gateway's date check, {len(kept.items)} kept",
    )


async def _mistakes(
    story: Story,
    client: KrossClient,
    settings: Settings,
    http: httpx.AsyncClient,
    facility: dict[str, Any],
    token: Any,
) -> None:
    """Each documented mistake, tried: its own error code and a hint saying what to do."""
    attempts = [
        ("calendar/get-calendar (does not exist)", _call(client, "calendar/get-calendar", token)),
        ("channel/save-cm (out of scope)", _call(client, "channel/save-cm", token)),
        (
            "a request without a browser User-Agent",
            _call(_client(settings, http, user_agent="python-httpx/0.27"), "get-contract", token),
        ),
        (
            "base URL pointing at /apiv5",
            _call(
                _client(settings, http, base=f"{settings.kross_base_url}/apiv5"),
                "get-contract",
                token,
            ),
        ),
        ("an e-mail address as API username", _email_username(facility)),
    ]
    rows = []
    for label, attempt in attempts:
        code, hint = await attempt
        rows.append([label, code, hint])
    story.table(
        "Documented mistakes get their own clear error",
        ["what was tried", "error code", "hint"],
        rows,
    )
    story.measured("Booking system", f"{len(rows)} documented mistakes, each its own error code")


def _client(
    settings: Settings,
    http: httpx.AsyncClient,
    *,
    user_agent: str | None = None,
    base: str | None = None,
) -> KrossClient:
    changed = settings.model_copy(
        update={
            "user_agent": user_agent or settings.user_agent,
            "kross_base_url": base or settings.kross_base_url,
        }
    )
    return KrossClient.from_settings(changed, http)


async def _call(client: KrossClient, operation: str, token: Any) -> tuple[str, str]:
    try:
        await client.call(operation, {"id_room_type": 1}, token)
    except KrossError as error:
        return error.code, error.hint
    return "ok", ""


async def _email_username(facility: dict[str, Any]) -> tuple[str, str]:
    try:
        Credentials(
            hotel_id=facility["hotel_id"],
            username="owner@example.com",
            password=SecretStr("x"),
            api_key=SecretStr(facility["api_key"]),
        )
    except PmsgateError as error:
        return error.code, error.hint
    return "ok", ""
