"""PMS integration rows as a service (docs/requirements.md R14.3, R11).

Checks the values, raises the caller-facing errors and runs each call in one transaction
over :class:`pmsgate.storage.integrations.IntegrationRepository` (and, to link the
booking-system row to its gateway facility, :class:`pmsgate.storage.facilities.FacilityRepository`).
A customer has at most one row per provider (``notes``, ``kross``); a row's id is its own
(``int-…``), never the customer's ``student_id``. The notes token arrives and leaves as
vault ciphertext only.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, get_args

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from pmsgate.customers.checks import (
    one_of,
    optional_text,
    refused_on_customer,
    required_text,
    student_id_value,
)
from pmsgate.errors import Conflict, InvalidInput, NotFound, PmsgateError
from pmsgate.storage.customers import CustomerRepository
from pmsgate.storage.facilities import FacilityRepository
from pmsgate.storage.integrations import (
    MAX_ERROR,
    MAX_INTEGRATION_ID,
    MAX_REFERENCE,
    IntegrationRepository,
    IntegrationView,
    new_integration_id,
)
from pmsgate.storage.models import (
    Ciphertext,
    CustomerIntegration,
    IntegrationProvider,
    IntegrationStatus,
)
from pmsgate.storage.records import Records

_INTEGRATION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")


def integration_not_found(integration_id: str) -> NotFound:
    """The error for an unknown integration row id."""
    return NotFound(
        f"No PMS integration row with id {integration_id}.",
        code="integration_not_found",
        hint="List the customer's integration rows to find the id.",
    )


def _integration_id(value: str, student_id: str) -> str:
    row_id = required_text(value, "integration_id", MAX_INTEGRATION_ID)
    if not _INTEGRATION_ID.match(row_id):
        raise InvalidInput(
            "integration_id may hold letters, digits and . _ : - only.",
            code="invalid_integration_id",
            hint="Leave it out to have one generated (int-…).",
        )
    if row_id == student_id:
        raise InvalidInput(
            "An integration row's id must differ from the customer's student_id.",
            code="integration_id_is_student_id",
            hint="Leave it out to have one generated (int-…).",
        )
    return row_id


def _status(status: str) -> str:
    return one_of(status.strip().lower(), get_args(IntegrationStatus), "status")


def _notion_fields(
    notes_workspace_id: str | None, apartments_database_id: str | None, token_enc: Ciphertext | None
) -> dict[str, Any]:
    return {
        "notes_workspace_id": optional_text(
            notes_workspace_id, "notes_workspace_id", MAX_REFERENCE
        ),
        "apartments_database_id": optional_text(
            apartments_database_id, "apartments_database_id", MAX_REFERENCE
        ),
        "token_enc": token_enc,
    }


async def _facility_for(
    session: AsyncSession, hotel_id: str, integration_id: str, provider: str
) -> int:
    """The id of the facility registered for this booking-system row, checked both ways."""
    if provider != "kross":
        raise InvalidInput(
            "Only the booking-system integration row is linked to a gateway facility.",
            code="facility_on_notes_integration",
            hint="Link the facility to the customer's kross row.",
        )
    facility = await FacilityRepository(session).by_hotel_id(hotel_id.strip())
    if facility is None:
        raise NotFound(
            f"No facility with hotel_id {hotel_id}.",
            code="facility_not_found",
            hint="Register it with `pmsgate facilities add` first.",
        )
    if facility.integration_id != integration_id:
        # Both directions must agree, or the gateway and the records would disagree on
        # which customer a facility serves.
        raise Conflict(
            f"Facility {facility.hotel_id} was registered for integration row "
            f"{facility.integration_id}, not {integration_id}.",
            code="facility_of_another_integration",
            hint="Register the facility with this integration row id, or link the row "
            "the facility names.",
        )
    return facility.id


def _refused(
    error: IntegrityError, student_id: str, provider: str, integration_id: str
) -> PmsgateError:
    return refused_on_customer(
        error,
        CustomerIntegration,
        student_id,
        {
            "uq_pms_integrations_student_provider": lambda: Conflict(
                f"Customer {student_id} already has a {provider} integration row.",
                code="integration_exists",
                hint="Read it with the customer's student_id and provider; update it.",
            ),
            "pk_pms_integrations": lambda: Conflict(
                f"An integration row with id {integration_id} already exists.",
                code="integration_id_taken",
                hint="Leave the id out to have a fresh one generated.",
            ),
            "uq_pms_integrations_facility_id": lambda: Conflict(
                "The facility is already linked to another integration row.",
                code="facility_already_linked",
                hint="A facility serves one booking-system integration row.",
            ),
        },
    )


class CustomerIntegrations(Records):
    """Adds, reads and updates PMS integration rows; links the booking-system row's facility."""

    async def add(
        self,
        student_id: str,
        provider: str,
        *,
        integration_id: str | None = None,
        status: str = "connected",
        last_error: str | None = None,
        facility_hotel_id: str | None = None,
        notes_workspace_id: str | None = None,
        apartments_database_id: str | None = None,
        token_enc: Ciphertext | None = None,
    ) -> IntegrationView:
        """Create the customer's row for a provider; its id is generated unless given."""
        student_id = student_id_value(student_id)
        provider = one_of(provider.strip().lower(), get_args(IntegrationProvider), "provider")
        row_id = _integration_id(integration_id or new_integration_id(), student_id)
        status = _status(status)
        notion_fields = _notion_fields(notes_workspace_id, apartments_database_id, token_enc)
        if provider != "notes" and any(value is not None for value in notion_fields.values()):
            raise InvalidInput(
                "Only a notes integration row has a notes workspace, database or token.",
                code="notes_fields_on_booking_system_row",
                hint="Leave them out of the booking-system row.",
            )
        reason = optional_text(last_error, "last_error", MAX_ERROR) if status == "error" else None
        try:
            async with self._sessions.begin() as session:
                facility_id = None
                if facility_hotel_id is not None:
                    facility_id = await _facility_for(session, facility_hotel_id, row_id, provider)
                return await IntegrationRepository(session).insert(
                    {
                        "id": row_id,
                        "student_id": student_id,
                        "provider": provider,
                        "status": status,
                        "last_error": reason,
                        "facility_id": facility_id,
                        **notion_fields,
                    },
                    self._clock.now(),
                )
        except IntegrityError as error:
            raise _refused(error, student_id, provider, row_id) from None

    async def find(self, integration_id: str) -> IntegrationView | None:
        """The row with this id, if any."""
        async with self._sessions() as session:
            return await IntegrationRepository(session).find(integration_id.strip())

    async def get(self, integration_id: str) -> IntegrationView:
        """The row with this id; a student_id given instead is named as the mistake it is."""
        value = integration_id.strip()
        async with self._sessions() as session:
            repository = IntegrationRepository(session)
            found = await repository.find(value)
            if found is not None:
                return found
            is_student = await CustomerRepository(session).find(value) is not None
            booking_system_row = await repository.for_student(value, "kross")
        if is_student:
            # docs/requirements.md R21.17: a custom tool's STUDENT parameter is the row id.
            suggestion = (
                f" Its booking-system integration row id is {booking_system_row.id}."
                if booking_system_row is not None
                else ""
            )
            raise InvalidInput(
                f"{integration_id} is a student_id, not a PMS integration row id.{suggestion}",
                code="student_id_given_for_integration_id",
                hint="Pass the id of the customer's integration row (int-…), never the student_id.",
            )
        raise integration_not_found(integration_id)

    async def for_student(self, student_id: str, provider: str) -> IntegrationView | None:
        """The customer's row for this provider, if any."""
        async with self._sessions() as session:
            return await IntegrationRepository(session).for_student(
                student_id.strip(), provider.strip().lower()
            )

    async def of_student(self, student_id: str) -> list[IntegrationView]:
        """Every row of the customer, by provider."""
        async with self._sessions() as session:
            return await IntegrationRepository(session).of_student(student_id.strip())

    async def all(
        self, *, provider: str | None = None, status: str | None = None
    ) -> list[IntegrationView]:
        """Every row, optionally of one provider and/or status, by student_id and provider."""
        async with self._sessions() as session:
            return await IntegrationRepository(session).all(
                provider=provider.strip().lower() if provider is not None else None,
                status=status.strip().lower() if status is not None else None,
            )

    async def set_status(
        self, integration_id: str, status: str, *, error: str | None = None
    ) -> IntegrationView:
        """Move the row to ``connected`` or ``error`` (with its reason, cleared on connect).

        ``status_changed_at`` moves only when the status really changes, so it tells
        since when a row has been failing however often the failure is reported again.
        """
        status = _status(status)
        reason = optional_text(error, "error", MAX_ERROR) if status == "error" else None
        async with self._sessions.begin() as session:
            stored = await IntegrationRepository(session).set_status(
                integration_id.strip(), status, reason, self._clock.now()
            )
        if stored is None:
            raise integration_not_found(integration_id)
        return stored

    async def link_facility(self, integration_id: str, hotel_id: str) -> IntegrationView:
        """Link the booking-system row to the gateway facility registered for it."""
        try:
            async with self._sessions.begin() as session:
                repository = IntegrationRepository(session)
                row = await repository.find(integration_id.strip())
                if row is None:
                    raise integration_not_found(integration_id)
                facility_id = await _facility_for(session, hotel_id, row.id, row.provider)
                linked = await repository.update(
                    row.id, {"facility_id": facility_id}, self._clock.now()
                )
        except IntegrityError as error:
            raise _refused(error, "", "kross", integration_id) from None
        if linked is None:  # deleted between the read and the write
            raise integration_not_found(integration_id)
        return linked

    async def set_notion_connection(
        self,
        integration_id: str,
        *,
        notes_workspace_id: str | None,
        apartments_database_id: str | None,
        token_enc: Ciphertext | None,
    ) -> IntegrationView:
        """Record the notes workspace, its apartments database and the encrypted token."""
        values = _notion_fields(notes_workspace_id, apartments_database_id, token_enc)
        async with self._sessions.begin() as session:
            repository = IntegrationRepository(session)
            row = await repository.find(integration_id.strip())
            if row is None:
                raise integration_not_found(integration_id)
            if row.provider != "notes":
                raise InvalidInput(
                    f"Integration row {row.id} is a {row.provider} row, not a notes row.",
                    code="not_a_notes_integration",
                    hint="Give the id of the customer's notes integration row.",
                )
            stored = await repository.update(row.id, values, self._clock.now())
        if stored is None:  # deleted between the read and the write
            raise integration_not_found(integration_id)
        return stored

    # --- the listings sync a reconnect asks for (run by the restart-listings-syncs job) ---

    async def mark_listings_sync_due(self, integration_id: str, when: datetime) -> None:
        """Ask for the row's listings sync to run at ``when`` (e.g. now, after a reconnect)."""
        await self._set_listings_sync_due(integration_id, when)

    async def due_listings_syncs(self, now: datetime) -> list[IntegrationView]:
        """The kross rows whose listings sync is due at ``now``, the longest-waiting first."""
        async with self._sessions() as session:
            return await IntegrationRepository(session).due_listings_syncs(now)

    async def reschedule_listings_sync(
        self, integration_id: str, *, expected: datetime, when: datetime | None
    ) -> bool:
        """Move the due time from ``expected`` to ``when`` (None: done); False if it had moved.

        A compare-and-set: a replica claims a due sync by moving it past its own run, and a
        reconnect that asks again while a sync runs is never wiped by that sync finishing.
        """
        async with self._sessions.begin() as session:
            return await IntegrationRepository(session).reschedule_listings_sync(
                integration_id.strip(), expected=expected, when=when
            )

    async def clear_listings_sync_due(self, integration_id: str) -> None:
        """The row's listings sync is no longer due."""
        await self._set_listings_sync_due(integration_id, None)

    async def token_ciphertext(self, integration_id: str) -> Ciphertext | None:
        """The row's token as stored (vault ciphertext), for the caller to decrypt."""
        key = integration_id.strip()
        async with self._sessions() as session:
            repository = IntegrationRepository(session)
            ciphertext = await repository.token_ciphertext(key)
            if ciphertext is None and await repository.find(key) is None:
                raise integration_not_found(integration_id)
        return ciphertext

    async def _set_listings_sync_due(self, integration_id: str, when: datetime | None) -> None:
        async with self._sessions.begin() as session:
            repository = IntegrationRepository(session)
            row = await repository.find(integration_id.strip())
            if row is None:
                raise integration_not_found(integration_id)
            if when is not None and row.provider != "kross":
                raise InvalidInput(
                    f"Integration row {row.id} is a {row.provider} row: only the booking-system "
                    "row has a listings sync.",
                    code="not_a_booking_system_integration",
                    hint="Give the id of the customer's kross integration row.",
                )
            await repository.set_listings_sync_due(row.id, when)
