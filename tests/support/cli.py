"""The command line's configuration, as an in-process `pmsgate` run reads it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

import pytest
import structlog

from pmsgate.cli.support import Upstreams
from pmsgate.config import Settings, get_settings
from pmsgate.gateway.vault import generate_key_spec
from tests.customers.support import ClockSleep, SandboxSetup, sandbox_http_factory


@contextmanager
def cli_environment(monkeypatch: pytest.MonkeyPatch, **variables: str) -> Iterator[None]:
    """``variables`` (``PMSGATE_…`` names) set and PMSGATE_REDIS_URL unset for the CLI; the
    settings cache cleared around the block and structlog's configuration restored after it
    (the CLI points structlog at the runner's stream, which is closed once it returns)."""
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("PMSGATE_REDIS_URL", raising=False)
    get_settings.cache_clear()
    saved_logging = structlog.get_config()
    try:
        yield
    finally:
        structlog.configure(**saved_logging)
        get_settings.cache_clear()


@contextmanager
def database_cli(
    monkeypatch: pytest.MonkeyPatch, database_url: str, key_label: str, **variables: str
) -> Iterator[str]:
    """:func:`cli_environment` with the database ``database_url``, a fresh vault key
    (``key_label``) and ``variables``; the database URL."""
    with cli_environment(
        monkeypatch,
        PMSGATE_DATABASE_URL=database_url,
        PMSGATE_SECRET_KEYS=generate_key_spec(key_label),
        **variables,
    ):
        yield database_url


def sandbox_cli_variables(settings: Settings) -> dict[str, str]:
    """The ``PMSGATE_…`` variables that give the CLI the database, upstream URLs and secrets
    of ``settings``."""
    variables = {
        "PMSGATE_DATABASE_URL": settings.effective_database_url,
        "PMSGATE_KROSS_BASE_URL": settings.kross_base_url,
        "PMSGATE_ASSISTANT_API_URL": settings.assistant_api_url,
        "PMSGATE_NOTION_API_URL": settings.notion_api_url,
    }
    for name in ("secret_keys", "partner_api_key", "assistant_api_token"):
        secret = getattr(settings, name)
        variables[f"PMSGATE_{name.upper()}"] = secret.get_secret_value()
    return variables


@contextmanager
def cli_on_sandbox(
    monkeypatch: pytest.MonkeyPatch, setup: SandboxSetup, group: ModuleType, **variables: str
) -> Iterator[None]:
    """The CLI configured as ``setup``'s settings say (plus ``variables``), with the command
    group's ``upstreams`` seam on the sandbox app, its ManualClock and a sleep moving it."""
    with cli_environment(monkeypatch, **sandbox_cli_variables(setup.settings), **variables):
        monkeypatch.setattr(
            group,
            "upstreams",
            Upstreams(
                http_factory=sandbox_http_factory(setup.app),
                clock=setup.clock,
                sleep=ClockSleep(setup.clock),
            ),
        )
        yield
