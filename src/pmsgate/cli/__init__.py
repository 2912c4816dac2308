"""The `pmsgate` command line (Typer): demo, serve, sandbox, db, and the admin groups.

The command line is the entry layer (docs/architecture.md, Layers): this package holds
the root command and one module per command group (``facilities.py`` also holds
``secrets``, ``knowledge_sync.py`` adds ``knowledge sync``); ``support.py`` is what the
groups share. A group module is imported only when its group runs (:data:`LAZY_GROUPS`).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import socket
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
import uvicorn
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer.core import TyperCommand, TyperGroup

from pmsgate.cli.support import (
    InvalidSettings,
    database_unavailable,
    dependency_problems,
    err_console,
    fail,
    run,
    schema_problem,
    settings_problems,
    startup_problems,
)
from pmsgate.config import Settings, get_settings
from pmsgate.doctor.command import doctor as doctor_command
from pmsgate.errors import PmsgateError, exception_leaves
from pmsgate.logs import configure_logging
from pmsgate.version import build_info

if TYPE_CHECKING:
    from pmsgate.demo.story import Story

T = TypeVar("T")


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
        "pmsgate.cli.facilities",
        "facilities_app",
        "Facilities: booking-system credentials, limits and gateway keys.",
    ),
    "secrets": LazyGroup(
        "pmsgate.cli.facilities",
        "secrets_app",
        "Vault keys (PMSGATE_SECRET_KEYS): generate one, re-encrypt under the first.",
    ),
    "catalogue": LazyGroup(
        "pmsgate.cli.catalogue",
        "catalogue_app",
        "The catalogue: tools, skills, guardrails, guest agent, knowledge template.",
    ),
    "knowledge": LazyGroup(
        "pmsgate.cli.knowledge",
        "knowledge_app",
        "Knowledge bridge: check and patch the customers' notes pages, sync them.",
        also_import=("pmsgate.cli.knowledge_sync",),  # adds `knowledge sync`
    ),
    "customers": LazyGroup(
        "pmsgate.cli.customers",
        "customers_app",
        "Customers: records, notes and booking-system integrations, apartment registry.",
    ),
    "onboard": LazyGroup(
        "pmsgate.cli.onboard",
        "onboard_app",
        "Onboard a customer (17 steps): `pmsgate onboard CUSTOMER.yaml`, then `status` and "
        "`confirm`.",
    ),
    "jobs": LazyGroup(
        "pmsgate.cli.jobs",
        "jobs_app",
        "Scheduled jobs: usage snapshots, hourly gateway usage, connection checks, listings "
        "syncs (docs/jobs.md).",
    ),
    "users": LazyGroup(
        "pmsgate.cli.users", "users_app", "Web console accounts: add, list, remove, set passwords."
    ),
    "audit": LazyGroup(
        "pmsgate.cli.audit",
        "audit_app",
        "The audit trail: export it as JSON lines, list the newest events (docs/audit.md).",
    ),
    "webhooks": LazyGroup(
        "pmsgate.cli.webhooks",
        "webhooks_app",
        "Signed event webhooks: subscriptions, secrets, deliveries and replays (docs/webhooks.md).",
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


def _print_version(wanted: bool) -> None:
    if wanted:
        typer.echo(str(build_info()))
        raise typer.Exit()


@app.callback()
def _setup(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the version and source revision, then exit.",
        ),
    ] = False,
) -> None:
    # Every command reads the settings here first: ones that cannot be read end it with
    # one line per problem (the variable and the fix), exit 2 (docs/operations.md).
    try:
        settings = get_settings()
    except Exception as error:
        problems = settings_problems(error)
        if not problems:
            raise
        raise fail(InvalidSettings(problems)) from None
    configure_logging(settings.log_level, json=settings.log_json)


@app.command()
def demo(
    seed: Annotated[int, typer.Option(help="Seed of the emulators' data.")] = 1,
    serve: Annotated[
        bool, typer.Option("--serve", help="Then keep the emulators and a gateway running.")
    ] = False,
    sandbox_port: Annotated[int, typer.Option(help="Port of the emulators (--serve).")] = 8090,
    gateway_port: Annotated[int, typer.Option(help="Port of the gateway (--serve).")] = 8080,
    customers: Annotated[
        int,
        typer.Option(
            min=0,
            max=5000,
            help="With --serve: also generate this many customers in varied states "
            "(try the admin console with 300).",
        ),
    ] = 0,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", help="Print the log lines on standard error instead of into a file."
        ),
    ] = False,
) -> None:
    """Run the whole system offline against in-process emulators and show what happens.

    The story is told on standard output, readable in an 80-column terminal, and ends with
    a summary of what it showed. Its log lines go to <PMSGATE_DATA_DIR>/demo.log (the path
    is printed first), or with --verbose to standard error.
    """
    # Imported here: the demo loads the whole stack and the emulators.
    from pmsgate.demo import run_demo
    from pmsgate.demo.serve import serve_demo
    from pmsgate.demo.story import Story

    settings = get_settings()
    story = Story(Console())
    with _demo_log(settings, story, verbose=verbose):
        try:
            asyncio.run(run_demo(story, seed=seed))
            if serve:
                asyncio.run(
                    serve_demo(
                        story.console,
                        seed=seed,
                        sandbox_port=sandbox_port,
                        gateway_port=gateway_port,
                        customers=customers,
                    )
                )
        except PmsgateError as error:
            raise fail(error) from None


@contextmanager
def _demo_log(settings: Settings, story: Story, *, verbose: bool) -> Iterator[None]:
    """Where the demo's log lines go: a file under the data directory, its path printed
    once, so that they do not interrupt the story; with ``verbose``, standard error."""
    if verbose:
        yield
        return
    path = (settings.data_dir / "demo.log").resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as log:
        # structlog's lines, the standard library's (uvicorn, …) and Python's warnings.
        handler = logging.StreamHandler(log)
        logging.getLogger().addHandler(handler)
        logging.captureWarnings(True)
        configure_logging(settings.log_level, json=settings.log_json, to=log)
        story.own_line("This run's log lines go to (--verbose prints them here):", str(path))
        try:
            yield
        finally:
            logging.getLogger().removeHandler(handler)
            logging.captureWarnings(False)
            configure_logging(settings.log_level, json=settings.log_json)


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
    """Serve the gateway (tools, operations, MCP, admin API), the web app and console, the jobs.

    Before anything starts, the settings are checked and the database and Redis tried: a
    problem ends it with one line naming the variable and the fix, exit status 2. Then the
    schema: migrated under a lock with PMSGATE_MIGRATE_ON_START (the default for the
    embedded SQLite), else checked — an older one is refused ("run `pmsgate db upgrade`").
    Once it listens, it prints the address (docs/operations.md, Start-up checks).
    """
    # Imported here: `pmsgate --help` and the light commands do not load the whole stack.
    from pmsgate.app import create_app

    settings = get_settings()
    problems = startup_problems(settings)
    if not problems:
        problems = asyncio.run(dependency_problems(settings))
    if problems:
        raise fail(InvalidSettings(problems))
    if not settings.migrates_on_start:  # else the app's start-up migrates, under the lock
        refusal = asyncio.run(schema_problem(settings))
        if refusal is not None:
            raise fail(refusal)
    server = AnnouncingServer(
        _uvicorn_config(
            ExplainedStartup(create_app(settings)),
            host=host,
            port=port,
            forwarded_allow_ips=forwarded_allow_ips or settings.forwarded_allow_ips,
        ),
        docs=settings.api_docs,
    )
    server.run()
    if not server.started:  # the start-up failed: said above, in one line where it is ours
        raise typer.Exit(code=2)


def _uvicorn_config(app: Any, *, host: str, port: int, forwarded_allow_ips: str) -> uvicorn.Config:
    """uvicorn's configuration of `pmsgate serve`.

    ``loop="auto"`` and ``http="auto"`` take uvloop and httptools (installed with
    ``uvicorn[standard]``, a dependency) when they import, else asyncio and h11.
    """
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,
        loop="auto",
        http="auto",
        proxy_headers=True,
        forwarded_allow_ips=forwarded_allow_ips,
    )


def listening_line(host: str, port: int, *, docs: bool) -> str:
    """The line `pmsgate serve` prints once it listens."""
    shown = f"[{host}]" if ":" in host else host
    return f"pmsgate listening on http://{shown}:{port}" + (" (docs at /docs)" if docs else "")


class AnnouncingServer(uvicorn.Server):
    """A uvicorn server that prints, once it listens, the one line saying where."""

    def __init__(self, config: uvicorn.Config, *, docs: bool) -> None:
        super().__init__(config)
        self.docs = docs

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets)
        except SystemExit:  # the app's start-up failed, or the address is taken: logged
            self.should_exit = True  # `serve` then exits with 2, like every refused start
            return
        if self.should_exit or not self.servers:
            return
        bound = self.servers[0].sockets[0].getsockname()  # the real port, also for port 0
        typer.echo(listening_line(str(bound[0]), int(bound[1]), docs=self.docs))


class ExplainedStartup:
    """The app, with a start-up failure that is one of ours reported as one line.

    The checks of `serve` run before the app starts; what can still fail in the app's
    own start-up (the database gone since, the metrics address taken, …) is a service
    error (or the database's), printed as ``error <code>: <message> hint: <hint>``
    instead of the traceback uvicorn would log. Anything else keeps its traceback: it
    is a bug to report.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        held: list[Any] = []

        async def hold_failure(message: Any) -> None:
            if message["type"] == "lifespan.startup.failed":
                held.append(message)  # sent below, once we know what failed
            else:
                await send(message)

        try:
            await self.app(scope, receive, hold_failure)
        except BaseException as error:
            if not held:
                raise
            known = _startup_error(error)
            if known is None:
                await send(held[0])  # the traceback, as uvicorn logs it
                raise
            line = f"{known.code}: {known.message}" + (f" hint: {known.hint}" if known.hint else "")
            err_console.print(f"[bold red]error[/] {escape(line)}", soft_wrap=True)
            await send({"type": "lifespan.startup.failed", "message": ""})


def _startup_error(error: BaseException) -> PmsgateError | None:
    """The service error a start-up failure stands for, or None for an unexpected one."""
    # Imported here: `pmsgate --help` and the light commands do not load the whole stack.
    from sqlalchemy.exc import SQLAlchemyError

    leaves = exception_leaves(error) if isinstance(error, BaseExceptionGroup) else [error]
    for leaf in leaves:
        if isinstance(leaf, PmsgateError):
            return leaf
    for leaf in leaves:
        if isinstance(leaf, SQLAlchemyError | OSError):
            return database_unavailable(leaf)
    return None


@app.command()
def sandbox(
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8090,
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    seed: Annotated[int, typer.Option(help="Seed of the emulators' data.")] = 1,
) -> None:
    """Serve the emulators: the booking system under /kross, controls under /kross/_sandbox."""
    # Imported here: `pmsgate --help` and the light commands do not load the whole stack.
    from pmsgate.sandbox.app import Sandbox
    from pmsgate.sandbox.assistant.seed import SANDBOX_ASSISTANT_TOKEN

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
        f"Assistant platform: http://{host}:{port}/assistant (bearer {SANDBOX_ASSISTANT_TOKEN})"
    )
    console.print(f"Notes workspace (Notion API): http://{host}:{port}/notion")
    console.print(f"Controls: http://{host}:{port}/<kross|assistant|notion>/_sandbox/…")
    uvicorn.run(box.asgi_app(), host=host, port=port, log_config=None)


app.command("doctor")(doctor_command)


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply every pending migration to the configured database (under the migration lock).

    The one command that changes the schema (with `serve`/`demo` when
    PMSGATE_MIGRATE_ON_START is on). Replicas starting meanwhile wait for the lock, then find
    the schema at this release's revision. A database newer than this release is left as it
    is (refused if a newer migration is not backward compatible).
    """
    # Imported here: `pmsgate --help` and the light commands do not load the whole stack.
    from pmsgate.storage.db import schema_status

    status = _run_on_database(schema_status, migrate=True)
    console.print(status.line())


@db_app.command("check")
def db_check() -> None:
    """Say whether this release can run on the database, without changing it (exit 2 if not).

    It can when the database is at this release's revision, or newer with every newer
    migration marked backward compatible (a rollback by image: docs/deploy.md).
    """
    # Imported here: `pmsgate --help` and the light commands do not load the whole stack.
    from pmsgate.container import prepare_database

    status = _run_on_database(lambda engine: prepare_database(engine, migrate=False), migrate=False)
    console.print(f"{status.line()}: this release (revision {status.head}) can run on it")


def _run_on_database(work: Callable[[Any], Awaitable[T]], *, migrate: bool) -> T:
    """``work`` on an engine of the configured database (migrated first with ``migrate``);
    a database that cannot be used or a schema refused ends the command (exit 2)."""
    # Imported here: `pmsgate --help` and the light commands do not load the whole stack.
    from sqlalchemy.exc import SQLAlchemyError

    # Imported here: `pmsgate --help` and the light commands do not load the whole stack.
    from pmsgate.container import schema_error
    from pmsgate.storage.db import SchemaMismatch, open_database

    settings = get_settings()
    problems = startup_problems(settings, vault=False)
    if problems:
        raise fail(InvalidSettings(problems))

    async def _run() -> T:
        try:
            async with open_database(settings.effective_database_url, migrate=migrate) as engine:
                return await work(engine)
        except SchemaMismatch as mismatch:
            raise schema_error(mismatch) from None
        except (OSError, SQLAlchemyError) as error:
            raise database_unavailable(error) from None

    return run(_run())


def main() -> None:
    """Entry point of the `pmsgate` console script."""
    app()
