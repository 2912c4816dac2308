"""The notes workspace (the Notion API): does the customer's integration token work?

Three read-only requests with the official ``notion-client`` at the configured
``Notion-Version``: the bot user (which workspace the token belongs to), a one-item
search (what the integration was shared), and the apartments database (whether it
exposes data sources, as 2025-09-03 and later do).
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
from notion_client import AsyncClient
from notion_client.errors import HTTPResponseError, RequestTimeoutError
from pydantic import SecretStr

from pmsgate.config import Settings
from pmsgate.doctor.findings import Report, Status

AREA = "notes workspace"


async def probe_notion(
    settings: Settings,
    http: httpx.AsyncClient,
    token: SecretStr,
    database_id: str | None,
    report: Report,
) -> None:
    """The bot user, a search, and the apartments database, at the configured version."""
    sdk = AsyncClient(
        client=http,
        base_url=settings.notion_api_url.rstrip("/"),
        notion_version=settings.notion_version,
        timeout_ms=int(settings.notion_timeout_s * 1000),
        retry=False,
        logger=logging.getLogger("pmsgate.doctor.notion"),
        log_level=logging.WARNING,
    )
    auth = token.get_secret_value()
    me = await _ask(report, "integration", lambda: sdk.users.me(auth=auth))
    if me is None:
        return
    bot = me.get("bot") or {}
    workspace = bot.get("workspace_name") or "an unnamed workspace"
    report.add(
        AREA,
        "integration",
        Status.OK,
        f"The token belongs to a bot of {workspace} (Notion-Version {settings.notion_version}).",
    )
    found = await _ask(report, "search", lambda: sdk.search(auth=auth, page_size=1))
    if found is not None:
        shared = "something" if found.get("results") else "nothing"
        status = Status.OK if found.get("results") else Status.WARN
        report.add(
            AREA,
            "search",
            status,
            f"The integration can see {shared} (search answers {found.get('object', '?')}).",
            None
            if found.get("results")
            else "Share the apartments database with the integration in Notion.",
        )
    if database_id is None:
        report.add(AREA, "apartments database", Status.SKIP, "No apartments database recorded.")
        return
    database = await _ask(
        report,
        "apartments database",
        lambda: sdk.databases.retrieve(database_id=database_id, auth=auth),
    )
    if database is None:
        return
    sources = database.get("data_sources")
    if isinstance(sources, list):
        found_text = f"Reachable, with {len(sources)} data source(s)."
    else:
        found_text = "Reachable (no data_sources: a Notion-Version before 2025-09-03)."
    report.add(AREA, "apartments database", Status.OK, found_text)


def _code(error: HTTPResponseError) -> str:
    return str(getattr(error.code, "value", error.code))


async def _ask(report: Report, check: str, call: Any) -> dict[str, Any] | None:
    try:
        answer = await call()
    except HTTPResponseError as error:
        report.add(
            AREA,
            check,
            Status.FAIL,
            f"The notes API answered HTTP {error.status} ({_code(error)}).",
            "Reconnect the notes workspace (`pmsgate customers connect-notion`) or share "
            "the page with the integration; a 400 on the version means PMSGATE_NOTION_VERSION "
            "is not accepted.",
        )
        return None
    except (RequestTimeoutError, httpx.TransportError) as error:
        report.add(
            AREA,
            check,
            Status.FAIL,
            f"The notes API could not be reached ({type(error).__name__}).",
            "Check PMSGATE_NOTION_API_URL and the outbound firewall.",
        )
        return None
    return answer if isinstance(answer, dict) else None
