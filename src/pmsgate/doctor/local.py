"""Checks of what the deployment itself controls: configuration, database, Redis."""

from __future__ import annotations

from pmsgate.config import Settings
from pmsgate.doctor.findings import Report, Status
from pmsgate.errors import PmsgateError
from pmsgate.integrations.kross.client import BROWSER_UA_PREFIX
from pmsgate.integrations.kross.operations import load_operations

AREA = "local"


def check_configuration(settings: Settings, report: Report) -> None:
    """The settings a gateway cannot run without, and the ones that silently break calls."""
    if settings.secret_keys is None:
        report.add(
            AREA,
            "secret keys",
            Status.FAIL,
            "PMSGATE_SECRET_KEYS is not set: credentials cannot be stored or read.",
            "Generate one with `pmsgate secrets generate-key` and set PMSGATE_SECRET_KEYS.",
        )
    else:
        report.add(AREA, "secret keys", Status.OK, "PMSGATE_SECRET_KEYS is set.")
    if settings.partner_api_key is None:
        report.add(
            AREA,
            "partner api key",
            Status.WARN,
            "PMSGATE_PARTNER_API_KEY is not set: only 'own' facilities can log in.",
            "Set PMSGATE_PARTNER_API_KEY to the shared generic key (spec §5.3).",
        )
    else:
        report.add(AREA, "partner api key", Status.OK, "PMSGATE_PARTNER_API_KEY is set.")
    if settings.user_agent.startswith(BROWSER_UA_PREFIX):
        report.add(AREA, "user agent", Status.OK, "The booking-system User-Agent is browser-style.")
    else:
        report.add(
            AREA,
            "user agent",
            Status.FAIL,
            "PMSGATE_USER_AGENT does not start with 'Mozilla/5.0': the edge answers error 1010.",
            "Unset PMSGATE_USER_AGENT (the default is browser-style) or fix its value.",
        )
    try:
        load_operations(settings.kross_paths)
    except PmsgateError as error:
        report.add(AREA, "operation paths", Status.FAIL, error.message, error.hint)
    else:
        overridden = ", ".join(sorted(settings.kross_paths)) or "none"
        report.add(AREA, "operation paths", Status.OK, f"Valid; overridden: {overridden}.")
    if settings.platform_api_token is None:
        report.add(
            AREA,
            "platform token",
            Status.WARN,
            "PMSGATE_PLATFORM_API_TOKEN is not set: onboarding and the knowledge sync cannot run.",
            "Set PMSGATE_PLATFORM_API_TOKEN to an account API token of the assistant platform.",
        )
    else:
        report.add(AREA, "platform token", Status.OK, "PMSGATE_PLATFORM_API_TOKEN is set.")


def check_console_address(settings: Settings, report: Report) -> None:
    """The console's public address: the link in every message a customer gets."""
    if settings.public_url:
        report.add(AREA, "console address", Status.OK, f"Links lead to {settings.public_url}.")
    elif settings.console_url:
        report.add(
            AREA,
            "console address",
            Status.WARN,
            "PMSGATE_PUBLIC_URL is not set: message links use PMSGATE_GATEWAY_PUBLIC_URL "
            f"({settings.console_url}), which must then also serve the console.",
            "Set PMSGATE_PUBLIC_URL to the console's address as customers reach it.",
        )
    else:
        report.add(
            AREA,
            "console address",
            Status.FAIL,
            "Neither PMSGATE_PUBLIC_URL nor PMSGATE_GATEWAY_PUBLIC_URL is set: invitations, "
            "password resets and incident notices cannot carry a link, so customers cannot "
            "set a password or sign in from them.",
            "Set PMSGATE_PUBLIC_URL to the console's address, e.g. https://console.example.com.",
        )


async def check_database(settings: Settings, report: Report) -> None:
    """Reachable and migrated to the newest revision (the doctor never migrates)."""
    from alembic.script import ScriptDirectory

    from pmsgate.storage.db import alembic_config, current_revision, open_database

    backend = settings.effective_database_url.split(":", 1)[0]
    try:
        async with open_database(settings.effective_database_url, migrate=False) as engine:
            current = await current_revision(engine)
    except Exception as error:
        report.add(
            AREA,
            "database",
            Status.FAIL,
            f"The database ({backend}) could not be used ({type(error).__name__}).",
            "Check PMSGATE_DATABASE_URL and that the server is reachable.",
        )
        return
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if current == head:
        report.add(AREA, "database", Status.OK, f"{backend}, at revision {current}.")
    else:
        report.add(
            AREA,
            "database",
            Status.FAIL,
            f"{backend} is at revision {current or 'none'}; this version needs {head}.",
            "Run `pmsgate db upgrade` (every `serve` also migrates on start).",
        )


async def check_redis(settings: Settings, report: Report) -> None:
    """Reachable when configured; without it limits hold within one process only."""
    if not settings.redis_url:
        report.add(
            AREA,
            "redis",
            Status.WARN,
            "PMSGATE_REDIS_URL is not set: limits, tokens and cache are per process.",
            "Set PMSGATE_REDIS_URL before running more than one replica.",
        )
        return
    from redis.asyncio import Redis

    client = Redis.from_url(settings.redis_url, socket_connect_timeout=3, socket_timeout=3)
    try:
        await client.ping()
    except Exception as error:
        report.add(
            AREA,
            "redis",
            Status.FAIL,
            f"Redis could not be reached ({type(error).__name__}).",
            "Check PMSGATE_REDIS_URL and that the server is reachable.",
        )
    else:
        report.add(AREA, "redis", Status.OK, "Redis answers.")
    finally:
        await client.aclose()
