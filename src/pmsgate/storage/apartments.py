"""The apartment registry (spec §2.4, §4.3 step 11): the only queries on ``apartments``.

One row per apartment, identified by the customer and the booking system's room
type (``UNIQUE (student_id, pms_room_type_id)``); the assistant listing and the
notes page are attached to it, each at most once per customer (two more UNIQUE
constraints). The listings sync and onboarding both write rows, in either order.

:meth:`ApartmentRepository.upsert` is one ``INSERT … ON CONFLICT (student_id,
pms_room_type_id) DO UPDATE`` on SQLite and PostgreSQL alike: atomic, so two
writers racing on the same apartment both succeed and leave one row, and since the
conflict target is a real UNIQUE constraint of the migration, the "no unique
constraint matching the ON CONFLICT specification" failure of spec §4.3 step 11
cannot happen. A value left out (None) keeps what is stored, so completing a row
never erases what another writer attached. The ``update_*`` methods change one
attribute of an existing row and never create one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import Clock, SystemClock
from pmsgate.errors import Conflict, NotFound, PmsgateError
from pmsgate.storage.customers import student_id_value
from pmsgate.storage.integrity import (
    FOREIGN_KEY,
    customer_not_found,
    dialect_insert,
    optional_text,
    required_text,
    translate_integrity_error,
)
from pmsgate.storage.models import Apartment

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
    return ApartmentView(
        id=row.id,
        student_id=row.student_id,
        pms_room_type_id=row.pms_room_type_id,
        assistant_listing_id=row.assistant_listing_id,
        notes_page_id=row.notes_page_id,
        name=row.name,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def apartment_not_found(student_id: str, pms_room_type_id: str) -> NotFound:
    """The error for a registry row that does not exist."""
    return NotFound(
        f"Customer {student_id} has no registry row for room type {pms_room_type_id}.",
        code="apartment_not_found",
        hint="Create it with the registry's upsert (the listings sync or onboarding step 11).",
    )


class ApartmentRepository:
    """Upserts, updates, reads and removes registry rows."""

    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], clock: Clock | None = None
    ) -> None:
        self._sessions = sessions
        self._clock = clock or SystemClock()

    async def upsert(
        self,
        student_id: str,
        pms_room_type_id: str,
        *,
        assistant_listing_id: str | None = None,
        notes_page_id: str | None = None,
        name: str | None = None,
    ) -> tuple[ApartmentView, bool]:
        """Create the apartment's row or complete it in place; True when it was created.

        Values given replace the stored ones; None keeps them. A listing or notes page
        already attached to another apartment of the customer is a conflict.
        """
        student_id = student_id_value(student_id)
        room_type = required_text(pms_room_type_id, "pms_room_type_id", MAX_ROOM_TYPE_ID)
        given: dict[str, Any] = {
            "assistant_listing_id": optional_text(
                assistant_listing_id, "assistant_listing_id", MAX_REFERENCE
            ),
            "notes_page_id": optional_text(notes_page_id, "notes_page_id", MAX_REFERENCE),
            "name": optional_text(name, "name", MAX_NAME),
        }
        changes = {column: value for column, value in given.items() if value is not None}
        now = self._clock.now()
        try:
            async with self._sessions.begin() as session:
                # Only for the caller's report: the upsert below is correct whatever it says.
                existed = await session.scalar(
                    select(Apartment.id).where(
                        Apartment.student_id == student_id,
                        Apartment.pms_room_type_id == room_type,
                    )
                )
                statement = dialect_insert(session, Apartment).values(
                    student_id=student_id,
                    pms_room_type_id=room_type,
                    assistant_listing_id=given["assistant_listing_id"],
                    notes_page_id=given["notes_page_id"],
                    name=given["name"] or "",
                    created_at=now,
                    updated_at=now,
                )
                row = (
                    await session.scalars(
                        statement.on_conflict_do_update(
                            index_elements=[Apartment.student_id, Apartment.pms_room_type_id],
                            set_={**changes, "updated_at": now},
                        ).returning(Apartment)
                    )
                ).one()
        except IntegrityError as error:
            raise self._translate(error, student_id, room_type) from None
        return _view(row), existed is None

    async def update_listing(
        self, student_id: str, pms_room_type_id: str, assistant_listing_id: str | None
    ) -> ApartmentView:
        """Attach the assistant listing to an existing row (None detaches it)."""
        listing = optional_text(assistant_listing_id, "assistant_listing_id", MAX_REFERENCE)
        return await self._update(student_id, pms_room_type_id, assistant_listing_id=listing)

    async def update_notes_page(
        self, student_id: str, pms_room_type_id: str, notes_page_id: str | None
    ) -> ApartmentView:
        """Attach the notes page to an existing row (None detaches it)."""
        page = optional_text(notes_page_id, "notes_page_id", MAX_REFERENCE)
        return await self._update(student_id, pms_room_type_id, notes_page_id=page)

    async def update_name(self, student_id: str, pms_room_type_id: str, name: str) -> ApartmentView:
        """Rename an existing row."""
        return await self._update(
            student_id, pms_room_type_id, name=optional_text(name, "name", MAX_NAME) or ""
        )

    async def find(self, student_id: str, pms_room_type_id: str) -> ApartmentView | None:
        """The row of this apartment, if any."""
        return await self._one(
            Apartment.student_id == student_id.strip(),
            Apartment.pms_room_type_id == pms_room_type_id.strip(),
        )

    async def get(self, student_id: str, pms_room_type_id: str) -> ApartmentView:
        """The row of this apartment; ``apartment_not_found`` otherwise."""
        found = await self.find(student_id, pms_room_type_id)
        if found is None:
            raise apartment_not_found(student_id, pms_room_type_id)
        return found

    async def by_listing(self, student_id: str, assistant_listing_id: str) -> ApartmentView | None:
        """The row the listing is attached to, if any."""
        return await self._one(
            Apartment.student_id == student_id.strip(),
            Apartment.assistant_listing_id == assistant_listing_id.strip(),
        )

    async def by_notes_page(self, student_id: str, notes_page_id: str) -> ApartmentView | None:
        """The row the notes page is attached to, if any."""
        return await self._one(
            Apartment.student_id == student_id.strip(),
            Apartment.notes_page_id == notes_page_id.strip(),
        )

    async def of_student(self, student_id: str) -> list[ApartmentView]:
        """Every row of the customer, by room type."""
        async with self._sessions() as session:
            rows = await session.scalars(
                select(Apartment)
                .where(Apartment.student_id == student_id.strip())
                .order_by(Apartment.pms_room_type_id)
            )
            return [_view(row) for row in rows]

    async def count(self, student_id: str) -> int:
        """How many rows the customer has."""
        async with self._sessions() as session:
            total = await session.scalar(
                select(func.count())
                .select_from(Apartment)
                .where(Apartment.student_id == student_id.strip())
            )
        return int(total or 0)

    async def remove(self, student_id: str, pms_room_type_id: str) -> None:
        """Delete the apartment's row; ``apartment_not_found`` when there is none."""
        async with self._sessions.begin() as session:
            removed = await session.scalar(
                delete(Apartment)
                .where(
                    Apartment.student_id == student_id.strip(),
                    Apartment.pms_room_type_id == pms_room_type_id.strip(),
                )
                .returning(Apartment.id)
            )
        if removed is None:
            raise apartment_not_found(student_id, pms_room_type_id)

    async def _one(self, *conditions: Any) -> ApartmentView | None:
        async with self._sessions() as session:
            row = await session.scalar(select(Apartment).where(*conditions))
        return _view(row) if row is not None else None

    async def _update(self, student_id: str, pms_room_type_id: str, **values: Any) -> ApartmentView:
        student_id = student_id.strip()
        room_type = pms_room_type_id.strip()
        try:
            async with self._sessions.begin() as session:
                row = await session.scalar(
                    update(Apartment)
                    .where(
                        Apartment.student_id == student_id,
                        Apartment.pms_room_type_id == room_type,
                    )
                    .values(**values, updated_at=self._clock.now())
                    .returning(Apartment)
                )
                if row is None:
                    raise apartment_not_found(student_id, room_type)
        except IntegrityError as error:
            raise self._translate(error, student_id, room_type) from None
        return _view(row)

    @staticmethod
    def _translate(error: IntegrityError, student_id: str, room_type: str) -> PmsgateError:
        return translate_integrity_error(
            error,
            Apartment.__table__,  # type: ignore[arg-type]
            {
                FOREIGN_KEY: lambda: customer_not_found(student_id),
                "uq_apartments_student_listing": lambda: Conflict(
                    f"The listing is already attached to another apartment of {student_id} "
                    f"(not room type {room_type}).",
                    code="listing_already_mapped",
                    hint="Detach it from the other apartment first (update_listing with None); "
                    "an unmapped listing makes the assistant answer 'Listing unavailable'.",
                ),
                "uq_apartments_student_notes_page": lambda: Conflict(
                    f"The notes page is already attached to another apartment of {student_id} "
                    f"(not room type {room_type}).",
                    code="notes_page_already_mapped",
                    hint="Detach it from the other apartment first (update_notes_page with None).",
                ),
            },
        )
