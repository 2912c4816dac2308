"""The knowledge bridge's allowlist (docs/requirements.md R14.6): the only queries on its table.

Entries live in the database and are read on every check, so admitting a customer
takes effect at once, with no redeploy. Each entry keeps the comment the
runbook asks for: date, contract, workspace, apartments, subscription.
Addresses are compared lower-cased. The repository works in the caller's session and
never commits; :class:`pmsgate.customers.allowlist.Allowlist` checks addresses and
comments, raises the caller-facing errors and owns the transactions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime

from sqlalchemy import delete, func, select

from pmsgate.storage.integrity import dialect_insert
from pmsgate.storage.models import AllowlistEntry
from pmsgate.storage.repository import Repository
from pmsgate.storage.views import view_of


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
    return view_of(AllowlistEntryView, row)


class AllowlistRepository(Repository):
    """Inserts, upserts, reads and deletes allowlist entries (by lower-cased address), in the
    caller's session; never commits (a second insert of an address raises ``IntegrityError``)."""

    async def insert(
        self, address: str, values: Mapping[str, object], now: datetime
    ) -> AllowlistEntryView:
        """Store a new entry (flushed)."""
        row = AllowlistEntry(email=address, **values, created_at=now, updated_at=now)
        await self._add(row)
        return _view(row)

    async def upsert(
        self, address: str, values: Mapping[str, object], now: datetime
    ) -> AllowlistEntryView:
        """Store the entry or replace its comment."""
        statement = dialect_insert(self._session, AllowlistEntry).values(
            email=address, created_at=now, updated_at=now, **values
        )
        row = (
            await self._session.scalars(
                statement.on_conflict_do_update(
                    index_elements=[AllowlistEntry.email],
                    set_={**values, "updated_at": now},
                ).returning(AllowlistEntry)
            )
        ).one()
        return _view(row)

    async def find(self, address: str) -> AllowlistEntryView | None:
        """The entry of this address, if any."""
        row = await self._session.scalar(
            select(AllowlistEntry).where(AllowlistEntry.email == address)
        )
        return _view(row) if row is not None else None

    async def contains(self, address: str) -> bool:
        """True when the address has an entry."""
        total = await self._session.scalar(
            select(func.count()).select_from(AllowlistEntry).where(AllowlistEntry.email == address)
        )
        return bool(total)

    async def all(self) -> list[AllowlistEntryView]:
        """Every entry, by address."""
        rows = await self._session.scalars(select(AllowlistEntry).order_by(AllowlistEntry.email))
        return [_view(row) for row in rows]

    async def delete(self, address: str) -> bool:
        """Delete the address's entry; False when there was none."""
        removed = await self._session.scalar(
            delete(AllowlistEntry)
            .where(AllowlistEntry.email == address)
            .returning(AllowlistEntry.id)
        )
        return removed is not None
