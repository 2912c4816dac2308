"""The `pmsgate` command line (Typer): demo, serve, sandbox, db, and the admin groups."""

from __future__ import annotations

import asyncio
import importlib
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from rich.console import Console
from typer.core import TyperCommand, TyperGroup

from pmsgate.cli_support import fail
from pmsgate.config import get_settings
from pmsgate.doctor.command import doctor as doctor_command
from pmsgate.errors import PmsgateError
from pmsgate.logs import configure_logging


@dataclass(frozen=True)
class LazyGroup:
    """A command group imported only when it is run (its modules pull in the whole stack)."""

    module: str
    attribute: str
    help: str
    also_import: tuple[str, ...] = ()

    def load(self) -> typer.Typer:
        """Import the group's Typer app (and the modules that add commands to it)."""
        for module in self.also_import:
            importlib.import_module(module)
        group: typer.Typer = getattr(importlib.import_module(self.module), self.attribute)
        return group


# Each group's help is repeated here so that `pmsgate --help` imports none of them;
# tests/test_cli.py checks that it matches the group's own.
LAZY_GROUPS: dict[str, LazyGroup] = {
    "facilities": LazyGroup(
        "pmsgate.gateway.cli",
        "facilities_app",
        "Facilities: booking-system credentials, limits and gateway keys.",
    ),
    "secrets": LazyGroup(
        "pmsgate.gateway.cli",
        "secrets_app",
        "Vault keys (PMSGATE_SECRET_KEYS): generate one, re-encrypt under the first.",
    ),
    "catalogue": LazyGroup(
        "pmsgate.catalogue.cli",
        "catalogue_app",
        "The catalogue: tools, skills, guardrails, guest agent, knowledge template.",
    ),
    "knowledge": LazyGroup(
        "pmsgate.knowledge.cli",
        "knowledge_app",
        "Knowledge bridge: check and patch the customers' notes pages (spec §4.3 steps 12-14).",
        also_import=("pmsgate.knowledge.sync_cli",),  # adds `knowledge sync`
    ),
    "customers": LazyGroup(
        "pmsgate.customers.cli",
        "customers_app",
        "Customers: records, notes and booking-system integrations, apartment registry.",
    ),
    "onboard": LazyGroup(
        "pmsgate.onboarding.cli",
        "onboard_app",
        "Onboard a customer (spec §4.3): `pmsgate onboard CUSTOMER.yaml`, then `status` and "
        "`confirm`.",
    ),
    "jobs": LazyGroup(
        "pmsgate.jobs.cli",
        "jobs_app",
        "Scheduled jobs: usage snapshots, hourly gateway usage, connection checks, listings "
        "syncs (docs/jobs.md).",
    ),
    "users": LazyGroup(
        "pmsgate.web.cli", "users_app", "Web console accounts: add, list, remove, set passwords."
    ),
    "audit": LazyGroup(
        "pmsgate.audit.cli",
        "audit_app",
        "The audit trail: export it as JSON lines, list the newest events (docs/audit.md).",
    ),
}


class RootGroup(TyperGroup):
    """The root command: its own commands, plus the lazy groups, loaded when run.

    (Typer vendors its own click, whose types are private: contexts and commands are
    annotated ``Any`` here.)
    """

    _listing_help = False

    def list_commands(self, ctx: Any) -> list[str]:
        return [*super().list_commands(ctx), *LAZY_GROUPS]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        lazy = LAZY_GROUPS.get(cmd_name)
        if command is not None or lazy is None:
            return command
        if self._listing_help:
            # `pmsgate --help` needs a name and a line of help, not the group itself.
            return TyperCommand(cmd_name, help=lazy.help)
        command = typer.main.get_command(lazy.load())
        command.name = cmd_name
        self.commands[cmd_name] = command
        return command

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing_help = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing_help = False


app = typer.Typer(
    name="pmsgate",
    cls=RootGroup,
    help="Safe gateway between an AI guest assistant and the Kross Booking API v5.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="Database migrations.", no_args_is_help=True)
app.add_typer(db_app, name="db")

console = Console()


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
    forwarded_allow_ips: Annotated[
        str | None,
        typer.Option(
            help="Addresses of the reverse proxies whose X-Forwarded-For/-Proto are trusted "
            "(comma-separated, or * behind a private load balancer): the client address the "
            "login throttle counts, and HTTPS for the admin API and the session cookie's "
            "Secure flag. Default: PMSGATE_FORWARDED_ALLOW_IPS (127.0.0.1).",
            envvar="FORWARDED_ALLOW_IPS",
        ),
    ] = None,
) -> None:
    """Serve the gateway (tools, operations, MCP, admin API), the web app and console, the jobs."""
    import uvicorn

    from pmsgate.app import create_app

    settings = get_settings()
    uvicorn.run(
        create_app(settings),
        host=host,
        port=port,
        log_config=None,
        proxy_headers=True,
        forwarded_allow_ips=forwarded_allow_ips or settings.forwarded_allow_ips,
    )


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
    from pmsgate.sandbox.assistant.seed import SANDBOX_PLATFORM_TOKEN

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


app.command("doctor")(doctor_command)


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
