"""The NAIVE pass-through gateway the workload benchmark compares pmsgate against.

What a typical credential/MCP gateway does: for every tool call, log in
(``auth/get-token``, a new token each time) and send exactly one operation through
the real :class:`~pmsgate.integrations.kross.client.KrossClient`; no cache, no limiter, no
single-flight, no retries. Same URL and key scheme as pmsgate (``POST
/v1/tools/{name}`` with ``Authorization: Bearer <key>``), so the workload drives
both with the same requests. Answers are the upstream data, lightly shaped; the
benchmark compares what reaches the booking system and how callers are answered,
not the wording of the answers.
"""

from __future__ import annotations

import datetime as dt
import secrets
from typing import Any

from fastapi import FastAPI, Header
from fastapi.responses import JSONResponse

from pmsgate.gateway.upstream_errors import translate
from pmsgate.integrations.kross import errors as kross
from pmsgate.integrations.kross.client import KrossClient
from pmsgate.integrations.kross.credentials import Credentials


def _error(code: str, status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def _operation(name: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The one booking-system operation a tool call maps to (None: unknown tool)."""
    if name == "check-availability":
        last_night = dt.date.fromisoformat(args["departure"]) - dt.timedelta(days=1)
        payload: dict[str, Any] = {"date_from": args["arrival"], "date_to": last_night.isoformat()}
        if args.get("apartment_id") is not None:
            payload["id_room_type"] = args["apartment_id"]
        return "calendar/get-availability", payload
    if name in ("get-reservation-status", "check-portal-status"):
        return "reservations/get-list", {"id_reservation": args["reservation_id"]}
    if name == "get-in-house-guests":
        payload = {"in_house": True}
        if args.get("date"):
            payload["date"] = args["date"]
        return "reservations/get-list", payload
    if name == "get-incomplete-portals":
        payload = {"with_guest_portal": True}
        if args.get("date_from"):
            payload["arrival_from"] = args["date_from"]
        if args.get("date_to"):
            payload["arrival_to"] = args["date_to"]
        return "reservations/get-list", payload
    if name == "get-checkin-instructions":
        if args.get("apartment_id") is not None:
            return "get-check-in-instructions", {"id_room_type": args["apartment_id"]}
        return "get-check-in-instructions", {"id_reservation": args.get("reservation_id")}
    return None


class NaiveGateway:
    """Keys → credentials in a dict; every call is token + one request upstream."""

    def __init__(self, kross_client: KrossClient) -> None:
        self.kross = kross_client
        self._credentials: dict[str, Credentials] = {}

    def add(self, credentials: Credentials) -> str:
        """Register a facility; returns its gateway key."""
        key = secrets.token_urlsafe(24)
        self._credentials[key] = credentials
        return key

    def app(self) -> FastAPI:
        """The naive gateway's HTTP face."""
        app = FastAPI(title="naive pass-through gateway")

        @app.post("/v1/tools/{name}")
        async def call_tool(
            name: str, arguments: dict[str, Any], authorization: str | None = Header(default=None)
        ) -> JSONResponse:
            _, _, key = (authorization or "").partition(" ")
            credentials = self._credentials.get(key.strip())
            if credentials is None:
                return _error("invalid_gateway_key", 401, "Unknown gateway key.")
            mapped = _operation(name, arguments)
            if mapped is None:
                return _error("unknown_tool", 404, f"There is no tool named {name!r}.")
            operation, payload = mapped
            try:
                token = await self.kross.get_token(credentials)
                result = await self.kross.call(operation, payload, token)
            except kross.KrossError as error:
                translated = translate(error)
                return _error(translated.code, translated.status, translated.message)
            data = result.data
            count = len(data) if isinstance(data, list) else 1
            return JSONResponse(
                {
                    "data": data,
                    "meta": {"source": "upstream", "age_s": 0.0, "stale": False, "count": count},
                }
            )

        return app
