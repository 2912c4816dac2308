"""What every `pmsgate` command group shares: how a service error ends a command."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from pmsgate.errors import PmsgateError

err_console = Console(stderr=True, highlight=False)

T = TypeVar("T")


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
    from pmsgate.platform.errors import PlatformError
    from pmsgate.platform.notes import NotesError

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
