"""Console accounts from day one: invitations and password resets by one-time link.

Onboarding (step 16) creates the customer's console account — role customer, bound to
the customer, no password yet — and sends an **invitation**: an e-mail in the customer's
language with a one-time link whose page lets them choose a password and signs them in.
"Forgot password?" on the sign-in page sends the same kind of link (purpose ``reset``)
to an existing account, and an admin can send a new invitation from the customer's page
or with ``pmsgate users invite``. Each link is a single-use
:class:`~pmsgate.web.users.UserService` link (only its SHA-256 stored), valid for
``PMSGATE_INVITATION_TTL_S`` (invitation) or ``PMSGATE_LOGIN_LINK_TTL_S`` (reset).

Onboarding invites an account only once (``users.invited_at``): a second run sends
nothing. Every message is recorded in the outbox (``invitation-…`` / ``reset-…``) and
every sending in the audit trail (``account.invited``, ``account.reset_requested``);
the link itself is never logged or audited.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parseaddr
from typing import Literal

import structlog

from pmsgate import mail
from pmsgate.audit.actions import Actor, AuditAction
from pmsgate.audit.trail import AuditTrail
from pmsgate.clock import Clock
from pmsgate.config import Settings
from pmsgate.customers.context import CustomerServices
from pmsgate.errors import ConfigurationError
from pmsgate.web.invitation_mail import invitation_message
from pmsgate.web.users import UserService, UserView

log = structlog.get_logger(__name__)

Purpose = Literal["invite", "reset"]
# Where a used invitation or reset link leads: the console (a customer's own page).
LANDING = "/console"


@dataclass(frozen=True)
class AccountState:
    """A customer's console account as onboarding reports it (never a link or password)."""

    email: str
    exists: bool
    created: bool = False  # created by this call
    invited_at: datetime | None = None
    password_set: bool = False
    invitation_sent: bool = False  # sent by this call

    @property
    def ready(self) -> bool:
        """The customer can sign in, or has the invitation to choose a password."""
        return self.exists and (self.password_set or self.invited_at is not None)


def _state(account: UserView, *, created: bool = False, sent: bool = False) -> AccountState:
    return AccountState(
        email=account.email,
        exists=True,
        created=created,
        invited_at=account.invited_at,
        password_set=account.password_set,
        invitation_sent=sent,
    )


def no_console_address() -> ConfigurationError:
    """The refusal when a link cannot be written for lack of the console's address."""
    return ConfigurationError(
        "The console's public address is not configured: the e-mail could not carry a link.",
        code="public_url_missing",
        hint="Set PMSGATE_PUBLIC_URL to the console's address (see `pmsgate doctor`).",
    )


@dataclass(frozen=True, kw_only=True, repr=False)
class Invitations:
    """Creates customers' console accounts and sends their one-time set-password links."""

    users: UserService
    customers: CustomerServices
    audit: AuditTrail
    settings: Settings
    clock: Clock

    async def state(self, student_id: str, email: str) -> AccountState:
        """The account of ``email``, as far as it is this customer's."""
        account = await self.users.account(email)
        if account is None or account.student_id != student_id:
            return AccountState(email=email.strip().lower(), exists=False)
        return _state(account)

    async def ensure_invited(self, student_id: str, email: str) -> AccountState:
        """Onboarding's part: the account exists, and was invited once (never twice)."""
        account, created = await self.users.ensure_customer_account(student_id, email)
        if account.invited_at is not None or account.password_set:
            return _state(account, created=created)
        await self.send(account, "invite", actor=Actor.system("onboarding"))
        refreshed = await self.users.account(account.email)
        return _state(refreshed or account, created=created, sent=True)

    async def send(self, account: UserView, purpose: Purpose, *, actor: Actor) -> datetime:
        """A new one-time link for ``account``, e-mailed in its customer's language.

        The link's expiry is returned. :class:`ConfigurationError` ``public_url_missing``
        when no console address is configured (nothing is sent, no link is made).
        """
        base = self.settings.console_url
        if base is None:
            raise no_console_address()
        ttl = timedelta(
            seconds=self.settings.invitation_ttl_s
            if purpose == "invite"
            else self.settings.login_link_ttl_s
        )
        issued = await self.users.issue_link(account.id, purpose=purpose, target=LANDING, ttl=ttl)
        customer = (
            await self.customers.customers.find(account.student_id)
            if account.student_id is not None
            else None
        )
        now = self.clock.now()
        domain = parseaddr(self.settings.mail_from)[1].rpartition("@")[2] or "localhost"
        # Unique even for two sendings in one instant: each is its own message and record.
        tag = f"{purpose}.{account.id}.{now:%Y%m%dT%H%M%S}.{secrets.token_hex(4)}"
        message = invitation_message(
            purpose=purpose,
            to=account.email,
            customer_name=customer.name if customer is not None else account.email,
            link_url=f"{base}/login/link/{issued.token}",
            expires_at=issued.expires_at,
            console_url=base,
            brand_name=self.settings.brand_name,
            brand_colour=self.settings.brand_colour,
            mail_from=self.settings.mail_from,
            language=(customer.language if customer is not None else None) or "it",
            timezone=(customer.timezone if customer is not None else None) or "Europe/Rome",
            sent_at=now,
            message_id=f"<{tag}@{domain}>",
            support_email=self.settings.support_email,
        )
        record = mail.outbox_dir(self.settings) / f"{mail.safe_filename(tag)}.eml"
        transport = await mail.deliver(
            self.settings,
            message,
            record,
            what="The invitation" if purpose == "invite" else "The password reset",
        )
        await self.audit.record(
            AuditAction.ACCOUNT_INVITED if purpose == "invite" else AuditAction.PASSWORD_RESET_SENT,
            actor=actor,
            subject=f"user:{account.email}",
            details={"transport": transport, "expires_at": issued.expires_at.isoformat()},
            student_id=account.student_id,
        )
        log.info("web_account_link_sent", user_id=account.id, purpose=purpose, transport=transport)
        return issued.expires_at
