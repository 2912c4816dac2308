"""`pmsgate users …`: the web console's accounts (customers' and platform admins').

A password never travels as a flag (shell history, process list): it comes from one
line of standard input (``--password-stdin``) or a hidden prompt asked twice, and no
command ever prints it. Errors print ``error <code>: <message>`` and a hint on standard
error and exit with status 2.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any, TypeVar

import typer
from pydantic import SecretStr
from rich.markup import escape
from rich.table import Table

from pmsgate.audit.actions import Actor
from pmsgate.cli.support import command_group, console, open_cli_container, run, run_on_container
from pmsgate.customers.checks import customer_not_found
from pmsgate.errors import ConfigurationError
from pmsgate.web.sign_in_locks import unlock_sign_ins
from pmsgate.web.users import UserService, UserView

T = TypeVar("T")

users_app = command_group("Web console accounts: add, list, remove, set passwords.")


PasswordStdin = Annotated[
    bool,
    typer.Option(
        "--password-stdin",
        help="Read the password from the first line of standard input (else: hidden prompt, "
        "asked twice).",
    ),
]
Email = Annotated[str, typer.Argument(help="The account's e-mail address.")]


def _with_users(work: Callable[[UserService], Awaitable[T]]) -> T:
    return run_on_container(lambda container: work(container.web.users))


def _read_password(from_stdin: bool) -> SecretStr:
    if from_stdin:
        # Only the line ending goes: spaces may be part of a passphrase.
        return SecretStr(typer.get_text_stream("stdin").readline().rstrip("\r\n"))
    # Prompts go to stderr so that stdout stays exactly the answer.
    return SecretStr(typer.prompt("Password", hide_input=True, confirmation_prompt=True, err=True))


def _plain(view: UserView) -> dict[str, Any]:
    def when(value: datetime | None) -> str | None:
        return None if value is None else value.isoformat()

    return {
        "id": view.id,
        "email": view.email,
        "role": view.role,
        "student_id": view.student_id,
        "created_at": when(view.created_at),
        "last_login_at": when(view.last_login_at),
        "invited_at": when(view.invited_at),
        "password_set": view.password_set,
    }


@users_app.command("add")
def add(
    email: Annotated[str, typer.Option(help="The account's e-mail address (its login).")],
    role: Annotated[str, typer.Option(help="`customer` (sees its own customer) or `admin`.")],
    student_id: Annotated[
        str | None, typer.Option(help="The customer's student_id (role customer only).")
    ] = None,
    password_stdin: PasswordStdin = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object on standard output.")
    ] = False,
) -> None:
    """Create a console account (the password is stored as an argon2id hash only)."""
    password = _read_password(password_stdin)
    view = _with_users(lambda users: users.add(email, password, role=role, student_id=student_id))
    if as_json:
        typer.echo(json.dumps({"user": _plain(view)}))
        return
    owner = f" for customer {escape(view.student_id)}" if view.student_id else ""
    console.print(f"user {escape(view.email)} added: {view.role}{owner} (id {view.id})")


@users_app.command("list")
def list_users(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object on standard output.")
    ] = False,
) -> None:
    """Every console account with its role, customer and last sign-in."""
    views = _with_users(lambda users: users.list())
    if as_json:
        typer.echo(json.dumps({"users": [_plain(view) for view in views]}))
        return
    table = Table(title="Console users")
    for column in ("id", "email", "role", "student_id", "created", "password", "last sign-in"):
        table.add_column(column)
    for view in views:
        if view.password_set:
            password = "set"
        elif view.invited_at is not None:
            password = f"invited {view.invited_at.isoformat(timespec='seconds')}"
        else:
            password = "not set"
        table.add_row(
            str(view.id),
            escape(view.email),
            view.role,
            escape(view.student_id or ""),
            view.created_at.isoformat(timespec="seconds"),
            password,
            view.last_login_at.isoformat(timespec="seconds") if view.last_login_at else "never",
        )
    console.print(table)


@users_app.command("remove")
def remove(email: Email) -> None:
    """Delete an account and end all its sessions."""
    _with_users(lambda users: users.remove(email))
    console.print(f"user {escape(email.strip().lower())} removed; its sessions are ended")


@users_app.command("set-password")
def set_password(email: Email, password_stdin: PasswordStdin = False) -> None:
    """Give an account a new password and end all its sessions."""
    password = _read_password(password_stdin)
    _with_users(lambda users: users.set_password(email, password))
    console.print(f"password of {escape(email.strip().lower())} changed; its sessions are ended")


@users_app.command("invite")
def invite(
    student_id: Annotated[str, typer.Argument(help="The customer's student_id.")],
    email: Annotated[
        str | None,
        typer.Option(help="The account's address (default: the customer record's e-mail)."),
    ] = None,
) -> None:
    """Send a customer's console account a new invitation (creating the account if absent).

    The invitation is a one-time link to choose a password, e-mailed in the customer's
    language (recorded in the outbox); an earlier unused one keeps working until it
    expires. Needs PMSGATE_PUBLIC_URL (the console's address) for the link.
    """

    async def _go() -> tuple[str, datetime]:
        async with open_cli_container() as container:
            web = container.web
            customer = await web.customers.customers.find(student_id)
            if customer is None:
                raise customer_not_found(student_id)
            account, _ = await web.users.ensure_customer_account(
                student_id, email or customer.email
            )
            expires = await web.invitations.send(
                account, "invite", actor=Actor.cli("pmsgate users invite")
            )
            return account.email, expires

    address, expires = run(_go())
    console.print(
        f"invitation sent to {escape(address)}; its link works once, until "
        f"{expires.isoformat(timespec='minutes')}"
    )


@users_app.command("unlock")
def unlock(
    email: Annotated[
        str | None, typer.Argument(help="The account to unlock (from every address).")
    ] = None,
    address: Annotated[
        str | None,
        typer.Option("--address", help="A client address to unlock (for every account)."),
    ] = None,
) -> None:
    """Lift a sign-in pause after too many wrong passwords (an account, an address or both).

    A pause ends by itself after PMSGATE_LOGIN_FAILURE_WINDOW_S; this ends it now, on every
    replica. Recorded in the audit trail (``signin.unlocked``).
    """

    async def _go() -> int:
        async with open_cli_container() as container:
            if container.gateway.redis is None:
                # Without Redis each process counts in its own memory: this one holds nothing.
                raise ConfigurationError(
                    "Without Redis the server counts failed sign-ins in its own memory, which "
                    "this command cannot reach.",
                    code="unlock_needs_shared_state",
                    hint="Unlock from the console (Sign-in locks), or set PMSGATE_REDIS_URL.",
                )
            done = await unlock_sign_ins(
                container.web,
                email=email or "",
                address=address or "",
                actor=Actor.cli("pmsgate users unlock"),
            )
            return done.windows

    windows = run(_go())
    what = " and ".join(
        part
        for part in (
            escape(email.strip().lower()) if email else "",
            f"address {escape(address.strip())}" if address else "",
        )
        if part
    )
    console.print(f"signing in unlocked for {what} ({windows} counting window(s) emptied)")
