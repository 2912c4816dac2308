"""The knowledge bridge's beta allowlist as a service (docs/requirements.md R21.2).

Checks the address and the comment, raises the caller-facing errors and runs each call
in one transaction over :class:`pmsgate.storage.allowlist.AllowlistRepository`.
Addresses are compared lower-cased.

**What the allowlist admits** (docs/requirements.md R17.6): the knowledge sync of a *customer*,
by the customer's e-mail as registered on its customer record (the customer file's ``email``,
the address step 2 adds) — not the address of whoever is signed in. A customer may have
several logins; an admin acting on a customer is admitted or refused by the customer's
entry, never by the admin's own address. :meth:`Allowlist.require_customer` is the one
check, called by :meth:`pmsgate.knowledge.sync_jobs.SyncJobs` before any sync job is
created (the JSON API, the console and ``pmsgate knowledge sync`` all start jobs there).
It reads the database on every call (no cache), so removing an entry takes effect at
once.
"""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError

from pmsgate.customers.checks import (
    customer_not_found,
    email_address,
    optional_text,
    translate_integrity_error,
)
from pmsgate.errors import Conflict, Forbidden, InvalidInput, NotFound, PmsgateError
from pmsgate.storage.allowlist import AllowlistComment, AllowlistEntryView, AllowlistRepository
from pmsgate.storage.customers import CustomerRepository
from pmsgate.storage.models import AllowlistEntry
from pmsgate.storage.records import Records


def entry_not_found(email: str) -> NotFound:
    """The error for an address that is not on the allowlist."""
    return NotFound(
        f"{email} is not on the knowledge allowlist.",
        code="allowlist_entry_not_found",
        hint="List the entries to check the address.",
    )


def not_on_allowlist(email: str) -> Forbidden:
    """The error for a customer whose e-mail is not on the allowlist: no knowledge sync."""
    return Forbidden(
        f"The knowledge sync is not open to this customer yet: {email} is not on the "
        "knowledge allowlist.",
        code="not_on_allowlist",
        hint="Ask the platform team to add this e-mail to the knowledge allowlist; the sync "
        "works as soon as it is added.",
    )


def _entry_refused(error: IntegrityError, email: str) -> PmsgateError:
    return translate_integrity_error(
        error,
        AllowlistEntry.__table__,  # type: ignore[arg-type]
        {
            "uq_knowledge_allowlist_email": lambda: Conflict(
                f"{email} is already on the knowledge allowlist.",
                code="allowlist_entry_exists",
                hint="Replace its comment with put, or remove it first.",
            )
        },
    )


class Allowlist(Records):
    """Adds, replaces, reads and removes allowlist entries; answers whether one is allowed."""

    async def add(self, email: str, comment: AllowlistComment | None = None) -> AllowlistEntryView:
        """Admit an address; one already on the list is an ``allowlist_entry_exists`` conflict."""
        address = email_address(email)
        values = self._comment(comment)
        try:
            async with self._sessions.begin() as session:
                return await AllowlistRepository(session).insert(address, values, self._clock.now())
        except IntegrityError as error:
            raise _entry_refused(error, address) from None

    async def put(self, email: str, comment: AllowlistComment | None = None) -> AllowlistEntryView:
        """Admit an address or replace its comment (onboarding may run step 2 again)."""
        address = email_address(email)
        values = self._comment(comment)
        async with self._sessions.begin() as session:
            return await AllowlistRepository(session).upsert(address, values, self._clock.now())

    async def find(self, email: str) -> AllowlistEntryView | None:
        """The entry of this address, if any."""
        async with self._sessions() as session:
            return await AllowlistRepository(session).find(email.strip().lower())

    async def get(self, email: str) -> AllowlistEntryView:
        """The entry of this address; ``allowlist_entry_not_found`` otherwise."""
        found = await self.find(email)
        if found is None:
            raise entry_not_found(email.strip().lower())
        return found

    async def customer_allowed(self, student_id: str) -> bool:
        """True when the customer's registered e-mail is on the allowlist now (no cache)."""
        return (await self._customer_entry(student_id))[1]

    async def require_customer(self, student_id: str) -> None:
        """Refuse (403 ``not_on_allowlist``) a customer whose e-mail is not on the list.

        ``customer_not_found`` when no customer has this student_id.
        """
        email, allowed = await self._customer_entry(student_id)
        if not allowed:
            raise not_on_allowlist(email)

    async def _customer_entry(self, student_id: str) -> tuple[str, bool]:
        key = student_id.strip()
        async with self._sessions() as session:
            customer = await CustomerRepository(session).find(key)
            if customer is None:
                raise customer_not_found(key)
            email = customer.email.strip().lower()
            return email, await AllowlistRepository(session).contains(email)

    async def all(self) -> list[AllowlistEntryView]:
        """Every entry, by address."""
        async with self._sessions() as session:
            return await AllowlistRepository(session).all()

    async def remove(self, email: str) -> None:
        """Take an address off the list; ``allowlist_entry_not_found`` when it is not on it."""
        address = email.strip().lower()
        async with self._sessions.begin() as session:
            removed = await AllowlistRepository(session).delete(address)
        if not removed:
            raise entry_not_found(address)

    def _comment(self, comment: AllowlistComment | None) -> dict[str, object]:
        comment = comment or AllowlistComment()
        apartments = comment.apartments
        if apartments is not None and (
            isinstance(apartments, bool) or not isinstance(apartments, int) or apartments < 0
        ):
            raise InvalidInput(
                "apartments must be a whole number, at least 0.",
                code="invalid_apartments",
                hint="Give the number of the customer's apartments, or leave it out.",
            )
        return {
            "added_on": comment.added_on or self._clock.now().date(),
            "contract": optional_text(comment.contract, "contract", 100) or "",
            "workspace": optional_text(comment.workspace, "workspace", 200) or "",
            "apartments": apartments,
            "subscription": optional_text(comment.subscription, "subscription", 100) or "",
        }
