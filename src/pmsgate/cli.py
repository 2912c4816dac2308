"""The `pmsgate` command line (Typer): demo, serve, sandbox, db, and the admin groups."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer
from rich.console import Console

from pmsgate.catalogue.cli import catalogue_app
from pmsgate.config import get_settings
from pmsgate.customers.cli import customers_app
from pmsgate.errors import PmsgateError
from pmsgate.gateway.cli import facilities_app, secrets_app
from pmsgate.jobs.cli import jobs_app
from pmsgate.knowledge.cli import knowledge_app
from pmsgate.knowledge.sync_cli import sync_command  # noqa: F401  (adds `knowledge sync`)
from pmsgate.logs import configure_logging
from pmsgate.onboarding.cli import onboard_app
from pmsgate.web.cli import users_app

app = typer.Typer(
    name="pmsgate",
    help="Safe gateway between an AI guest assistant and the Kross Booking API v5.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="Database migrations.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(facilities_app, name="facilities")
app.add_typer(secrets_app, name="secrets")
app.add_typer(catalogue_app, name="catalogue")
app.add_typer(knowledge_app, name="knowledge")
app.add_typer(customers_app, name="customers")
app.add_typer(onboard_app, name="onboard")
app.add_typer(jobs_app, name="jobs")
app.add_typer(users_app, name="users")

console = Console()
err_console = Console(stderr=True)


def fail(error: PmsgateError) -> typer.Exit:
    """Print a service error (code, message, hint) to stderr and return the exit to raise."""
    err_console.print(f"[bold red]error[/] {error.code}: {error.message}")
    if error.hint:
        err_console.print(f"[dim]hint:[/] {error.hint}")
    return typer.Exit(code=2)


@app.callback()
def _setup() -> None:
    settings = get_settings()
    configure_logging(settings.log_level, json=settings.log_json)


@app.command()
def demo(
    seed: Annotated[int, typer.Option(help="Seed of the emulators' data.")] = 1,
    serve: Annotated[
        bool, typer.Option("--serve", help="Then keep the emulators and a gateway running.")
    ] = False,
    sandbox_port: Annotated[int, typer.Option(help="Port of the emulators (--serve).")] = 8090,
    gateway_port: Annotated[int, typer.Option(help="Port of the gateway (--serve).")] = 8080,
) -> None:
    """Run the whole system offline against in-process emulators and show what happens."""
    from pmsgate.demo import run_demo
    from pmsgate.demo.serve import serve_demo

    # The demo narrates what happens; only warnings interrupt it (PMSGATE_LOG_LEVEL=DEBUG for all).
    if get_settings().log_level.upper() == "INFO":
        configure_logging("WARNING")
    try:
        asyncio.run(run_demo(Console(), seed=seed))
        if serve:
            asyncio.run(
                serve_demo(
                    Console(), seed=seed, sandbox_port=sandbox_port, gateway_port=gateway_port
                )
            )
    except PmsgateError as error:
        raise fail(error) from None


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
) -> None:
    """Serve the gateway (HTTP tools, operations, MCP, admin API, health and metrics)."""
    import uvicorn

    from pmsgate.app import create_app

    uvicorn.run(create_app(get_settings()), host=host, port=port, log_config=None)


@app.command()
def sandbox(
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8090,
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    seed: Annotated[int, typer.Option(help="Seed of the emulators' data.")] = 1,
) -> None:
    """Serve the emulators: the booking system under /kross, controls under /kross/_sandbox."""
    import uvicorn
    from rich.table import Table

    from pmsgate.sandbox.app import Sandbox
    from pmsgate.sandbox.platform.seed import SANDBOX_PLATFORM_TOKEN

    box = Sandbox(seed=seed)
    table = Table(title=f"Seeded facilities (seed {seed})")
    for column in ("hotel_id", "username", "password", "kind", "api_key"):
        table.add_column(column)
    for facility in box.kross.facility_summaries():
        table.add_row(
            *(str(facility[c]) for c in ("hotel_id", "username", "password", "kind")),
            str(facility["api_key"]),
        )
    console.print(table)
    console.print(f"Booking-system base URL: http://{host}:{port}/kross")
    console.print(
        f"Assistant platform: http://{host}:{port}/platform (bearer {SANDBOX_PLATFORM_TOKEN})"
    )
    console.print(f"Notes workspace (Notion API): http://{host}:{port}/notes")
    console.print(f"Controls: http://{host}:{port}/<kross|platform|notes>/_sandbox/…")
    uvicorn.run(box.asgi_app(), host=host, port=port, log_config=None)


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply every pending migration to the configured database."""
    from pmsgate.storage.db import current_revision, open_database

    async def _run() -> str | None:
        async with open_database(get_settings().effective_database_url) as engine:
            return await current_revision(engine)

    console.print(f"database at revision {asyncio.run(_run())}")


def main() -> None:
    """Entry point of the `pmsgate` console script."""
    app()


if __name__ == "__main__":
    main()
