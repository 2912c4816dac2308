"""What every `pmsgate` command group shares: its container, and how a service error ends it.

:func:`open_cli_container` is how every command group opens the process's container
(:func:`pmsgate.container.open_container`), on the settings of the environment and the
group's :class:`Upstreams` seam; a database that cannot be used ends the command with
``database_unavailable``, one whose schema this release cannot run on with
``schema_outdated`` (or ``schema_incompatible``): commands never migrate.

Start-up explains itself (docs/operations.md, Start-up checks): settings that cannot be
read, or that a command cannot run without, end it before anything starts with one line
per problem — the variable and the fix — and exit status 2, never a traceback
(:class:`InvalidSettings`, :func:`settings_problems`, :func:`startup_problems`,
:func:`dependency_problems`).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import anyio
import typer
from rich.console import Console
from rich.markup import escape

from pmsgate.clock import Clock
from pmsgate.config import Settings, get_settings
from pmsgate.errors import PmsgateError, exception_leaves

if TYPE_CHECKING:
    from pmsgate.container import Container
    from pmsgate.customers.context import HttpFactory, Sleep

# What every command group prints with: its answers on standard output, the rest on standard
# error (so that stdout stays exactly the answer: a table, or one JSON object with --json).
console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)

JsonOption = Annotated[
    bool, typer.Option("--json", help="Print one JSON object on standard output.")
]
StudentArgument = Annotated[str, typer.Argument(help="The customer's student_id.")]


def command_group(help: str) -> typer.Typer:
    """A group of `pmsgate` commands (``pmsgate facilities …``); without a command, its help."""
    return typer.Typer(help=help, no_args_is_help=True)


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

    # Imported here: `pmsgate --help` and the light commands do not load the whole stack.
    from pmsgate.container import open_container

    seams = upstreams or Upstreams()
    settings = get_settings()
    problems = startup_problems(settings)
    if problems:
        raise InvalidSettings(problems)
    try:
        # A command never migrates (only `db upgrade` does): a schema older than this
        # release ends it with `schema_outdated` (docs/operations.md, Start-up checks).
        async with open_container(
            get_settings(),
            http_factory=seams.http_factory,
            clock=seams.clock,
            sleep=seams.sleep,
            migrate=False,
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
    """Print a service error (code, message, hint) on standard error; the exit (2) to raise.

    :class:`InvalidSettings` is printed as one line per problem. Lines are never wrapped
    (``soft_wrap``): a log collector or a terminal wraps them itself, a grep finds them whole.
    """
    if isinstance(error, InvalidSettings):
        for problem in error.problems:
            err_console.print(f"[bold red]error[/] {escape(problem.line())}", soft_wrap=True)
        return typer.Exit(code=2)
    # Escaped: messages may hold brackets (e.g. an upstream ruid) that Rich reads as markup.
    err_console.print(
        f"[bold red]error[/] {escape(error.code)}: {escape(error.message)}", soft_wrap=True
    )
    if error.hint:
        err_console.print(f"[dim]hint:[/] {escape(error.hint)}", soft_wrap=True)
    return typer.Exit(code=2)


# --- Start-up checks: settings, then the dependencies (docs/operations.md) ---


@dataclass(frozen=True)
class SettingProblem:
    """One thing wrong with the settings: the variable to change, what is wrong, the fix.

    Never holds a value: a variable may hold a secret (a password inside a URL, a key).
    """

    variable: str
    problem: str
    fix: str
    code: str = "invalid_setting"

    def line(self) -> str:
        """The problem as the one line a start-up prints (the CLI's `code: message`, `hint:`)."""
        joint = " " if self.problem.startswith(("is ", "has ", "names ", "lists ")) else ": "
        return f"{self.code}: {self.variable}{joint}{self.problem} hint: {self.fix}"


class InvalidSettings(PmsgateError):
    """Settings a command cannot start with; :func:`fail` prints one line per problem."""

    def __init__(self, problems: list[SettingProblem]) -> None:
        self.problems = problems
        super().__init__(
            " ".join(problem.line() for problem in problems),
            code="invalid_settings",
            hint="Fix the variables named, then start again (`pmsgate doctor` checks them all).",
        )


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else f"{text}."


def settings_problems(error: Exception) -> list[SettingProblem]:
    """The problems of the environment's settings that :class:`Settings` refused to read.

    ``error`` is what reading them raised: pydantic's ``ValidationError`` (a value of the
    wrong kind or out of range: one problem per value) or pydantic-settings'
    ``SettingsError`` (a JSON-valued variable that is not JSON). Anything else is not a
    settings problem and gives none.
    """
    # Imported here: only a command whose settings failed needs them.
    from pydantic import ValidationError
    from pydantic_core import PydanticUndefined
    from pydantic_settings import SettingsError

    fields = Settings.model_fields
    if isinstance(error, ValidationError):
        problems = []
        for item in error.errors(include_url=False, include_input=False):
            name = str(item["loc"][0]) if item["loc"] else ""
            problem = _sentence(str(item["msg"]).removeprefix("Value error, "))
            if len(item["loc"]) > 1:  # an entry of a map, e.g. cache_max_age_s's tool
                keys = ", ".join(repr(str(part)) for part in item["loc"][1:])
                problem = f"entry {keys}: {problem}"
            field = fields.get(name)
            default = None if field is None else field.default
            if field is not None and (default is None or field.default_factory is not None):
                fix = "set a valid value, or unset it."
            elif field is None or default is PydanticUndefined:
                fix = "set a valid value."
            else:
                shown = getattr(default, "value", default)  # an enum: its value
                fix = f"set a valid value, or unset it for the default ({shown})."
            problems.append(SettingProblem(f"PMSGATE_{name.upper()}", problem, fix))
        return problems
    if isinstance(error, SettingsError):
        found = re.search(r'field "(\w+)"', str(error))
        variable = f"PMSGATE_{found.group(1).upper()}" if found else "a PMSGATE_ variable"
        return [
            SettingProblem(
                variable,
                "is not valid JSON (it holds a map or a list).",
                'write it as JSON, e.g. {"name": "value"}, or unset it.',
            )
        ]
    return []


def startup_problems(settings: Settings, *, vault: bool = True) -> list[SettingProblem]:
    """What a command that opens the container cannot start without, checked before it starts.

    Only what can be judged without reaching anything: the vault keys (unless ``vault`` is
    off: commands that never decrypt), the form of the database and Redis URLs, the
    operation paths. :func:`dependency_problems` then tries the database and Redis.
    """
    # Imported here: `pmsgate --help` and the light commands do not load the whole stack.
    from pmsgate.gateway import tracing
    from pmsgate.gateway.vault import parse_key_spec
    from pmsgate.integrations.kross.operations import load_operations

    problems: list[SettingProblem] = []
    spec = settings.secret_keys.get_secret_value().strip() if settings.secret_keys else ""
    if vault and not spec:
        problems.append(
            SettingProblem(
                "PMSGATE_SECRET_KEYS",
                "is not set: the vault cannot encrypt or read booking-system credentials.",
                "generate a key with `pmsgate secrets generate-key` and set "
                "PMSGATE_SECRET_KEYS to the line it prints.",
                code="missing_secret_keys",
            )
        )
    elif vault:
        try:
            parse_key_spec(spec)
        except PmsgateError as error:
            problems.append(
                SettingProblem(
                    "PMSGATE_SECRET_KEYS",
                    _sentence(error.message.removeprefix("PMSGATE_SECRET_KEYS ")),
                    "each entry is `id:base64key` (comma-separated) as printed by "
                    "`pmsgate secrets generate-key`.",
                    code=error.code,
                )
            )
    problems += _database_url_problems(settings)
    if settings.redis_url and not re.match(r"^(redis|rediss|unix)://", settings.redis_url):
        problems.append(
            SettingProblem(
                "PMSGATE_REDIS_URL",
                "is not a Redis URL.",
                "write it as redis://[:password@]host:6379/0 (rediss:// for TLS), or unset "
                "it to keep the limiter and the cache in memory (one replica only).",
                code="invalid_redis_url",
            )
        )
    try:
        load_operations(settings.kross_paths)
    except PmsgateError as error:
        problems.append(
            SettingProblem(
                "PMSGATE_KROSS_PATHS",
                _sentence(error.message),
                error.hint or "fix or unset it.",
                code=error.code,
            )
        )
    if tracing.configured(settings) and not tracing.available():
        problems.append(
            SettingProblem(
                "PMSGATE_OTEL_ENDPOINT"
                if settings.otel_endpoint
                else "OTEL_EXPORTER_OTLP_ENDPOINT",
                "asks for traces, but the OpenTelemetry packages are not installed.",
                tracing.INSTALL_HINT,
                code="otel_not_installed",
            )
        )
    return problems


def _database_url_problems(settings: Settings) -> list[SettingProblem]:
    # Imported here: `pmsgate --help` and the light commands do not load the whole stack.
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    if not settings.database_url:
        return []
    fix = (
        "write it as postgresql+asyncpg://user:password@host:5432/name (or "
        "sqlite+aiosqlite:///path), or unset it for SQLite under PMSGATE_DATA_DIR."
    )
    try:
        dialect = make_url(settings.database_url).get_dialect()
    except (ArgumentError, NoSuchModuleError, ValueError, ImportError):
        refused = "is not a database URL pmsgate knows."
        return [SettingProblem("PMSGATE_DATABASE_URL", refused, fix, code="invalid_database_url")]
    if not getattr(dialect, "is_async", False):
        return [
            SettingProblem(
                "PMSGATE_DATABASE_URL",
                "names a driver that is not asynchronous.",
                fix,
                code="invalid_database_url",
            )
        ]
    return []


def describe_database(url: str) -> str:
    """The database as a problem names it: its backend and address, never its password."""
    # Imported here: `pmsgate --help` and the light commands do not load the whole stack.
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except Exception:  # already refused by startup_problems; say nothing of it
        return "the database"
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return f"the SQLite database {parsed.database or '(in memory)'}"
    return f"the {backend} database at {parsed.host or 'localhost'}:{parsed.port or 'default port'}"


def _reason(error: BaseException) -> str:
    """Why a connection failed, without the error's text (a driver may quote the URL)."""
    if isinstance(error, TimeoutError):
        return "no answer in time"
    for candidate in (error, error.__cause__, error.__context__):
        if isinstance(candidate, OSError):
            return os.strerror(candidate.errno).lower() if candidate.errno else "network error"
    return type(error).__name__


async def dependency_problems(
    settings: Settings, *, timeout_s: float = 10.0
) -> list[SettingProblem]:
    """The database (always) and Redis (when PMSGATE_REDIS_URL is set), each tried once.

    A replica that starts without them would only fail later, on a caller's request (the
    database), or serve with every replica on its own budget (Redis): at start-up either
    is a mistake to report, not to run on. (An outage after start-up is handled by the
    gateway's fallbacks: docs/gateway.md, When Redis is away.)
    """
    # Imported here: `pmsgate --help` and the light commands do not load the whole stack.
    from sqlalchemy import text

    # Imported here: `pmsgate --help` and the light commands do not load the whole stack.
    from pmsgate.container import open_redis
    from pmsgate.storage.db import open_database

    problems: list[SettingProblem] = []
    url = settings.effective_database_url
    try:
        async with asyncio.timeout(timeout_s):
            async with open_database(url, migrate=False) as engine, engine.connect() as db:
                await db.execute(text("SELECT 1"))
    except Exception as error:  # any failure means it cannot be used; say which kind
        problems.append(
            SettingProblem(
                "PMSGATE_DATABASE_URL",
                f"{describe_database(url)} could not be reached ({_reason(error)}).",
                "check PMSGATE_DATABASE_URL (host, port, user, password, database name) and "
                "that the database is running and accepts connections from this machine.",
                code="database_unavailable",
            )
        )
    redis = open_redis(settings)
    if redis is not None:
        address = redis.connection_pool.connection_kwargs
        where = f"{address.get('host', 'localhost')}:{address.get('port', 6379)}"
        if "path" in address:
            where = str(address["path"])
        try:
            async with asyncio.timeout(timeout_s):
                await redis.ping()
        except Exception as error:  # any failure means it cannot be used; say which kind
            problems.append(
                SettingProblem(
                    "PMSGATE_REDIS_URL",
                    f"Redis at {where} could not be reached ({_reason(error)}).",
                    "check PMSGATE_REDIS_URL (host, port, password, database) and that Redis "
                    "is running, or unset it to keep the limiter and the cache in memory "
                    "(one replica only).",
                    code="redis_unavailable",
                )
            )
        finally:
            await redis.aclose()
    return problems


async def schema_problem(settings: Settings, *, timeout_s: float = 10.0) -> PmsgateError | None:
    """Why this release cannot run on the database's schema as it is, or None.

    Checked by `serve` before it starts when it does not migrate (PMSGATE_MIGRATE_ON_START
    off): a schema older than this release (``schema_outdated``: run `pmsgate db upgrade`),
    or newer with a migration not marked backward compatible (``schema_incompatible``).
    Never changes the database.
    """
    # Imported here: `pmsgate --help` and the light commands do not load the whole stack.
    from pmsgate.container import SchemaError, prepare_database
    from pmsgate.storage.db import open_database

    try:
        async with asyncio.timeout(timeout_s):
            async with open_database(settings.effective_database_url, migrate=False) as engine:
                await prepare_database(engine, migrate=False)
    except SchemaError as error:
        return error
    except Exception as error:  # reachable a moment ago (dependency_problems): say which kind
        return database_unavailable(error)
    return None


def run_on_container(
    work: Callable[[Container], Awaitable[T]], upstreams: Upstreams | None = None
) -> T:
    """Run ``work`` on the command's container (:func:`open_cli_container`, with the group's
    ``upstreams``); a service error ends the command with exit status 2 (:func:`run`)."""

    async def _go() -> T:
        async with open_cli_container(upstreams) as container:
            return await work(container)

    return run(_go())


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
    from pmsgate.integrations.assistant.errors import AssistantError
    from pmsgate.integrations.notion.errors import NotionError

    leaves = exception_leaves(group)
    for leaf in leaves:
        if isinstance(leaf, PmsgateError):
            return leaf
    for leaf in leaves:
        if isinstance(leaf, AssistantError | NotionError):
            return upstream_error(leaf, "running the command")
    for leaf in leaves:
        if not isinstance(leaf, Exception):
            raise leaf
    kinds = ", ".join(sorted({type(leaf).__name__ for leaf in leaves})) or "unknown"
    return PmsgateError(f"The command failed unexpectedly ({kinds}).")
