"""Lifting sign-in pauses: one door for the console's "Sign-in locks" and `pmsgate users unlock`.

A pause (:class:`~pmsgate.web.users.TooManyLoginAttempts`) ends by itself when its window
passes; an admin may end it sooner, for an account (from every address) or for a client
address (for every account). Either way the unlock is in the audit trail
(``signin.unlocked``, the admin or the CLI as actor), next to the ``signin.locked`` event
that the pause began with.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import datetime, timedelta

from pmsgate.audit.actions import Actor, AuditAction
from pmsgate.errors import InvalidInput
from pmsgate.storage.audit import AuditFilter
from pmsgate.web.context import WebServices
from pmsgate.web.users import normalise_email

# How many recent pauses the console page lists.
RECENT_LOCKS = 50


@dataclass(frozen=True)
class Unlocked:
    """What an unlock lifted: the account and/or the address, and how many windows it emptied."""

    email: str | None
    address: str | None
    windows: int


def _address(value: str) -> str:
    try:
        return str(ipaddress.ip_address(value.strip()))
    except ValueError:
        raise InvalidInput(
            f"{value.strip()[:64]!r} is not an IP address.",
            code="invalid_address",
            hint="Type the client address as the audit trail shows it, e.g. 203.0.113.7.",
        ) from None


async def unlock_sign_ins(
    web: WebServices, *, email: str = "", address: str = "", actor: Actor
) -> Unlocked:
    """Lift the sign-in pauses of an account and/or an address (at least one); audited."""
    account = normalise_email(email) if email.strip() else None
    client = _address(address) if address.strip() else None
    if account is None and client is None:
        raise InvalidInput(
            "Say which account or which address to unlock.",
            code="unlock_target_required",
            hint="Type the account's e-mail address, or the client address, or both.",
        )
    windows = await web.users.unlock(email=account, client=client)
    known = await web.users.account(account) if account is not None else None
    await web.audit.record(
        AuditAction.SIGNIN_UNLOCKED,
        actor=actor,
        subject=f"user:{account}" if account is not None else f"address:{client}",
        details={"account": account, "address": client, "windows": windows},
        student_id=known.student_id if known is not None else None,
    )
    return Unlocked(email=account, address=client, windows=windows)


@dataclass(frozen=True)
class RecentLock:
    """A pause that began within the current window (from its ``signin.locked`` event)."""

    at: datetime
    account: str | None
    address: str | None
    scopes: list[str]


async def recent_locks(web: WebServices) -> list[RecentLock]:
    """The pauses that began within the last window, newest first (they may still hold)."""
    since = web.clock.now() - timedelta(seconds=web.settings.login_failure_window_s)
    found = await web.audit.page(
        AuditFilter(since=since, action_prefix=AuditAction.SIGNIN_LOCKED.value),
        limit=RECENT_LOCKS,
    )
    locks = []
    for event in found.events:
        subject = event.subject.removeprefix("user:")
        locks.append(
            RecentLock(
                at=event.occurred_at,
                account=subject if "@" in subject else None,
                address=event.client_address,
                scopes=list((event.details or {}).get("scopes") or []),
            )
        )
    return locks
