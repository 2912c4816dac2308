"""The command line's configuration, as an in-process `pmsgate` run reads it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import structlog

from pmsgate.config import get_settings


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
