"""Demo chapter 1: the booking-system client against its emulator."""

from __future__ import annotations

import datetime as dt
from typing import Any

import httpx
from pydantic import SecretStr
from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from pmsgate.clock import Clock
from pmsgate.config import Settings
from pmsgate.errors import PmsgateError
from pmsgate.integrations.kross.client import PmsClient
from pmsgate.integrations.kross.credentials import Credentials
from pmsgate.integrations.kross.dates import filter_by_stay
from pmsgate.integrations.kross.errors import PmsError
from pmsgate.integrations.kross.models import AvailabilityNight
from pmsgate.integrations.kross.reservation_rows import BOOKING_DATE_FORMAT, parse_rows


async def booking_system_chapter(
    console: Console,
    settings: Settings,
    http: httpx.AsyncClient,
    facility: dict[str, Any],
    clock: Clock,
) -> None:
    """The booking-system client: token, availability, reservations, the documented quirks."""
    console.rule("[bold]1. The booking-system client (Kross API v5) against its emulator")
    client = PmsClient.from_settings(settings, http, clock)
    credentials = Credentials(
        hotel_id=facility["hotel_id"],
        username=facility["username"],
        password=SecretStr(facility["password"]),
        api_key=SecretStr(facility["api_key"]),
    )
    token = await client.get_token(credentials)
    console.print(
        f"Facility [bold]{facility['name']}[/] (hotel_id {facility['hotel_id']}, "
        f"user {facility['username']}, {facility['kind']} key): token obtained, "
        f"valid until {token.expires_at:%Y-%m-%d %H:%M} UTC (the token itself is never shown)."
    )

    today = client.clock.now().date()
    week_end = today + dt.timedelta(days=6)
    result = await client.call(
        "calendar/get-availability",
        {"date_from": today.isoformat(), "date_to": week_end.isoformat()},
        token,
    )
    nights = result.many(AvailabilityNight)
    table = Table(title=f"Availability {today} … {week_end} (free rooms per night)")
    table.add_column("apartment")
    days = [today + dt.timedelta(days=i) for i in range(7)]
    for day in days:
        table.add_column(f"{day:%a %d}", justify="right")
    by_apartment: dict[str, dict[dt.date, int]] = {}
    for night in nights:
        by_apartment.setdefault(night.name_room_type or str(night.id_room_type), {})[night.date] = (
            night.rooms_available
        )
    for name, free in sorted(by_apartment.items()):
        table.add_row(name, *(str(free.get(day, "-")) for day in days))
    console.print(table)

    # The filters public clients send: the booking (creation) date, not the stay dates; the
    # stay dates are checked on our side (spec §7). Rows are read one by one.
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
    reservations = parsed.items
    kept = filter_by_stay(reservations, today, week_end)
    console.print(
        Panel(
            f"Asked for stays overlapping {today} … {week_end}.\n"
            f"The booking system returned [bold]{kept.returned}[/] reservations "
            f"(it ignores date filters, spec §7); [bold]{kept.dropped_out_of_range}[/] were "
            f"outside the range and dropped; [bold]{len(kept.items)}[/] kept.",
            title="Date-filter enforcement",
        )
    )

    table = Table(title="Reservations this week")
    for column in ("id", "arrival", "departure", "apartment", "status", "portal"):
        table.add_column(column)
    for reservation in sorted(kept.items, key=lambda r: r.arrival)[:10]:
        table.add_row(
            str(reservation.id_reservation),
            reservation.arrival.isoformat(),
            reservation.departure.isoformat(),
            ", ".join(r.name_room_type or "" for r in reservation.rooms),
            reservation.cod_reservation_status or "",
            reservation.portal_status or "unknown",
        )
    console.print(table)

    table = Table(title="Documented mistakes get their own clear error")
    table.add_column("what was tried")
    table.add_column("error code")
    table.add_column("hint")
    for label, attempt in [
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
    ]:
        code, hint = await attempt
        table.add_row(label, code, hint)
    console.print(table)


def _client(
    settings: Settings,
    http: httpx.AsyncClient,
    *,
    user_agent: str | None = None,
    base: str | None = None,
) -> PmsClient:
    changed = settings.model_copy(
        update={
            "user_agent": user_agent or settings.user_agent,
            "kross_base_url": base or settings.kross_base_url,
        }
    )
    return PmsClient.from_settings(changed, http)


async def _call(client: PmsClient, operation: str, token: Any) -> tuple[str, str]:
    try:
        await client.call(operation, {"id_room_type": 1}, token)
    except PmsError as error:
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
