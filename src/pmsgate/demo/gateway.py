"""Demo chapter 2: the gateway, called the way the assistant calls it (HTTP and MCP)."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from pydantic import SecretStr
from rich.markup import escape

from pmsgate.app import create_app
from pmsgate.audit.trail import AuditTrail
from pmsgate.clock import ManualClock
from pmsgate.config import Settings
from pmsgate.container import open_container
from pmsgate.demo.story import Story
from pmsgate.errors import PmsgateError
from pmsgate.gateway.context import GatewayServices
from pmsgate.gateway.facilities import Limits, NewFacility
from pmsgate.gateway.scopes import write_scope
from pmsgate.gateway.tools import AVAILABILITY_WINDOW_DAYS
from pmsgate.sandbox.app import Sandbox
from pmsgate.storage.audit import AuditFilter

GATEWAY_HOST = "http://gateway.local"


async def gateway_chapter(tour: GatewayTour) -> None:
    """Register facilities, call the six tools, and show limits, staleness, writes, failures."""
    tour.story.chapter(2, "The gateway: six tools over HTTP and MCP, inside the limits")
    await tour.register_facilities()
    await tour.six_tools()
    await tour.rapid_calls()
    await tour.exhausted_budget()
    await tour.exactly_once_payment()
    await tour.changed_password()
    await tour.mcp()
    tour.story.measured(
        "Gateway",
        f"{tour.calls} tool calls over HTTP for {tour.facility['name']}, "
        f"{tour.upstream_requests()} booking-system requests in all (token included)",
    )


@dataclass
class GatewayTour:
    """One in-process gateway on the sandbox, and what the demo shows with it."""

    story: Story
    services: GatewayServices
    app: Any
    http: httpx.AsyncClient
    box: Sandbox
    clock: ManualClock
    facility: dict[str, Any]
    audit: AuditTrail
    key: str = ""
    calls: int = 0  # tool calls made over HTTP

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        story: Story,
        settings: Settings,
        kross_http: httpx.AsyncClient,
        box: Sandbox,
        clock: ManualClock,
    ) -> AsyncIterator[GatewayTour]:
        """A gateway app on the sandbox, served in-process."""
        async with open_container(settings, kross_http=kross_http, clock=clock) as container:
            services = container.gateway
            app = create_app(settings, container=container)
            async with app.router.lifespan_context(app):
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url=GATEWAY_HOST) as http:
                    facility = next(
                        f for f in box.kross.facility_summaries() if f["kind"] == "partner"
                    )
                    yield cls(story, services, app, http, box, clock, facility, container.audit)

    async def tool(self, name: str, **arguments: Any) -> httpx.Response:
        """Call a tool the way the assistant does."""
        self.calls += 1
        return await self.http.post(
            f"/v1/tools/{name}", json=arguments, headers={"Authorization": f"Bearer {self.key}"}
        )

    def upstream_requests(self) -> int:
        """Requests the booking system received for the demo facility so far."""
        return self.box.kross.stats.requests_by_hotel[self.facility["hotel_id"]]

    async def register_facilities(self) -> None:
        """Add every sandbox facility, its credentials tried first; a wrong password is refused.

        The password goes straight into the vault, and only after the booking system issued
        a token for it (that token becomes the facility's: no second session).
        """
        records = self.box.kross.facility_summaries()
        first = records[0]
        try:
            await self.services.gateway.add_facility(
                _registration(first, password="not-the-password"), verify=True
            )
        except PmsgateError as error:
            stored = [f.hotel_id for f in await self.services.facilities.list()]
            self.story.say(
                f"A wrong password for {first['hotel_id']}: [red]{error.code}[/] "
                f"({error.status}) — {escape(error.message)} Facilities stored: {len(stored)}."
            )
        rows = []
        for record in records:
            view, key = await self.services.gateway.add_facility(_registration(record), verify=True)
            if record["hotel_id"] == self.facility["hotel_id"]:
                self.key = key
            limits = (
                f"{view.limits.per_minute}/min {view.limits.per_hour}/h {view.limits.per_day}/d"
            )
            rows.append([view.hotel_id, view.name, view.kind, view.status, limits])
        self.story.table(
            "Facilities registered (tried upstream, encrypted at rest)",
            ["hotel_id", "name", "kind", "status", "limits"],
            rows,
        )
        self.story.own_line(
            f"Each got a gateway key, shown once; the key of {self.facility['name']}, "
            "which the assistant uses below:",
            self.key,
        )
        self.story.measured(
            "Gateway",
            f"{len(rows)} facilities registered, each tried upstream first "
            "(a wrong password refused, nothing stored)",
        )

    async def six_tools(self) -> None:
        """Each tool once, with where its answer came from."""
        today = self.clock.now().date()
        portals = (await self.tool("get-incomplete-portals")).json()
        reservation = (portals["data"]["reservations"] or [{"reservation_id": 1}])[0]
        calls = [
            ("get-incomplete-portals", {}),
            ("get-in-house-guests", {}),
            (
                "check-availability",
                {
                    "arrival": (today + dt.timedelta(days=7)).isoformat(),
                    "departure": (today + dt.timedelta(days=10)).isoformat(),
                },
            ),
            ("get-reservation-status", {"reservation_id": reservation["reservation_id"]}),
            ("check-portal-status", {"reservation_id": reservation["reservation_id"]}),
            ("get-checkin-instructions", {"reservation_id": reservation["reservation_id"]}),
        ]
        rows = []
        for name, arguments in calls:
            answer = (await self.tool(name, **arguments)).json()
            meta = answer["meta"]
            rows.append(
                [
                    name,
                    meta["source"],
                    str(meta["count"]),
                    str(meta["dropped_out_of_range"]),
                    _excerpt(name, answer["data"]),
                ]
            )
        self.story.table(
            f"The six tools for {self.facility['name']} (POST /v1/tools/<tool>)",
            ["tool", "from", "rows", "dropped", "answer"],
            rows,
            wrap="answer",
            right={"rows", "dropped"},
        )
        self.story.say(
            "(from: the gateway's cache or the booking system; dropped: rows outside the "
            "dates asked for, removed by the gateway's own date check.)"
        )
        self.story.say(
            "The four reservation tools share one cached read of the reservation list; "
            f"the booking system has received {self.upstream_requests()} requests in total "
            "(token included)."
        )

    async def rapid_calls(self) -> None:
        """200 calls in a row: answered from the cache, inside 10 requests a minute."""
        before = self.upstream_requests()
        answers = [await self.tool("get-in-house-guests") for _ in range(200)]
        ok = sum(a.status_code == 200 for a in answers)
        sent = self.upstream_requests() - before
        refused = self.box.kross.stats.rate_limited.total()
        self.story.say(
            f"200 rapid calls to get-in-house-guests: [bold]{ok}[/] answered, "
            f"[bold]{sent}[/] upstream requests, [bold]{refused}[/] upstream 429s."
        )
        self.story.measured(
            "Gateway",
            f"200 rapid calls: {ok} answered, {sent} upstream requests, {refused} upstream 429s",
        )

    async def exhausted_budget(self) -> None:
        """No permit left: the last good answer, marked stale, instead of an error."""
        hotel_id = self.facility["hotel_id"]
        await self.services.facilities.set_limits(
            hotel_id, Limits(per_minute=2, per_hour=2, per_day=5000)
        )
        self.clock.advance(self.services.tools.max_age_s("get-in-house-guests") + 60)
        await self.tool("get-in-house-guests")
        await self.tool("get-in-house-guests", date=self.clock.now().date().isoformat())
        self.clock.advance(self.services.tools.max_age_s("get-in-house-guests") + 1)
        stale = (await self.tool("get-in-house-guests")).json()["meta"]
        # A stay beyond the cached availability window (not cached), inside the sane range.
        arrival = self.clock.now().date() + dt.timedelta(days=AVAILABILITY_WINDOW_DAYS + 30)
        unavailable = await self.tool(
            "check-availability",
            arrival=arrival.isoformat(),
            departure=(arrival + dt.timedelta(days=2)).isoformat(),
        )
        self.story.say(
            f"Budget spent (limits lowered to 2/h): a cached tool answers with "
            f"stale={stale['stale']}, age {stale['age_s']:.0f} s; an uncached one answers "
            f"{unavailable.status_code} {unavailable.json()['error']['code']} with "
            f"Retry-After {unavailable.headers.get('Retry-After')} s."
        )
        self.story.measured(
            "Gateway",
            f"budget spent: the last answer served stale ({stale['age_s']:.0f} s old), "
            f"an uncached call refused with {unavailable.status_code}",
        )
        await self.services.facilities.set_limits(hotel_id, Limits())
        self.clock.advance(3600)

    async def exactly_once_payment(self) -> None:
        """A payment that commits upstream and then times out is recorded once."""
        portals = (await self.tool("get-incomplete-portals")).json()["data"]["reservations"]
        reservation_id = portals[0]["reservation_id"] if portals else 1
        self.box.kross.set_faults(commit_then_timeout=1, timeout_mode="disconnect")
        body = {
            "id_reservation": reservation_id,
            "amount": 120.0,
            "currency": "EUR",
            "method": "card",
        }
        path = "/v1/operations/reservations/add-payment"
        # The facility's first key holds only tools:read, like the key a workspace stores.
        refused = await self.http.post(
            path,
            json=body,
            headers={"Authorization": f"Bearer {self.key}", "Idempotency-Key": "demo-payment-0"},
        )
        scope = write_scope("reservations/add-payment")
        _, payment_key = await self.services.facilities.mint_key(
            self.facility["hotel_id"], "payments", scopes=[scope]
        )
        self.story.say(
            f"The tools-only key asking for a payment: {refused.status_code} "
            f"{refused.json()['error']['code']}, nothing sent; a key minted with {scope} "
            "makes it:"
        )
        headers = {"Authorization": f"Bearer {payment_key}", "Idempotency-Key": "demo-payment-1"}
        first = await self.http.post(
            "/v1/operations/reservations/add-payment", json=body, headers=headers
        )
        replay = await self.http.post(
            "/v1/operations/reservations/add-payment", json=body, headers=headers
        )
        self.box.kross.clear_faults()
        sent = self.box.kross.stats.requests_by_operation["reservations/add-payment"]
        self.story.say(
            f"A payment whose answer was lost after it committed: first call {first.status_code} "
            f"(recovered={first.json()['meta'].get('recovered')}, read back), replay "
            f"{replay.status_code} (replayed={replay.headers.get('Idempotent-Replayed')}); "
            f"sent to the booking system [bold]{sent}[/] time(s)."
        )
        self.story.measured(
            "Gateway",
            f"a payment whose answer was lost, called twice: sent upstream {sent} time(s)",
        )
        await self._show_write_trail()

    async def _show_write_trail(self) -> None:
        """The payment attempts as the audit trail keeps them (what the console shows)."""
        page = await self.audit.page(AuditFilter(action_prefix="key.used_for_write"), limit=10)
        rows = []
        for event in page.events:
            details = event.details
            notes = [name for name in ("replayed", "recovered") if details.get(name)]
            notes += [str(details["error_code"])] if details.get("error_code") else []
            rows.append(
                [
                    event.actor,
                    str(details.get("operation", "")).removeprefix("reservations/"),
                    str(details.get("idempotency_key", "")),
                    event.outcome,
                    ", ".join(notes) or "-",
                ]
            )
        self.story.table(
            "Audit trail: the writes (newest first; keys by prefix, no secret stored)",
            ["key", "operation", "Idempotency-Key", "outcome", "note"],
            rows,
            wrap="note",
        )

    async def changed_password(self) -> None:
        """The customer changes the API password: error state, no retry storm, reconnect."""
        hotel_id = self.facility["hotel_id"]
        self.box.kross.change_password(hotel_id, "a-new-password-1")
        self.clock.advance(self.services.tools.max_age_s("get-in-house-guests") + 1)
        failed = (await self.tool("get-in-house-guests")).json()["error"]
        before = self.upstream_requests()
        for _ in range(20):
            await self.tool("get-in-house-guests")
        storm = self.upstream_requests() - before
        await self.services.facilities.reconnect(
            hotel_id,
            username=self.facility["username"],
            password=SecretStr("a-new-password-1"),
            api_key=None,
            verify=self._verify,
        )
        await self.services.tokens.forget(hotel_id)
        recovered = await self.tool("get-in-house-guests")
        status = (await self.services.facilities.get(hotel_id)).status
        self.story.say(
            f"Password changed upstream: calls answer [bold]{failed['code']}[/] "
            f"(hint: {escape(failed['hint'])}). 20 more calls sent {storm} requests upstream; "
            f"after reconnecting with the new password: {recovered.status_code}, status {status}."
        )
        self.story.measured(
            "Gateway",
            f"a changed password: 20 calls sent {storm} requests upstream (no retry storm), "
            f"then reconnected ({status})",
        )

    async def _verify(self, credentials: Any) -> None:
        await self.services.kross.get_token(credentials)

    async def mcp(self) -> None:
        """The same tools over MCP (streamable HTTP at /mcp), with the same key."""
        transport = httpx2.ASGITransport(app=self.app)
        headers = {"Authorization": f"Bearer {self.key}"}
        async with (
            httpx2.AsyncClient(transport=transport, base_url=GATEWAY_HOST, headers=headers) as http,
            Client(streamable_http_client(f"{GATEWAY_HOST}/mcp", http_client=http)) as client,
        ):
            listed = await client.list_tools()
            result = await client.call_tool("get-in-house-guests", {})
        self.story.say(
            f"MCP at /mcp: {len(listed.tools)} tools ({', '.join(t.name for t in listed.tools)}); "
            f"get-in-house-guests answered is_error={result.is_error}."
        )


def _excerpt(name: str, data: dict[str, Any]) -> str:
    if name == "check-availability":
        return f"{data['available_count']} of {len(data['apartments'])} apartments free"
    if name in ("get-in-house-guests", "get-incomplete-portals"):
        return f"{data['count']} reservations"
    if name == "get-reservation-status":
        r = data["reservation"]
        return (
            f"#{r['reservation_id']} {r['status']} {r['arrival']}→{r['departure']} paid {r['paid']}"
        )
    if name == "check-portal-status":
        missing = ", ".join(data["portal"]["missing"]) or "-"
        return f"portal {data['portal']['status']}, missing {missing}"
    return f"{data.get('apartment')}: check-in from {data.get('check_in_from')}"


def _registration(record: dict[str, Any], password: str | None = None) -> NewFacility:
    """The registration of a sandbox facility (with another password, to show a refusal)."""
    own = record["kind"] == "own"
    return NewFacility(
        hotel_id=record["hotel_id"],
        username=record["username"],
        password=SecretStr(password if password is not None else record["password"]),
        kind=record["kind"],
        api_key=SecretStr(record["api_key"]) if own else None,
        integration_id=f"int-{record['hotel_id']}",
        name=record["name"],
    )
