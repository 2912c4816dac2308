"""The customer's console account, as onboarding needs it (step 16).

Onboarding creates the customer's console account and sends its invitation before the
onboarding message, which tells the customer how to sign in. The accounts live in the
web application (:class:`pmsgate.web.invitations.Invitations`), a layer above this one:
the composition root hands onboarding an object with this shape.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol


class AccountState(Protocol):
    """What onboarding reports of the account (never a link or a password)."""

    @property
    def email(self) -> str: ...
    @property
    def exists(self) -> bool: ...
    @property
    def created(self) -> bool: ...
    @property
    def invited_at(self) -> datetime | None: ...
    @property
    def password_set(self) -> bool: ...
    @property
    def ready(self) -> bool: ...


class ConsoleAccounts(Protocol):
    """Creates and invites customers' console accounts."""

    async def state(self, student_id: str, email: str) -> AccountState:
        """The account of ``email``, as far as it is this customer's."""
        ...

    async def ensure_invited(self, student_id: str, email: str) -> AccountState:
        """The account exists and was invited once (a second call sends nothing)."""
        ...
