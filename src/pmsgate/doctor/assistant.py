"""The assistant platform: does the account token work, and which assumed endpoints exist?

The documented endpoints (docs/assistant-api.md) are checked for their envelope; the
endpoints the public reference does not document — our assumptions — are each asked
once, read-only, and a missing one is reported with the onboarding step that then
becomes a person's task. Every request goes through the client's own throttle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from pmsgate.config import Settings
from pmsgate.doctor.findings import Report, Status
from pmsgate.integrations.assistant.client import AssistantClient
from pmsgate.integrations.assistant.errors import (
    AssistantEndpointUnavailable,
    AssistantError,
    AssistantForbidden,
    AssistantNotFound,
)

AREA = "assistant platform"

# An undocumented endpoint → the onboarding step that needs it (docs/requirements.md R21).
ASSUMED: dict[str, str] = {
    "listings": "steps 9-10 (route choice, listings count)",
    "workspace secrets": "step 6 (the gateway key kept in workspace secrets)",
    "members": "step 8 (an Admin of the platform team)",
    "usage": "step 16 (baseline usage snapshot)",
    "PMS connection": "step 10 (listings come from the booking-system connection)",
    "test conversations": "step 17 (the test conversation)",
}


async def check_account(settings: Settings, http: httpx.AsyncClient, report: Report) -> None:
    """The token lists workspaces; the list comes in the documented envelope."""
    if settings.assistant_api_token is None:
        report.add(AREA, "account", Status.SKIP, "PMSGATE_ASSISTANT_API_TOKEN is not set.")
        return
    token = settings.assistant_api_token.get_secret_value()
    base = settings.assistant_api_url.rstrip("/")
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    try:
        response = await http.get(
            f"{base}/v1/workspaces", params={"limit": "1"}, headers=headers, timeout=15
        )
    except (httpx.TransportError, TimeoutError) as error:
        report.add(
            AREA,
            "account",
            Status.FAIL,
            f"{base} could not be reached ({type(error).__name__}).",
            "Check PMSGATE_ASSISTANT_API_URL (without /v1) and the outbound firewall.",
        )
        return
    if response.status_code in (401, 403):
        report.add(
            AREA,
            "account",
            Status.FAIL,
            f"The platform refused the token (HTTP {response.status_code}).",
            "Check PMSGATE_ASSISTANT_API_TOKEN: an account API token that may list workspaces.",
        )
        return
    body = _json(response)
    if response.status_code != 200 or body is None:
        report.add(
            AREA,
            "account",
            Status.FAIL,
            f"GET /v1/workspaces answered HTTP {response.status_code}"
            + ("" if body is not None else " without JSON")
            + ".",
            "Check PMSGATE_ASSISTANT_API_URL: the base URL without /v1.",
        )
        return
    documented = isinstance(body, dict) and isinstance(body.get("data"), list)
    if documented:
        report.add(
            AREA,
            "account",
            Status.OK,
            "The token lists workspaces in the documented envelope {data, next_cursor, has_more}.",
        )
    else:
        report.add(
            AREA,
            "account",
            Status.WARN,
            f"The token lists workspaces, but in an undocumented shape ({type(body).__name__}).",
            "Report it: docs/assistant-api.md lists the envelopes the client expects.",
        )
    await _check_runtimes(http, base, headers, report)


async def _check_runtimes(
    http: httpx.AsyncClient, base: str, headers: dict[str, str], report: Report
) -> None:
    try:
        response = await http.get(f"{base}/v1/custom-tools/runtimes", headers=headers, timeout=15)
    except (httpx.TransportError, TimeoutError) as error:
        report.add(AREA, "runtimes", Status.FAIL, f"No answer ({type(error).__name__}).")
        return
    body = _json(response)
    data = body.get("data") if isinstance(body, dict) else None
    if response.status_code == 200 and data is not None:
        languages = sorted(_languages(data))
        report.add(
            AREA,
            "runtimes",
            Status.OK,
            "Custom-tool runtimes: " + (", ".join(languages) or "listed") + ".",
            languages=languages,
        )
    else:
        report.add(
            AREA,
            "runtimes",
            Status.WARN,
            f"GET /v1/custom-tools/runtimes answered HTTP {response.status_code}.",
            "The custom tools' code assumes a Python runtime with the standard library; "
            "check the platform's Tools docs.",
        )


def _languages(data: Any) -> set[str]:
    items = (
        data if isinstance(data, list) else list(data.values()) if isinstance(data, dict) else []
    )
    names = {str(i.get("language") or i.get("name")) for i in items if isinstance(i, dict)}
    if isinstance(data, dict):
        names |= {str(k) for k in data if isinstance(data[k], dict | list)}
    return {n for n in names if n and n != "None"}


async def probe_workspace(client: AssistantClient, workspace_id: str, report: Report) -> None:
    """Each assumed endpoint asked once, read-only, for one workspace."""
    probes: dict[str, Callable[[], Awaitable[Any]]] = {
        "listings": lambda: client.list_listings(workspace_id),
        "workspace secrets": lambda: client.list_secrets(workspace_id),
        "members": lambda: client.list_members(workspace_id),
        "usage": lambda: client.workspace_usage(workspace_id),
        "PMS connection": lambda: client.get_kross_connection(workspace_id),
        "test conversations": lambda: _test_conversations(client, workspace_id),
    }
    for name, call in probes.items():
        try:
            answer = await call()
        except (AssistantEndpointUnavailable, AssistantNotFound, AssistantForbidden) as error:
            report.add(
                AREA,
                name,
                Status.WARN,
                f"Assumed endpoint not there for this token ({error.code}, HTTP {error.status}).",
                f"Onboarding {ASSUMED[name]} becomes a person's task with instructions; "
                "nothing to set.",
                assumption_holds=False,
            )
        except AssistantError as error:
            report.add(AREA, name, Status.FAIL, f"{error.code}: {error.message}", error.hint)
        else:
            if answer is _NOTHING_TO_ASK:
                report.add(AREA, name, Status.SKIP, "No agent in the workspace to ask about.")
                continue
            if answer is None:
                # The assumed contract answers 404 for "no connection yet": indistinguishable.
                report.add(
                    AREA,
                    name,
                    Status.WARN,
                    "Answered 404: the workspace has no connection yet, or the endpoint does "
                    "not exist; cannot tell which.",
                    f"If onboarding {ASSUMED[name]} stays a person's task, connect the booking "
                    "system in the platform dashboard.",
                )
                continue
            report.add(
                AREA, name, Status.OK, "Assumed endpoint answers as docs/assistant-api.md says."
            )


_NOTHING_TO_ASK = object()


async def _test_conversations(client: AssistantClient, workspace_id: str) -> Any:
    agents = await client.list_agents(workspace_id)
    if not agents:
        return _NOTHING_TO_ASK
    return await client.list_test_conversations(agents[0].id, workspace_id=workspace_id)


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None
