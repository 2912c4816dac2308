"""PMS integration rows (spec §2.4, §3, §4.3 steps 4 and 17): the only queries on their table.

A customer has at most one row per provider: ``notes`` (the notes workspace, with
its apartments database and its integration token) and ``kross`` (the booking
system, linked to the gateway facility). A row's id is its own (``int-…``), never
the customer's ``student_id``: the booking-system row's id is what a custom tool's
STUDENT parameter and ``facilities.integration_id`` carry.

The notes token is stored only as vault ciphertext: the caller encrypts it with
:class:`pmsgate.gateway.vault.Vault` under :func:`token_context`; views never carry it.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import cast, get_args

from sqlalchemy import Select, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import Clock, SystemClock
from pmsgate.errors import Conflict, InvalidInput, NotFound, PmsgateError
from pmsgate.storage.customers import student_id_value
from pmsgate.storage.integrity import (
    FOREIGN_KEY,
    customer_not_found,
    one_of,
    optional_text,
    required_text,
    translate_integrity_error,
)
from pmsgate.storage.models import (
    Ciphertext,
    Customer,
    Facility,
    IntegrationProvider,
    IntegrationStatus,
    PmsIntegration,
)

MAX_INTEGRATION_ID = 64
MAX_REFERENCE = 100
MAX_ERROR = 2000

_INTEGRATION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")


def new_integration_id() -> str:
    """A fresh integration row id (``int-`` and 16 hex digits)."""
    return f"int-{secrets.token_hex(8)}"


def token_context(integration_id: str) -> str:
    """Vault associated data of an integration row's token (binds it to that row)."""
    return f"pmsgate/integration/{integration_id}/token"


@dataclass(frozen=True)
class IntegrationView:
    """A stored integration row, without its token (``has_token`` says whether one is set)."""

    id: str
    student_id: str
    provider: IntegrationProvider
    status: IntegrationStatus
    last_error: str | None
    status_changed_at: datetime
    facility_hotel_id: str | None
    notes_workspace_id: str | None
    apartments_database_id: str | None
    has_token: bool
    created_at: datetime
    updated_at: datetime
    # When the listings sync must run again (set by a reconnect); None when not due.
    listings_sync_due_at: datetime | None = None


def _view(row: PmsIntegration, hotel_id: str | None) -> IntegrationView:
    return IntegrationView(
        id=row.id,
        student_id=row.student_id,
        provider=cast(IntegrationProvider, row.provider),
        status=cast(IntegrationStatus, row.status),
        last_error=row.last_error,
        status_changed_at=row.status_changed_at,
        facility_hotel_id=hotel_id,
        notes_workspace_id=row.notes_workspace_id,
        apartments_database_id=row.apartments_database_id,
        has_token=row.token_enc is not None,
        created_at=row.created_at,
        updated_at=row.updated_at,
        listings_sync_due_at=row.listings_sync_due_at,
    )


def _with_hotel_id() -> Select[PmsIntegration, str | None]:
    return select(PmsIntegration, Facility.hotel_id).outerjoin(
        Facility, Facility.id == PmsIntegration.facility_id
    )


def integration_not_found(integration_id: str) -> NotFound:
    """The error for an unknown integration row id."""
    return NotFound(
        f"No PMS integration row with id {integration_id}.",
        code="integration_not_found",
        hint="List the customer's integration rows to find the id.",
    )


class IntegrationRepository:
    """Adds, reads and updates PMS integration rows; links the booking-system row's facility."""

    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], clock: Clock | None = None
    ) -> None:
        self._sessions = sessions
        self._clock = clock or SystemClock()

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
        row_id = self._integration_id(integration_id or new_integration_id(), student_id)
        status = one_of(status.strip().lower(), get_args(IntegrationStatus), "status")
        notes_fields = {
            "notes_workspace_id": optional_text(
                notes_workspace_id, "notes_workspace_id", MAX_REFERENCE
            ),
            "apartments_database_id": optional_text(
                apartments_database_id, "apartments_database_id", MAX_REFERENCE
            ),
            "token_enc": token_enc,
        }
        if provider != "notes" and any(value is not None for value in notes_fields.values()):
            raise InvalidInput(
                "Only a notes integration row has a notes workspace, database or token.",
                code="notes_fields_on_booking_system_row",
                hint="Leave them out of the booking-system row.",
            )
        now = self._clock.now()
        try:
            async with self._sessions.begin() as session:
                facility_id = None
                if facility_hotel_id is not None:
                    facility_id = await self._facility_for(
                        session, facility_hotel_id, row_id, provider
                    )
                row = PmsIntegration(
                    id=row_id,
                    student_id=student_id,
                    provider=provider,
                    status=status,
                    last_error=optional_text(last_error, "last_error", MAX_ERROR)
                    if status == "error"
                    else None,
                    status_changed_at=now,
                    facility_id=facility_id,
                    created_at=now,
                    updated_at=now,
                    **notes_fields,
                )
                session.add(row)
        except IntegrityError as error:
            raise self._translate(error, student_id, provider, row_id) from None
        return _view(row, facility_hotel_id.strip() if facility_hotel_id else None)

    async def find(self, integration_id: str) -> IntegrationView | None:
        """The row with this id, if any."""
        async with self._sessions() as session:
            found = (
                await session.execute(
                    _with_hotel_id().where(PmsIntegration.id == integration_id.strip())
                )
            ).one_or_none()
        return _view(*found) if found is not None else None

    async def get(self, integration_id: str) -> IntegrationView:
        """The row with this id; a student_id given instead is named as the mistake it is."""
        found = await self.find(integration_id)
        if found is not None:
            return found
        value = integration_id.strip()
        async with self._sessions() as session:
            is_student = (
                await session.scalar(select(Customer.id).where(Customer.student_id == value))
            ) is not None
            booking_system_row = await session.scalar(
                select(PmsIntegration.id).where(
                    PmsIntegration.student_id == value, PmsIntegration.provider == "kross"
                )
            )
        if is_student:
            # Spec §4.3 step 17: a custom tool's STUDENT parameter is the row id, not this.
            suggestion = (
                f" Its booking-system integration row id is {booking_system_row}."
                if booking_system_row
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
            found = (
                await session.execute(
                    _with_hotel_id().where(
                        PmsIntegration.student_id == student_id.strip(),
                        PmsIntegration.provider == provider.strip().lower(),
                    )
                )
            ).one_or_none()
        return _view(*found) if found is not None else None

    async def of_student(self, student_id: str) -> list[IntegrationView]:
        """Every row of the customer, by provider."""
        async with self._sessions() as session:
            found = await session.execute(
                _with_hotel_id()
                .where(PmsIntegration.student_id == student_id.strip())
                .order_by(PmsIntegration.provider)
            )
            return [_view(row, hotel_id) for row, hotel_id in found.all()]

    async def all(
        self, *, provider: str | None = None, status: str | None = None
    ) -> list[IntegrationView]:
        """Every row, optionally of one provider and/or status, by student_id and provider."""
        statement = _with_hotel_id().order_by(PmsIntegration.student_id, PmsIntegration.provider)
        if provider is not None:
            statement = statement.where(PmsIntegration.provider == provider.strip().lower())
        if status is not None:
            statement = statement.where(PmsIntegration.status == status.strip().lower())
        async with self._sessions() as session:
            found = await session.execute(statement)
            return [_view(row, hotel_id) for row, hotel_id in found.all()]

    async def set_status(
        self, integration_id: str, status: str, *, error: str | None = None
    ) -> IntegrationView:
        """Move the row to ``connected`` or ``error`` (with its reason, cleared on connect).

        ``status_changed_at`` moves only when the status really changes, so it tells
        since when a row has been failing however often the failure is reported again.
        """
        status = one_of(status.strip().lower(), get_args(IntegrationStatus), "status")
        reason = optional_text(error, "error", MAX_ERROR) if status == "error" else None
        now = self._clock.now()
        async with self._sessions.begin() as session:
            row = await session.get(PmsIntegration, integration_id.strip(), with_for_update=True)
            if row is None:
                raise integration_not_found(integration_id)
            if row.status != status:
                row.status_changed_at = now
            row.status = status
            row.last_error = reason
            row.updated_at = now
            hotel_id = await self._hotel_id(session, row.facility_id)
        return _view(row, hotel_id)

    async def link_facility(self, integration_id: str, hotel_id: str) -> IntegrationView:
        """Link the booking-system row to the gateway facility registered for it."""
        try:
            async with self._sessions.begin() as session:
                row = await session.get(PmsIntegration, integration_id.strip())
                if row is None:
                    raise integration_not_found(integration_id)
                row.facility_id = await self._facility_for(session, hotel_id, row.id, row.provider)
                row.updated_at = self._clock.now()
                await session.flush()
        except IntegrityError as error:
            raise self._translate(error, "", "kross", integration_id) from None
        return _view(row, hotel_id.strip())

    async def set_notes_connection(
        self,
        integration_id: str,
        *,
        notes_workspace_id: str | None,
        apartments_database_id: str | None,
        token_enc: Ciphertext | None,
    ) -> IntegrationView:
        """Record the notes workspace, its apartments database and the encrypted token."""
        values = {
            "notes_workspace_id": optional_text(
                notes_workspace_id, "notes_workspace_id", MAX_REFERENCE
            ),
            "apartments_database_id": optional_text(
                apartments_database_id, "apartments_database_id", MAX_REFERENCE
            ),
            "token_enc": token_enc,
        }
        async with self._sessions.begin() as session:
            row = await session.get(PmsIntegration, integration_id.strip())
            if row is None:
                raise integration_not_found(integration_id)
            if row.provider != "notes":
                raise InvalidInput(
                    f"Integration row {row.id} is a {row.provider} row, not a notes row.",
                    code="not_a_notes_integration",
                    hint="Give the id of the customer's notes integration row.",
                )
            for column, value in values.items():
                setattr(row, column, value)
            row.updated_at = self._clock.now()
        return _view(row, None)

    # --- the listings sync a reconnect asks for (run by the restart-listings-syncs job) ---

    async def mark_listings_sync_due(self, integration_id: str, when: datetime) -> None:
        """Ask for the row's listings sync to run at ``when`` (e.g. now, after a reconnect)."""
        await self._set_listings_sync_due(integration_id, when)

    async def due_listings_syncs(self, now: datetime) -> list[IntegrationView]:
        """The kross rows whose listings sync is due at ``now``, the longest-waiting first."""
        statement = (
            _with_hotel_id()
            .where(
                PmsIntegration.provider == "kross",
                PmsIntegration.listings_sync_due_at.is_not(None),
                PmsIntegration.listings_sync_due_at <= now,
            )
            .order_by(PmsIntegration.listings_sync_due_at, PmsIntegration.id)
        )
        async with self._sessions() as session:
            found = await session.execute(statement)
            return [_view(row, hotel_id) for row, hotel_id in found.all()]

    async def reschedule_listings_sync(
        self, integration_id: str, *, expected: datetime, when: datetime | None
    ) -> bool:
        """Move the due time from ``expected`` to ``when`` (None: done); False if it had moved.

        A compare-and-set: a replica claims a due sync by moving it past its own run, and a
        reconnect that asks again while a sync runs is never wiped by that sync finishing.
        """
        async with self._sessions.begin() as session:
            result = await session.execute(
                update(PmsIntegration)
                .where(
                    PmsIntegration.id == integration_id.strip(),
                    PmsIntegration.listings_sync_due_at == expected,
                )
                .values(listings_sync_due_at=when)
            )
        return bool(getattr(result, "rowcount", 0))

    async def clear_listings_sync_due(self, integration_id: str) -> None:
        """The row's listings sync is no longer due."""
        await self._set_listings_sync_due(integration_id, None)

    async def _set_listings_sync_due(self, integration_id: str, when: datetime | None) -> None:
        async with self._sessions.begin() as session:
            row = await session.get(PmsIntegration, integration_id.strip())
            if row is None:
                raise integration_not_found(integration_id)
            if when is not None and row.provider != "kross":
                raise InvalidInput(
                    f"Integration row {row.id} is a {row.provider} row: only the booking-system "
                    "row has a listings sync.",
                    code="not_a_booking_system_integration",
                    hint="Give the id of the customer's kross integration row.",
                )
            row.listings_sync_due_at = when

    async def token_ciphertext(self, integration_id: str) -> str | None:
        """The row's token as stored (vault ciphertext), for the caller to decrypt."""
        async with self._sessions() as session:
            row = await session.get(PmsIntegration, integration_id.strip())
            if row is None:
                raise integration_not_found(integration_id)
            return row.token_enc

    @staticmethod
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

    @staticmethod
    async def _hotel_id(session: AsyncSession, facility_id: int | None) -> str | None:
        if facility_id is None:
            return None
        return await session.scalar(select(Facility.hotel_id).where(Facility.id == facility_id))

    @staticmethod
    async def _facility_for(
        session: AsyncSession, hotel_id: str, integration_id: str, provider: str
    ) -> int:
        if provider != "kross":
            raise InvalidInput(
                "Only the booking-system integration row is linked to a gateway facility.",
                code="facility_on_notes_integration",
                hint="Link the facility to the customer's kross row.",
            )
        facility = await session.scalar(
            select(Facility).where(Facility.hotel_id == hotel_id.strip())
        )
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

    @staticmethod
    def _translate(
        error: IntegrityError, student_id: str, provider: str, integration_id: str
    ) -> PmsgateError:
        return translate_integrity_error(
            error,
            PmsIntegration.__table__,  # type: ignore[arg-type]
            {
                FOREIGN_KEY: lambda: customer_not_found(student_id),
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
