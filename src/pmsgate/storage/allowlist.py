"""The knowledge bridge's beta allowlist (spec §4.3 step 2): the only queries on its table.

Entries live in the database and are read on every check, so admitting a customer
takes effect at once, with no redeploy. Each entry keeps the comment the
runbook asks for: date, contract, workspace, apartments, subscription.
Addresses are compared lower-cased.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import Clock, SystemClock
from pmsgate.errors import Conflict, InvalidInput, NotFound, PmsgateError
from pmsgate.storage.integrity import (
    dialect_insert,
    email_address,
    optional_text,
    translate_integrity_error,
)
from pmsgate.storage.models import AllowlistEntry


@dataclass(frozen=True)
class AllowlistComment:
    """Why an address is on the allowlist (every field optional except the date)."""

    added_on: date | None = None
    contract: str = ""
    workspace: str = ""
    apartments: int | None = None
    subscription: str = ""


@dataclass(frozen=True)
class AllowlistEntryView:
    """A stored allowlist entry."""

    email: str
    added_on: date
    contract: str
    workspace: str
    apartments: int | None
    subscription: str
    created_at: datetime
    updated_at: datetime

    @property
    def comment(self) -> str:
        """The entry's comment on one line, e.g. ``2026-11-22 · contract C-7 · …``."""
        parts = [self.added_on.isoformat()]
        if self.contract:
            parts.append(f"contract {self.contract}")
        if self.workspace:
            parts.append(f"workspace {self.workspace}")
        if self.apartments is not None:
            parts.append(f"{self.apartments} apartments")
        if self.subscription:
            parts.append(f"subscription {self.subscription}")
        return " · ".join(parts)


def _view(row: AllowlistEntry) -> AllowlistEntryView:
    return AllowlistEntryView(
        email=row.email,
        added_on=row.added_on,
        contract=row.contract,
        workspace=row.workspace,
        apartments=row.apartments,
        subscription=row.subscription,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def entry_not_found(email: str) -> NotFound:
    """The error for an address that is not on the allowlist."""
    return NotFound(
        f"{email} is not on the knowledge allowlist.",
        code="allowlist_entry_not_found",
        hint="List the entries to check the address.",
    )


class AllowlistRepository:
    """Adds, replaces, reads and removes allowlist entries; answers whether one is allowed."""

    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], clock: Clock | None = None
    ) -> None:
        self._sessions = sessions
        self._clock = clock or SystemClock()

    async def add(self, email: str, comment: AllowlistComment | None = None) -> AllowlistEntryView:
        """Admit an address; one already on the list is an ``allowlist_entry_exists`` conflict."""
        now = self._clock.now()
        row = AllowlistEntry(
            email=email_address(email), **self._comment(comment), created_at=now, updated_at=now
        )
        try:
            async with self._sessions.begin() as session:
                session.add(row)
        except IntegrityError as error:
            raise self._translate(error, row.email) from None
        return _view(row)

    async def put(self, email: str, comment: AllowlistComment | None = None) -> AllowlistEntryView:
        """Admit an address or replace its comment (onboarding may run step 2 again)."""
        address = email_address(email)
        values = self._comment(comment)
        now = self._clock.now()
        async with self._sessions.begin() as session:
            statement = dialect_insert(session, AllowlistEntry).values(
                email=address, created_at=now, updated_at=now, **values
            )
            row = (
                await session.scalars(
                    statement.on_conflict_do_update(
                        index_elements=[AllowlistEntry.email],
                        set_={**values, "updated_at": now},
                    ).returning(AllowlistEntry)
                )
            ).one()
        return _view(row)

    async def find(self, email: str) -> AllowlistEntryView | None:
        """The entry of this address, if any."""
        async with self._sessions() as session:
            row = await session.scalar(
                select(AllowlistEntry).where(AllowlistEntry.email == email.strip().lower())
            )
        return _view(row) if row is not None else None

    async def get(self, email: str) -> AllowlistEntryView:
        """The entry of this address; ``allowlist_entry_not_found`` otherwise."""
        found = await self.find(email)
        if found is None:
            raise entry_not_found(email.strip().lower())
        return found

    async def is_allowed(self, email: str) -> bool:
        """True when the address is on the allowlist now."""
        async with self._sessions() as session:
            total = await session.scalar(
                select(func.count())
                .select_from(AllowlistEntry)
                .where(AllowlistEntry.email == email.strip().lower())
            )
        return bool(total)

    async def all(self) -> list[AllowlistEntryView]:
        """Every entry, by address."""
        async with self._sessions() as session:
            rows = await session.scalars(select(AllowlistEntry).order_by(AllowlistEntry.email))
            return [_view(row) for row in rows]

    async def remove(self, email: str) -> None:
        """Take an address off the list; ``allowlist_entry_not_found`` when it is not on it."""
        address = email.strip().lower()
        async with self._sessions.begin() as session:
            removed = await session.scalar(
                delete(AllowlistEntry)
                .where(AllowlistEntry.email == address)
                .returning(AllowlistEntry.id)
            )
        if removed is None:
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

    @staticmethod
    def _translate(error: IntegrityError, email: str) -> PmsgateError:
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
