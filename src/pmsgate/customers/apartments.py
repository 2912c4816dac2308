"""The apartment registry as a service (docs/requirements.md R14.4, R18).

Checks the values, raises the caller-facing errors and runs each call in one transaction
over :class:`pmsgate.storage.apartments.ApartmentRepository`. :meth:`Apartments.upsert`
creates a row or completes it in place (a value left out keeps what is stored); the
``update_*`` methods change one attribute of an existing row and never create one.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.exc import IntegrityError

from pmsgate.customers.checks import (
    optional_text,
    refused_on_customer,
    required_text,
    student_id_value,
)
from pmsgate.errors import Conflict, NotFound, PmsgateError
from pmsgate.storage.apartments import (
    MAX_NAME,
    MAX_REFERENCE,
    MAX_ROOM_TYPE_ID,
    ApartmentRepository,
    ApartmentView,
)
from pmsgate.storage.models import Apartment
from pmsgate.storage.records import Records


def apartment_not_found(student_id: str, pms_room_type_id: str) -> NotFound:
    """The error for a registry row that does not exist."""
    return NotFound(
        f"Customer {student_id} has no registry row for room type {pms_room_type_id}.",
        code="apartment_not_found",
        hint="Create it with the registry's upsert (the listings sync or onboarding step 11).",
    )


def _refused(error: IntegrityError, student_id: str, room_type: str) -> PmsgateError:
    return refused_on_customer(
        error,
        Apartment,
        student_id,
        {
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
                hint="Detach it from the other apartment first (update_notion_page with None).",
            ),
        },
    )


class Apartments(Records):
    """Upserts, updates, reads and removes registry rows."""

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
        try:
            async with self._sessions.begin() as session:
                return await ApartmentRepository(session).upsert(
                    student_id, room_type, given, self._clock.now()
                )
        except IntegrityError as error:
            raise _refused(error, student_id, room_type) from None

    async def update_listing(
        self, student_id: str, pms_room_type_id: str, assistant_listing_id: str | None
    ) -> ApartmentView:
        """Attach the assistant listing to an existing row (None detaches it)."""
        listing = optional_text(assistant_listing_id, "assistant_listing_id", MAX_REFERENCE)
        return await self._update(student_id, pms_room_type_id, assistant_listing_id=listing)

    async def update_notion_page(
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
        async with self._sessions() as session:
            return await ApartmentRepository(session).find(
                student_id.strip(), pms_room_type_id.strip()
            )

    async def get(self, student_id: str, pms_room_type_id: str) -> ApartmentView:
        """The row of this apartment; ``apartment_not_found`` otherwise."""
        found = await self.find(student_id, pms_room_type_id)
        if found is None:
            raise apartment_not_found(student_id, pms_room_type_id)
        return found

    async def by_listing(self, student_id: str, assistant_listing_id: str) -> ApartmentView | None:
        """The row the listing is attached to, if any."""
        async with self._sessions() as session:
            return await ApartmentRepository(session).by_listing(
                student_id.strip(), assistant_listing_id.strip()
            )

    async def by_notes_page(self, student_id: str, notes_page_id: str) -> ApartmentView | None:
        """The row the notes page is attached to, if any."""
        async with self._sessions() as session:
            return await ApartmentRepository(session).by_notes_page(
                student_id.strip(), notes_page_id.strip()
            )

    async def of_student(self, student_id: str) -> list[ApartmentView]:
        """Every row of the customer, by room type."""
        async with self._sessions() as session:
            return await ApartmentRepository(session).of_student(student_id.strip())

    async def count(self, student_id: str) -> int:
        """How many rows the customer has."""
        async with self._sessions() as session:
            return await ApartmentRepository(session).count(student_id.strip())

    async def remove(self, student_id: str, pms_room_type_id: str) -> None:
        """Delete the apartment's row; ``apartment_not_found`` when there is none."""
        async with self._sessions.begin() as session:
            removed = await ApartmentRepository(session).delete(
                student_id.strip(), pms_room_type_id.strip()
            )
        if not removed:
            raise apartment_not_found(student_id, pms_room_type_id)

    async def _update(self, student_id: str, pms_room_type_id: str, **values: Any) -> ApartmentView:
        student_id = student_id.strip()
        room_type = pms_room_type_id.strip()
        try:
            async with self._sessions.begin() as session:
                row = await ApartmentRepository(session).update(
                    student_id, room_type, values, self._clock.now()
                )
        except IntegrityError as error:
            raise _refused(error, student_id, room_type) from None
        if row is None:
            raise apartment_not_found(student_id, room_type)
        return row
