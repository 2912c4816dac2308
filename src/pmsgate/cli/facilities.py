"""`pmsgate facilities …` and `pmsgate secrets …`: facilities, gateway keys and vault keys.

Secrets never travel as command-line flags that end up in shell history and
the process list: the API password comes from one line of standard input
(``--password-stdin``) or a hidden prompt. An own facility's api key is less
sensitive (it only works together with the password) but still secret: it is
read from standard input (``--api-key-stdin``) or a hidden prompt. The stdin rule:
with both ``--password-stdin`` and ``--api-key-stdin`` the first line is the
password and the second the api key; with one of them, its secret is the first
line (the other secret then comes from its prompt or flag). Both lines are read
through one reader, and neither is ever echoed. ``--api-key`` is accepted for
convenience with a warning in its help. ``--json`` prints exactly one JSON object
on standard output; the raw gateway key appears only in the output of ``add``,
``mint-key`` and ``rotate-key``. Keys carry scopes (``--scope``, repeatable;
``--all-scopes`` for every one; default ``tools:read``) and may expire
(``--expires-in 30d``); docs/gateway.md, Scopes. Errors print
``error <code>: <message>`` and a hint on standard error and exit with status 2.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from pydantic import BaseModel, SecretStr
from rich.markup import escape
from rich.table import Table

from pmsgate.audit.actions import Actor
from pmsgate.cli.support import (
    JsonOption,
    Upstreams,
    command_group,
    console,
    err_console,
    fail,
    run_on_container,
)
from pmsgate.customers.reconnect import reconnect_facility
from pmsgate.errors import InvalidInput, PmsgateError
from pmsgate.gateway.facilities import FacilityView, KeyView, Limits, NewFacility
from pmsgate.gateway.facility_service import FacilityService
from pmsgate.gateway.keys import parse_duration
from pmsgate.gateway.scopes import DEFAULT_SCOPES, all_scopes, check_scopes
from pmsgate.gateway.vault import generate_key_spec

if TYPE_CHECKING:
    from pmsgate.container import Container

T = TypeVar("T")

facilities_app = command_group("Facilities: booking-system credentials, limits and gateway keys.")
secrets_app = command_group(
    "Vault keys (PMSGATE_SECRET_KEYS): generate one, re-encrypt under the first."
)


PasswordStdin = Annotated[
    bool,
    typer.Option(
        "--password-stdin",
        help="Read the API password from the first line of standard input (else: hidden "
        "prompt). With --api-key-stdin too: line 1 the password, line 2 the api key.",
    ),
]
ApiKeyStdin = Annotated[
    bool,
    typer.Option(
        "--api-key-stdin",
        help="Read the own api key from the first line of standard input (the second "
        "line when --password-stdin is also given: line 1 the password, line 2 the api key).",
    ),
]
ApiKeyFlag = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        help="The own api key as a flag. Visible in the process list and shell history: "
        "prefer --api-key-stdin or the prompt.",
    ),
]
HotelId = Annotated[str, typer.Argument(help="The facility's numeric hotel_id.")]
ScopeOption = Annotated[
    list[str] | None,
    typer.Option(
        "--scope",
        help="A scope of the key (repeatable): tools:read, operations:read, "
        "operations:write:<operation>. Default: tools:read.",
    ),
]
AllScopesOption = Annotated[
    bool,
    typer.Option("--all-scopes", help="Every scope: the six tools, every read and every write."),
]
ExpiresIn = Annotated[
    str | None,
    typer.Option("--expires-in", help="The key stops working after this long: 30d, 12h, 90m."),
]
KeyIdArgument = Annotated[int, typer.Argument(help="The key's id (see `facilities show`).")]
NoVerify = Annotated[
    bool,
    typer.Option(
        "--no-verify",
        help="Store without trying the credentials (offline set-up): status unverified "
        "until the first call settles it (connected, or error when refused).",
    ),
]


def _actor(command: str) -> Actor:
    """The audit trail's actor of a `pmsgate facilities …` command."""
    return Actor.cli(f"pmsgate facilities {command}")


def _status_text(status: str) -> str:
    """A facility status as the tables show it: unverified in yellow, error in red."""
    colour = {"connected": "green", "unverified": "yellow"}.get(status, "red")
    return f"[{colour}]{escape(status)}[/]"


def _scopes(scope: list[str] | None, all_of_them: bool, default: tuple[str, ...]) -> list[str]:
    """The scopes asked for, checked before anything else is read (exit 2 on an unknown one)."""
    if all_of_them and scope:
        raise fail(
            InvalidInput(
                "--all-scopes and --scope exclude each other.",
                code="invalid_scope",
                hint="Give either --all-scopes or one --scope per scope.",
            )
        )
    if all_of_them:
        return list(all_scopes())
    try:
        return check_scopes(scope or default)
    except PmsgateError as error:
        raise fail(error) from None


def _duration(text: str, option: str) -> timedelta:
    try:
        return parse_duration(text, option=option)
    except PmsgateError as error:
        raise fail(error) from None


def _when(value: datetime | None) -> str:
    return value.isoformat() if value else ""


# --- plumbing ---------------------------------------------------------------------------


# How the commands reach the upstreams: real clients by default; tests set the emulators'.
upstreams = Upstreams()


def _with_container(work: Callable[[Container], Awaitable[T]]) -> T:
    return run_on_container(work, upstreams)


def _with_service(work: Callable[[FacilityService], Awaitable[T]]) -> T:
    return run_on_container(lambda container: work(container.gateway.facilities), upstreams)


def _print_json(payload: dict[str, Any]) -> None:
    typer.echo(json.dumps(payload, ensure_ascii=False))


def _answered_in_json(json_output: bool, payload: dict[str, Any]) -> bool:
    """With --json, print ``payload`` as the command's one JSON object; whether it did."""
    if json_output:
        _print_json(payload)
    return json_output


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json")


STDIN_RULE = (
    "With --password-stdin and --api-key-stdin, standard input holds the password on its "
    "first line and the api key on its second; with one of them, that secret on its first line."
)


class _Stdin:
    """Standard input, read line by line through one stream for the whole command.

    ``typer.get_text_stream("stdin")`` may wrap the binary stream in a new reader on each
    call (it does whenever ``sys.stdin`` is not strict UTF-8, e.g. ``surrogateescape``
    under a C locale); the first reader buffers every piped line, so a second reader
    would find nothing. Lines are secrets: never echoed.
    """

    def __init__(self) -> None:
        self._stream: Any = None

    def line(self) -> str | None:
        """The next line without its line break; None at the end of the input."""
        if self._stream is None:
            self._stream = typer.get_text_stream("stdin")
        line: str = self._stream.readline()
        return line.rstrip("\r\n") if line else None


def _read_password(from_stdin: bool, stdin: _Stdin) -> SecretStr:
    if from_stdin:
        # An empty or missing line is the service's missing_password.
        return SecretStr(stdin.line() or "")
    # Prompts go to stderr so that stdout stays exactly the (JSON) answer.
    return SecretStr(
        typer.prompt("API password", hide_input=True, default="", show_default=False, err=True)
    )


def _read_api_key(
    flag: str | None, from_stdin: bool, stdin: _Stdin, *, prompt: bool
) -> SecretStr | None:
    if flag is not None and from_stdin:
        raise fail(
            InvalidInput(
                "Give the api key either with --api-key or with --api-key-stdin, not both.",
                code="conflicting_options",
            )
        )
    if flag is not None:
        return SecretStr(flag)
    if from_stdin:
        line = stdin.line()
        if not line:
            raise fail(
                InvalidInput(
                    "No api key on standard input.", code="missing_api_key", hint=STDIN_RULE
                )
            )
        return SecretStr(line)
    if prompt:
        return SecretStr(typer.prompt("Api key", hide_input=True, err=True))
    return None


def _limits_text(limits: Limits) -> str:
    return f"{limits.per_minute}/min, {limits.per_hour}/h, {limits.per_day}/day"


def _facility_table(view: FacilityView) -> Table:
    table = Table(show_header=False, box=None, title=f"Facility {view.hotel_id}")
    table.add_column(style="bold")
    table.add_column()
    rows = {
        "hotel_id": view.hotel_id,
        "name": view.name,
        "kind": view.kind,
        "username": view.username,
        "integration_id": view.integration_id,
        "status": _status_text(view.status),
        "last_error": view.last_error or "",
        "last auth attempt": view.last_auth_attempt_at.isoformat()
        if view.last_auth_attempt_at
        else "",
        "limits": _limits_text(view.limits),
        "created": view.created_at.isoformat(),
        "updated": view.updated_at.isoformat(),
    }
    for field, value in rows.items():
        table.add_row(field, value if field == "status" else escape(value))
    return table


def _keys_table(keys: list[KeyView]) -> Table:
    table = Table(title="Gateway keys")
    columns = ("id", "prefix", "label", "state", "scopes", "created", "expires", "last used")
    for column in columns:
        table.add_column(column)
    now = datetime.now().astimezone()
    for key in keys:
        table.add_row(
            str(key.id),
            escape(key.prefix) + "…",
            escape(key.label),
            key.state(now),
            escape("\n".join(key.scopes)),
            key.created_at.isoformat(),
            _when(key.expires_at),
            _when(key.last_used_at),
        )
    return table


def _show_new_key(raw_key: str) -> None:
    console.print("[bold]Gateway key[/] (shown only now; store it in the workspace secrets):")
    console.print(raw_key, markup=False, soft_wrap=True)


# --- facilities -------------------------------------------------------------------------


@facilities_app.command("add")
def add(
    hotel_id: Annotated[str, typer.Option("--hotel-id", help="Numeric hotel_id.")],
    username: Annotated[str, typer.Option(help="The API user, apiNNNNN (not an e-mail).")],
    kind: Annotated[str, typer.Option(help="partner (shared api key) or own (own api key).")],
    integration_id: Annotated[
        str, typer.Option("--integration-id", help="Id of the PMS integration row.")
    ],
    name: Annotated[str, typer.Option(help="A human-readable name.")] = "",
    per_minute: Annotated[int, typer.Option(help="Upstream calls per minute.")] = 10,
    per_hour: Annotated[int, typer.Option(help="Upstream calls per hour.")] = 300,
    per_day: Annotated[int, typer.Option(help="Upstream calls per day.")] = 5000,
    password_stdin: PasswordStdin = False,
    api_key: ApiKeyFlag = None,
    api_key_stdin: ApiKeyStdin = False,
    scope: ScopeOption = None,
    all_scopes_: AllScopesOption = False,
    no_verify: NoVerify = False,
    json_output: JsonOption = False,
) -> None:
    """Register a facility and print its first gateway key (shown only once).

    The credentials are tried first (one token request, within the facility's limits):
    refused or not tried, nothing is stored (exit 2). --no-verify stores it unverified.
    The key holds tools:read unless --scope or --all-scopes say otherwise.
    """
    scopes = _scopes(scope, all_scopes_, DEFAULT_SCOPES)
    stdin = _Stdin()
    password = _read_password(password_stdin, stdin)
    own_key = _read_api_key(api_key, api_key_stdin, stdin, prompt=kind == "own")

    async def work(container: Container) -> tuple[FacilityView, str]:
        new = NewFacility(
            hotel_id=hotel_id,
            username=username,
            password=password,
            kind=kind,
            api_key=own_key,
            integration_id=integration_id,
            name=name,
            limits=Limits(per_minute=per_minute, per_hour=per_hour, per_day=per_day),
            scopes=scopes,
        )
        return await container.gateway.gateway.add_facility(
            new, verify=not no_verify, actor=_actor("add")
        )

    view, raw_key = _with_container(work)
    if _answered_in_json(json_output, {"facility": _dump(view), "gateway_key": raw_key}):
        return
    console.print(_facility_table(view))
    if view.status == "unverified":
        err_console.print(
            "[yellow]The credentials were not tried[/]: the facility's first call settles it "
            "(connected, or error when the booking system refuses them)."
        )
    _show_new_key(raw_key)


@facilities_app.command("list")
def list_facilities(json_output: JsonOption = False) -> None:
    """List the registered facilities."""

    async def work(service: FacilityService) -> list[FacilityView]:
        return await service.list()

    views = _with_service(work)
    if _answered_in_json(json_output, {"facilities": [_dump(view) for view in views]}):
        return
    table = Table(title=f"Facilities ({len(views)})")
    for column in ("hotel_id", "name", "kind", "username", "status", "limits", "integration"):
        table.add_column(column, no_wrap=column in ("hotel_id", "limits"))
    for view in views:
        table.add_row(
            view.hotel_id,
            escape(view.name),
            view.kind,
            escape(view.username),
            _status_text(view.status),
            _limits_text(view.limits),
            escape(view.integration_id),
        )
    console.print(table)


@facilities_app.command("show")
def show(hotel_id: HotelId, json_output: JsonOption = False) -> None:
    """Show one facility and its gateway keys (prefixes only)."""

    async def work(service: FacilityService) -> tuple[FacilityView, list[KeyView]]:
        return await service.get(hotel_id), await service.list_keys(hotel_id)

    view, keys = _with_service(work)
    if _answered_in_json(
        json_output, {"facility": _dump(view), "keys": [_dump(key) for key in keys]}
    ):
        return
    console.print(_facility_table(view))
    console.print(_keys_table(keys))


@facilities_app.command("set-limits")
def set_limits(
    hotel_id: HotelId,
    per_minute: Annotated[int | None, typer.Option(help="Calls per minute.")] = None,
    per_hour: Annotated[int | None, typer.Option(help="Calls per hour.")] = None,
    per_day: Annotated[int | None, typer.Option(help="Calls per day.")] = None,
    json_output: JsonOption = False,
) -> None:
    """Change a facility's upstream budget; windows not given keep their value."""

    async def work(service: FacilityService) -> FacilityView:
        current = (await service.get(hotel_id)).limits
        limits = Limits(
            per_minute=current.per_minute if per_minute is None else per_minute,
            per_hour=current.per_hour if per_hour is None else per_hour,
            per_day=current.per_day if per_day is None else per_day,
        )
        return await service.set_limits(hotel_id, limits)

    view = _with_service(work)
    if _answered_in_json(json_output, {"facility": _dump(view)}):
        return
    console.print(f"Limits of {view.hotel_id}: {_limits_text(view.limits)}")


@facilities_app.command("mint-key")
def mint_key(
    hotel_id: HotelId,
    label: Annotated[str, typer.Option(help="What the key is for.")] = "",
    scope: ScopeOption = None,
    all_scopes_: AllScopesOption = False,
    expires_in: ExpiresIn = None,
    json_output: JsonOption = False,
) -> None:
    """Create another gateway key for a facility (shown only once); default scope tools:read."""
    scopes = _scopes(scope, all_scopes_, DEFAULT_SCOPES)
    lifetime = _duration(expires_in, "--expires-in") if expires_in is not None else None

    async def work(service: FacilityService) -> tuple[KeyView, str]:
        expires_at = service.now() + lifetime if lifetime is not None else None
        return await service.mint_key(
            hotel_id, label, scopes=scopes, expires_at=expires_at, actor=_actor("mint-key")
        )

    view, raw_key = _with_service(work)
    if _answered_in_json(json_output, {"key": _dump(view), "gateway_key": raw_key}):
        return
    console.print(
        f"Key {view.id} ({escape(view.prefix)}…) for facility {view.facility_hotel_id}, "
        f"scopes {escape(', '.join(view.scopes))}"
        + (f", expires {view.expires_at.isoformat()}." if view.expires_at else ".")
    )
    _show_new_key(raw_key)


@facilities_app.command("grant-scopes")
def grant_scopes(
    hotel_id: HotelId,
    key_id: KeyIdArgument,
    scope: ScopeOption = None,
    all_scopes_: AllScopesOption = False,
    replace: Annotated[
        bool,
        typer.Option("--replace", help="Set exactly these scopes (narrowing the key)."),
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Widen an existing key's scopes (--all-scopes: its power before scopes existed).

    Keys minted before scopes existed hold only tools:read until an admin runs this.
    """
    if not scope and not all_scopes_:
        raise fail(
            InvalidInput(
                "Say which scopes to grant.",
                code="invalid_scope",
                hint="Give --scope SCOPE (repeatable) or --all-scopes.",
            )
        )
    scopes = _scopes(scope, all_scopes_, ())

    async def work(service: FacilityService) -> KeyView:
        return await service.set_key_scopes(
            hotel_id, key_id, scopes, add=not replace, actor=_actor("grant-scopes")
        )

    view = _with_service(work)
    if _answered_in_json(json_output, {"key": _dump(view)}):
        return
    console.print(
        f"Key {view.id} ({escape(view.prefix)}…) of {view.facility_hotel_id} now holds: "
        f"{escape(', '.join(view.scopes))}."
    )


@facilities_app.command("rotate-key")
def rotate_key(
    hotel_id: HotelId,
    key_id: Annotated[
        int | None,
        typer.Argument(help="The key to replace; may be left out when only one key works."),
    ] = None,
    grace: Annotated[
        str,
        typer.Option(help="How long the old key keeps working (both work meanwhile): 7d, 12h."),
    ] = "7d",
    json_output: JsonOption = False,
) -> None:
    """Mint a key with the same scopes; the old one expires after the grace period."""
    period = _duration(grace, "--grace")

    async def work(service: FacilityService) -> tuple[KeyView, KeyView, str]:
        chosen = key_id if key_id is not None else await _only_working_key(service, hotel_id)
        return await service.rotate_key(hotel_id, chosen, period, actor=_actor("rotate-key"))

    old, new, raw_key = _with_service(work)
    if _answered_in_json(
        json_output, {"old_key": _dump(old), "key": _dump(new), "gateway_key": raw_key}
    ):
        return
    console.print(
        f"Key {new.id} ({escape(new.prefix)}…) replaces key {old.id} ({escape(old.prefix)}…), "
        f"which works until {_when(old.expires_at)}."
    )
    _show_new_key(raw_key)


async def _only_working_key(service: FacilityService, hotel_id: str) -> int:
    now = service.now()
    working = [key for key in await service.list_keys(hotel_id) if key.state(now) == "active"]
    if len(working) != 1:
        raise InvalidInput(
            f"Facility {hotel_id} has {len(working)} working keys; say which one to rotate.",
            code="gateway_key_ambiguous",
            hint=f"Find its id with `pmsgate facilities show {hotel_id}`, then "
            f"`pmsgate facilities rotate-key {hotel_id} KEY_ID`.",
        )
    return working[0].id


@facilities_app.command("revoke-key")
def revoke_key(
    hotel_id: HotelId,
    key_id: KeyIdArgument,
    json_output: JsonOption = False,
) -> None:
    """Revoke a gateway key; calls with it are refused from now on."""

    async def work(service: FacilityService) -> KeyView:
        return await service.revoke_key(hotel_id, key_id, actor=_actor("revoke-key"))

    view = _with_service(work)
    if _answered_in_json(json_output, {"key": _dump(view)}):
        return
    console.print(f"Key {view.id} ({escape(view.prefix)}…) of {view.facility_hotel_id} revoked.")


@facilities_app.command("reconnect")
def reconnect(
    hotel_id: HotelId,
    username: Annotated[
        str | None, typer.Option(help="The API user (apiNNNNN); default: the stored one.")
    ] = None,
    password_stdin: PasswordStdin = False,
    api_key: ApiKeyFlag = None,
    api_key_stdin: ApiKeyStdin = False,
    json_output: JsonOption = False,
) -> None:
    """Replace a facility's credentials after the booking system accepted them.

    An own facility keeps its stored api key unless a new one is given.
    """
    stdin = _Stdin()
    password = _read_password(password_stdin, stdin)
    new_key = _read_api_key(api_key, api_key_stdin, stdin, prompt=False)

    async def work(container: Container) -> FacilityView:
        facilities = container.gateway.facilities
        user = username if username is not None else (await facilities.get(hotel_id)).username
        # The one reconnect path (the admin API's and the web app's too).
        reconnected = await reconnect_facility(
            container.customers,
            container.gateway,
            hotel_id,
            username=user,
            password=password,
            api_key=new_key,
            actor=_actor("reconnect"),
        )
        return reconnected.facility

    view = _with_container(work)
    if _answered_in_json(json_output, {"facility": _dump(view)}):
        return
    console.print(f"Facility {view.hotel_id} reconnected: status [green]{view.status}[/].")


# --- secrets ----------------------------------------------------------------------------


@secrets_app.command("generate-key")
def generate_key(
    key_id: Annotated[
        str | None, typer.Option("--key-id", help="Letters and digits; default: random.")
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """Print a new vault key entry (`id:base64key`) for PMSGATE_SECRET_KEYS."""
    if key_id is not None and not key_id.isalnum():
        raise fail(
            InvalidInput(
                "The key id must be letters and digits only.",
                code="invalid_key_id",
                hint="Leave --key-id out for a random one.",
            )
        )
    spec = generate_key_spec(key_id)
    if _answered_in_json(json_output, {"key_spec": spec}):
        return
    # Only the entry on stdout, so it can be captured; the advice goes to stderr.
    typer.echo(spec)
    err_console.print(
        "Put it first in PMSGATE_SECRET_KEYS, keep the old keys after it, "
        "then run `pmsgate secrets rotate`."
    )


@secrets_app.command("rotate")
def rotate(json_output: JsonOption = False) -> None:
    """Re-encrypt every stored secret under the first key of PMSGATE_SECRET_KEYS."""

    async def work(service: FacilityService) -> int:
        return await service.rotate_secrets()

    changed = _with_service(work)
    if _answered_in_json(json_output, {"rotated": changed}):
        return
    console.print(
        f"{changed} secret(s) re-encrypted under the first key; the older keys can now be "
        "removed from PMSGATE_SECRET_KEYS."
    )
