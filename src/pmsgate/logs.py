"""Structured logging (structlog) with secrets redacted before anything is written."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog

REDACTED = "[redacted]"
SECRET_FIELD = re.compile(
    r"pass(word)?|api_?key|token|secret|authorization|cookie|gateway_key|wifi_password",
    re.IGNORECASE,
)
BEARER = re.compile(r"(Bearer\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE)


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return BEARER.sub(r"\1" + REDACTED, value)
    if isinstance(value, dict):
        return {
            k: (REDACTED if SECRET_FIELD.search(str(k)) else _scrub(v)) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_scrub(v) for v in value]
    return value


def redact_secrets(
    _logger: Any, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """Replace values of secret-looking keys, and bearer tokens inside strings."""
    for key in list(event_dict):
        if SECRET_FIELD.search(key):
            event_dict[key] = REDACTED
        else:
            event_dict[key] = _scrub(event_dict[key])
    return event_dict


def _stderr_logger(*_args: Any) -> structlog.PrintLogger:
    return structlog.PrintLogger(sys.stderr)


def configure_logging(level: str = "INFO", *, json: bool = False, to: TextIO | None = None) -> None:
    """Route structlog and stdlib logging through one redacting pipeline to stderr (or ``to``:
    the file `pmsgate demo` writes its log lines to)."""
    renderer: Any = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            redact_secrets,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        # Resolve stderr per logger: tests and CLI runners swap sys.stderr at run time.
        logger_factory=_stderr_logger if to is None else structlog.PrintLoggerFactory(to),
        cache_logger_on_first_use=False,
    )
