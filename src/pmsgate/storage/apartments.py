"""The apartment registry (docs/requirements.md R14.4, R18): the only queries on ``apartments``.

One row per apartment, identified by the customer and the booking system's room
type (``UNIQUE (student_id, pms_room_type_id)``); the assistant listing and the
notes page are attached to it, each at most once per customer (two more UNIQUE
constraints). The listings sync and onboarding both write rows, in either order.

:meth:`ApartmentRepository.upsert` is one ``INSERT … ON CONFLICT (student_id,
pms_room_type_id) DO UPDATE`` on SQLite and PostgreSQL alike: atomic, so two
writers racing on the same apartment both succeed and leave one row, and since the
conflict target is a real UNIQUE constraint of the migration, the "no unique
constraint matching the ON CONFLICT specification" failure cannot happen
(docs/requirements.md R18.2). A value left out (None) keeps what is stored, so completing a row
never erases what another writer attached. The ``update_*`` methods change one
attribute of an existing row and never create one. The repository works in the caller's
session and never commits; :class:`pmsgate.customers.apartments.Apartments` checks the
values, raises the caller-facing errors and owns the transactions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update

from pmsgate.storage.integrity import dialect_insert
from pmsgate.storage.models import Apartment
from pmsgate.storage.repository import Repository
from pmsgate.storage.views import view_of

MAX_ROOM_TYPE_ID = 64
MAX_REFERENCE = 100
MAX_NAME = 200


@dataclass(frozen=True)
class ApartmentView:
    """A stored registry row."""

    id: int
    student_id: str
    pms_room_type_id: str
    assistant_listing_id: str | None
    notes_page_id: str | None
    name: str
    created_at: datetime
    updated_at: datetime


def _view(row: Apartment) -> ApartmentView:
    return view_of(ApartmentView, row)


class ApartmentRepository(Repository):
    """Upserts, updates, reads and deletes registry rows (values already checked), in the
    caller's session; never commits (a broken constraint raises ``IntegrityError``)."""

    async def upsert(
        self, student_id: str, room_type: str, given: Mapping[str, Any], now: datetime
    ) -> tuple[ApartmentView, bool]:
        """Create the row or complete it in place (None values keep the stored ones); True
        when it was created."""
        changes = {column: value for column, value in given.items() if value is not None}
        # Only for the caller's report: the upsert below is correct whatever it says.
        existed = await self._session.scalar(
            select(Apartment.id).where(
                Apartment.student_id == student_id,
                Apartment.pms_room_type_id == room_type,
            )
        )
        statement = dialect_insert(self._session, Apartment).values(
            student_id=student_id,
            pms_room_type_id=room_type,
            assistant_listing_id=given["assistant_listing_id"],
            notes_page_id=given["notes_page_id"],
            name=given["name"] or "",
            created_at=now,
            updated_at=now,
        )
        row = (
            await self._session.scalars(
                statement.on_conflict_do_update(
                    index_elements=[Apartment.student_id, Apartment.pms_room_type_id],
                    set_={**changes, "updated_at": now},
                ).returning(Apartment)
            )
        ).one()
        return _view(row), existed is None

    async def update(
        self, student_id: str, room_type: str, values: Mapping[str, Any], now: datetime
    ) -> ApartmentView | None:
        """Change an existing row; None when there is none."""
        row = await self._session.scalar(
            update(Apartment)
            .where(Apartment.student_id == student_id, Apartment.pms_room_type_id == room_type)
            .values(**values, updated_at=now)
            .returning(Apartment)
        )
        return _view(row) if row is not None else None

    async def find(self, student_id: str, room_type: str) -> ApartmentView | None:
        """The row of this apartment, if any."""
        return await self._one(
            Apartment.student_id == student_id, Apartment.pms_room_type_id == room_type
        )

    async def by_listing(self, student_id: str, assistant_listing_id: str) -> ApartmentView | None:
        """The row the listing is attached to, if any."""
        return await self._one(
            Apartment.student_id == student_id,
            Apartment.assistant_listing_id == assistant_listing_id,
        )

    async def by_notes_page(self, student_id: str, notes_page_id: str) -> ApartmentView | None:
        """The row the notes page is attached to, if any."""
        return await self._one(
            Apartment.student_id == student_id, Apartment.notes_page_id == notes_page_id
        )

    async def of_student(self, student_id: str) -> list[ApartmentView]:
        """Every row of the customer, by room type."""
        rows = await self._session.scalars(
            select(Apartment)
            .where(Apartment.student_id == student_id)
            .order_by(Apartment.pms_room_type_id)
        )
        return [_view(row) for row in rows]

    async def count(self, student_id: str) -> int:
        """How many rows the customer has."""
        total = await self._session.scalar(
            select(func.count()).select_from(Apartment).where(Apartment.student_id == student_id)
        )
        return int(total or 0)

    async def delete(self, student_id: str, room_type: str) -> bool:
        """Delete the apartment's row; False when there was none."""
        removed = await self._session.scalar(
            delete(Apartment)
            .where(Apartment.student_id == student_id, Apartment.pms_room_type_id == room_type)
            .returning(Apartment.id)
        )
        return removed is not None

    async def _one(self, *conditions: Any) -> ApartmentView | None:
        row = await self._session.scalar(select(Apartment).where(*conditions))
        return _view(row) if row is not None else None
