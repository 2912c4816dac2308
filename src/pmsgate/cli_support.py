"""What every `pmsgate` command group shares: how a service error ends a command."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.markup import escape

from pmsgate.errors import PmsgateError

err_console = Console(stderr=True, highlight=False)


def fail(error: PmsgateError) -> typer.Exit:
    """Print a service error (code, message, hint) on standard error; the exit (2) to raise."""
    # Escaped: messages may hold brackets (e.g. an upstream ruid) that Rich reads as markup.
    err_console.print(f"[bold red]error[/] {escape(error.code)}: {escape(error.message)}")
    if error.hint:
        err_console.print(f"[dim]hint:[/] {escape(error.hint)}")
    return typer.Exit(code=2)
