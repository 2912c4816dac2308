"""What every `pmsgate` command group shares: its container, and how a service error ends it.

:func:`open_cli_container` is how every command group opens the process's container
(:func:`pmsgate.container.open_container`), on the settings of the environment and the
group's :class:`Upstreams` seam; a database that cannot be used ends the command with
``database_unavailable``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import typer
from rich.console import Console
from rich.markup import escape

from pmsgate.clock import Clock
from pmsgate.config import get_settings
from pmsgate.errors import PmsgateError

if TYPE_CHECKING:
    from pmsgate.container import Container
    from pmsgate.customers.context import HttpFactory, Sleep

err_console = Console(stderr=True, highlight=False)

T = TypeVar("T")


@dataclass
class Upstreams:
    """How the commands reach the upstreams: real clients by default.

    The sandbox and tests set ``http_factory`` (httpx clients on the emulators' ASGI
    app) and a clock and sleep shared with the emulators; it is the same seam the
    services take in production, no behaviour is replaced.
    """

    http_factory: HttpFactory | None = None
    clock: Clock | None = None
    sleep: Sleep = anyio.sleep


@asynccontextmanager
async def open_cli_container(upstreams: Upstreams | None = None) -> AsyncIterator[Container]:
    """The command's container on the environment's settings and the group's upstreams."""
    # Imported here: `pmsgate --help` and the light commands do not load every service.
    from sqlalchemy.exc import SQLAlchemyError

    from pmsgate.container import open_container

    seams = upstreams or Upstreams()
    try:
        async with open_container(
            get_settings(), http_factory=seams.http_factory, clock=seams.clock, sleep=seams.sleep
        ) as container:
            yield container
    except (SQLAlchemyError, OSError) as error:
        raise database_unavailable(error) from None


def database_unavailable(error: Exception) -> PmsgateError:
    """The error for a database that cannot be used (its type only: a URL may hold a password)."""
    return PmsgateError(
        f"The database could not be used ({type(error).__name__}).",
        code="database_unavailable",
        hint="Check PMSGATE_DATABASE_URL and that the database is reachable.",
    )


def fail(error: PmsgateError) -> typer.Exit:
    """Print a service error (code, message, hint) on standard error; the exit (2) to raise."""
    # Escaped: messages may hold brackets (e.g. an upstream ruid) that Rich reads as markup.
    err_console.print(f"[bold red]error[/] {escape(error.code)}: {escape(error.message)}")
    if error.hint:
        err_console.print(f"[dim]hint:[/] {escape(error.hint)}")
    return typer.Exit(code=2)


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine; a service error — also one inside a task group's
    exception group — ends the command with :func:`fail` (exit 2), never a traceback."""
    try:
        return asyncio.run(main)
    except PmsgateError as error:
        raise fail(error) from None
    except BaseExceptionGroup as group:
        raise fail(first_error(group)) from None


def first_error(group: BaseExceptionGroup[Any]) -> PmsgateError:
    """The error a (nested) exception group stands for: its first service error, else its
    first upstream error (as a service error); an interruption (Ctrl-C, an exit) inside it
    is raised as is; anything else is an ``internal_error`` naming the exception's type."""
    # Imported here: command modules stay light until a command actually failed.
    from pmsgate.customers.service import upstream_error
    from pmsgate.integrations.assistant.errors import PlatformError
    from pmsgate.integrations.notion.client import NotesError

    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        current = pending.pop(0)
        if isinstance(current, BaseExceptionGroup):
            pending = list(current.exceptions) + pending
        else:
            leaves.append(current)
    for leaf in leaves:
        if isinstance(leaf, PmsgateError):
            return leaf
    for leaf in leaves:
        if isinstance(leaf, PlatformError | NotesError):
            return upstream_error(leaf, "running the command")
    for leaf in leaves:
        if not isinstance(leaf, Exception):
            raise leaf
    kinds = ", ".join(sorted({type(leaf).__name__ for leaf in leaves})) or "unknown"
    return PmsgateError(f"The command failed unexpectedly ({kinds}).")
