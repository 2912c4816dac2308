"""Checks of what the deployment itself controls: configuration, database, Redis."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from redis.asyncio import Redis

from pmsgate.clock import SystemClock
from pmsgate.config import Settings
from pmsgate.doctor.findings import Report, Status
from pmsgate.errors import PmsgateError
from pmsgate.gateway.vault import Vault, VaultKeyCheck
from pmsgate.integrations.kross.client import BROWSER_UA_PREFIX
from pmsgate.integrations.kross.operations import load_operations
from pmsgate.storage.db import open_database, session_factory

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from pmsgate.storage.db import SchemaStatus

AREA = "local"


def check_configuration(settings: Settings, report: Report) -> None:
    """The settings a gateway cannot run without, and the ones that silently break calls."""
    _is_set(
        report,
        "secret keys",
        "PMSGATE_SECRET_KEYS",
        settings.secret_keys,
        Status.FAIL,
        "credentials cannot be stored or read.",
        "Generate one with `pmsgate secrets generate-key` and set PMSGATE_SECRET_KEYS.",
    )
    _is_set(
        report,
        "partner api key",
        "PMSGATE_PARTNER_API_KEY",
        settings.partner_api_key,
        Status.WARN,
        "only 'own' facilities can log in.",
        "Set PMSGATE_PARTNER_API_KEY to the shared generic key of partner facilities.",
    )
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
    _is_set(
        report,
        "platform token",
        "PMSGATE_ASSISTANT_API_TOKEN",
        settings.assistant_api_token,
        Status.WARN,
        "onboarding and the knowledge sync cannot run.",
        "Set PMSGATE_ASSISTANT_API_TOKEN to an account API token of the assistant platform.",
    )


def _is_set(
    report: Report,
    check: str,
    variable: str,
    value: object,
    missing: Status,
    consequence: str,
    fix: str,
) -> None:
    """OK when the setting ``variable`` has a value; else ``missing``, with what it costs."""
    if value is None:
        report.add(AREA, check, missing, f"{variable} is not set: {consequence}", fix)
    else:
        report.add(AREA, check, Status.OK, f"{variable} is set.")


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


async def check_database(
    settings: Settings, report: Report, prepare: Callable[[AsyncEngine], Awaitable[SchemaStatus]]
) -> None:
    """Reachable, and at a schema this release runs on (the doctor never migrates).

    ``prepare`` checks the schema without migrating (the composition root's
    ``prepare_database(engine, migrate=False)``: its refusals are ``schema_*`` errors).
    """

    backend = settings.effective_database_url.split(":", 1)[0]
    try:
        async with open_database(settings.effective_database_url, migrate=False) as engine:
            status = await prepare(engine)
    except Exception as error:
        if isinstance(error, PmsgateError) and error.code.startswith("schema_"):
            advice = (
                "Run `pmsgate db upgrade` (or the migration Job) before serving this release."
                if error.code == "schema_outdated"
                else "Deploy the release that migrated it, or restore the backup taken before "
                "the upgrade (docs/deploy.md, Rolling back)."
            )
            report.add(AREA, "database", Status.FAIL, error.message, advice, code=error.code)
            return
        report.add(
            AREA,
            "database",
            Status.FAIL,
            f"The database ({backend}) could not be used ({type(error).__name__}).",
            "Check PMSGATE_DATABASE_URL and that the server is reachable.",
        )
        return
    if status.newer:
        report.add(
            AREA,
            "database",
            Status.WARN,
            f"{backend}, {status.line()}: this release (revision {status.head}) runs on it.",
            "A rollback in progress? Roll forward when you can (docs/deploy.md, Rolling back).",
        )
    else:
        report.add(AREA, "database", Status.OK, f"{backend}, at revision {status.current}.")


async def check_vault_keys(settings: Settings, report: Report) -> None:
    """The configured vault keys read the stored secrets: one sample per key id in use."""

    try:
        vault = Vault(settings.secret_keys.get_secret_value() if settings.secret_keys else "")
    except PmsgateError as error:
        report.add(AREA, "vault keys", Status.FAIL, error.message, error.hint)
        return
    async with open_database(settings.effective_database_url, migrate=False) as engine:
        keys = await VaultKeyCheck(session_factory(engine), vault, SystemClock()).check()
    if keys.ok:
        tried = ", ".join(keys.verified) or "none: no stored credential yet"
        report.add(AREA, "vault keys", Status.OK, f"Stored secrets decrypt; keys tried: {tried}.")
        return
    report.add(
        AREA,
        "vault keys",
        Status.FAIL,
        f"The vault cannot read every stored secret: {keys.problem()}.",
        "Add the missing key (its `id:base64key` entry) back to PMSGATE_SECRET_KEYS, after "
        "the primary; once every replica has it, `pmsgate secrets rotate` re-encrypts under "
        "the primary and the old key can go (docs/deploy.md, Rotating the vault key).",
        missing=list(keys.missing),
        wrong=list(keys.wrong),
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
