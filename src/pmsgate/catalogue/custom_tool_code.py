"""Code of a custom tool on the assistant platform: one call to one pmsgate gateway tool.

This file is catalogue DATA, never imported by pmsgate: the catalogue renders it
once per tool, replacing the values of the four constants below (see
``custom_tool`` in ``tools.yaml``), and the platform runs the result as the
tool's ``main(**params)``.

It follows the documented code contract (``GET /v1/custom-tools/runtimes``):
``main(**params)`` returns ``{"message": str, "rawData": any}``, and it imports the
standard library only (always importable; the curated package list may change). The
gateway's address and key are workspace secrets that the code reads as environment
variables: no key is ever written here. How secrets reach tool code is NOT in the
public reference; this is the project's assumption (docs/assistant-api.md "Assumed
endpoints"), and without a secrets API a person sets them in the dashboard.
``main`` never raises: a failure is an answer whose message carries the error
code and hint, so the assistant can tell the operator what to fix.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

TOOL_NAME = "check-availability"
URL_SECRET = "PMSGATE_GATEWAY_URL"
KEY_SECRET = "PMSGATE_GATEWAY_KEY"
TIMEOUT_S = 25.0

_MAX_LISTED = 5


def main(**params: Any) -> dict[str, Any]:
    """Call the gateway tool with these parameters; answer {message, rawData}."""
    base_url = os.environ.get(URL_SECRET, "").strip().rstrip("/")
    key = os.environ.get(KEY_SECRET, "").strip()
    missing = [name for name, value in ((URL_SECRET, base_url), (KEY_SECRET, key)) if not value]
    if missing:
        return _failure(
            "missing_secret",
            f"The workspace secret {' and '.join(missing)} is not set.",
            "Set the gateway address and key in the workspace secrets, then retry.",
        )
    # Assistants often send empty optional arguments; the gateway wants them left out.
    arguments = {name: value for name, value in params.items() if value not in (None, "")}
    try:
        request = urllib.request.Request(
            f"{base_url}/v1/tools/{urllib.parse.quote(TOOL_NAME)}",
            data=json.dumps(arguments).encode("utf-8"),
            method="POST",
            headers={
                "Authorization": f"Bearer {key}",
                "Content-Type": "application/json",
                "Accept": "application/json",
                "User-Agent": f"pmsgate-custom-tool/1 ({TOOL_NAME})",
            },
        )
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            body = _json(response.read())
    except urllib.error.HTTPError as error:
        return _gateway_error(error.code, _json(error.read()))
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        reason = getattr(error, "reason", error)
        return _failure(
            "gateway_unreachable",
            f"The gateway could not be reached ({type(error).__name__}: {reason}).",
            "Retry in a minute; if it persists, tell the operator the booking system "
            "cannot be consulted right now.",
        )
    except ValueError as error:
        return _failure(
            "invalid_gateway_url",
            f"The gateway address in {URL_SECRET} is not usable ({error}).",
            "Set the secret to the gateway's base address, starting with https://.",
        )
    if not isinstance(body, dict) or "data" not in body:
        return {"message": f"{TOOL_NAME}: the gateway answered.", "rawData": body}
    return {"message": _summary(body), "rawData": body}


def _json(raw: bytes) -> Any:
    text = raw.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return {"body": text[:500]}


def _failure(code: str, message: str, hint: str) -> dict[str, Any]:
    error = {"code": code, "message": message, "hint": hint}
    return {
        "message": f"{TOOL_NAME} failed: {code}: {message} Hint: {hint}",
        "rawData": {"error": error},
    }


def _gateway_error(status: int, body: Any) -> dict[str, Any]:
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        error = {"code": f"http_{status}", "message": "The gateway refused the call.", "hint": ""}
    code = error.get("code") or f"http_{status}"
    text = f"{TOOL_NAME} failed: {code}: {error.get('message') or 'no message'}"
    if error.get("hint"):
        text += f" Hint: {error['hint']}"
    return {"message": text, "rawData": body}


def _summary(body: dict[str, Any]) -> str:
    """A short sentence for the assistant; the full answer stays in rawData."""
    data = body.get("data") or {}
    meta = body.get("meta") or {}
    try:
        text = _SUMMARIES.get(TOOL_NAME, _generic)(data)
    except (KeyError, TypeError, ValueError, AttributeError):
        text = _generic(data)
    if meta.get("stale"):
        text += (
            f" (Saved answer from {meta.get('age_s', '?')} s ago: the booking system is busy;"
            " say the information will be confirmed.)"
        )
    return text


def _generic(data: Any) -> str:
    return f"{TOOL_NAME}: the gateway answered; see rawData."


def _availability(data: dict[str, Any]) -> str:
    apartments = data["apartments"]
    free = [a for a in apartments if a.get("available")]
    head = (
        f"{len(free)} of {len(apartments)} apartments free from {data['arrival']} "
        f"to {data['departure']} ({data['nights']} nights)"
    )
    if not free:
        return head + "."
    listed = []
    for apartment in free[:_MAX_LISTED]:
        name = apartment.get("apartment") or f"apartment {apartment.get('apartment_id')}"
        price = apartment.get("total_price")
        if price is None:
            listed.append(name)
        else:
            listed.append(f"{name}, {price} {apartment.get('currency') or ''}".rstrip())
    more = f" and {len(free) - _MAX_LISTED} more" if len(free) > _MAX_LISTED else ""
    return f"{head}: {'; '.join(listed)}{more}."


def _reservation(data: dict[str, Any]) -> str:
    r = data["reservation"]
    text = (
        f"Reservation {r['reservation_id']}: {r['status']}, from {r['arrival']} to "
        f"{r['departure']}, {r.get('apartment') or 'apartment not assigned'}"
    )
    if r.get("balance") is not None:
        text += f"; balance due {r['balance']} {r.get('currency') or ''}".rstrip()
    return text + f"; check-in portal {r.get('portal_status', 'unknown')}."


def _in_house(data: dict[str, Any]) -> str:
    return f"{data['count']} reservations in the property on the night of {data['date']}."


def _incomplete(data: dict[str, Any]) -> str:
    return (
        f"{data['count']} arrivals from {data['date_from']} to {data['date_to']} "
        "have an incomplete online check-in."
    )


def _portal(data: dict[str, Any]) -> str:
    portal = data["portal"]
    state = "complete" if data["complete"] else "not complete"
    text = f"Reservation {data['reservation_id']}: online check-in {state}"
    if portal.get("guests_expected") is not None:
        text += f" ({portal.get('guests_registered') or 0} of {portal['guests_expected']} guests)"
    if portal.get("missing"):
        text += "; missing: " + ", ".join(str(m) for m in portal["missing"])
    return text + "."


def _instructions(data: dict[str, Any]) -> str:
    text = f"Check-in instructions for {data.get('apartment') or 'the apartment'}"
    times = [
        f"{label} {data[field]}"
        for label, field in (
            ("check-in from", "check_in_from"),
            ("check-in until", "check_in_until"),
            ("check-out until", "check_out_until"),
        )
        if data.get(field)
    ]
    return text + (": " + ", ".join(times) if times else "") + "."


_SUMMARIES = {
    "check-availability": _availability,
    "get-reservation-status": _reservation,
    "get-in-house-guests": _in_house,
    "get-incomplete-portals": _incomplete,
    "check-portal-status": _portal,
    "get-checkin-instructions": _instructions,
}
