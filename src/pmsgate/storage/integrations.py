"""PMS integration rows (docs/requirements.md R14.3, R11): the only queries on their table.

A customer has at most one row per provider: ``notes`` (the notes workspace, with
its apartments database and its integration token) and ``kross`` (the booking
system, linked to the gateway facility). A row's id is its own (``int-…``), never
the customer's ``student_id``: the booking-system row's id is what a custom tool's
STUDENT parameter and ``facilities.integration_id`` carry.

The notes token is stored only as vault ciphertext: the caller encrypts it with
:class:`pmsgate.gateway.vault.Vault` under :func:`token_context`; views never carry it.
Its service, :class:`pmsgate.customers.integrations.CustomerIntegrations`, checks the
values and owns the transactions (docs/architecture.md, Repositories and services).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, select, update

from pmsgate.storage.models import (
    Ciphertext,
    CustomerIntegration,
    Facility,
    IntegrationProvider,
    IntegrationStatus,
)
from pmsgate.storage.repository import Repository
from pmsgate.storage.views import view_of

MAX_INTEGRATION_ID = 64
MAX_REFERENCE = 100
MAX_ERROR = 2000


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


def _view(row: CustomerIntegration, hotel_id: str | None) -> IntegrationView:
    return view_of(
        IntegrationView,
        row,
        facility_hotel_id=hotel_id,
        has_token=row.token_enc is not None,
    )


def _with_hotel_id() -> Select[CustomerIntegration, str | None]:
    return select(CustomerIntegration, Facility.hotel_id).outerjoin(
        Facility, Facility.id == CustomerIntegration.facility_id
    )


class IntegrationRepository(Repository):
    """Inserts, reads and updates PMS integration rows (values already checked), in the
    caller's session; never commits (a broken constraint raises ``IntegrityError``).
    "Not there" is None (or False), never an error."""

    async def insert(self, values: Mapping[str, Any], now: datetime) -> IntegrationView:
        """Store a new row (flushed, so a broken constraint surfaces here)."""
        row = CustomerIntegration(**values, status_changed_at=now, created_at=now, updated_at=now)
        await self._add(row)
        return _view(row, await self._hotel_id(row.facility_id))

    async def find(self, integration_id: str) -> IntegrationView | None:
        """The row with this id, if any."""
        found = (
            await self._session.execute(
                _with_hotel_id().where(CustomerIntegration.id == integration_id)
            )
        ).one_or_none()
        return _view(*found) if found is not None else None

    async def for_student(self, student_id: str, provider: str) -> IntegrationView | None:
        """The customer's row for this provider, if any."""
        found = (
            await self._session.execute(
                _with_hotel_id().where(
                    CustomerIntegration.student_id == student_id,
                    CustomerIntegration.provider == provider,
                )
            )
        ).one_or_none()
        return _view(*found) if found is not None else None

    async def of_student(self, student_id: str) -> list[IntegrationView]:
        """Every row of the customer, by provider."""
        found = await self._session.execute(
            _with_hotel_id()
            .where(CustomerIntegration.student_id == student_id)
            .order_by(CustomerIntegration.provider)
        )
        return [_view(row, hotel_id) for row, hotel_id in found.all()]

    async def all(
        self, *, provider: str | None = None, status: str | None = None
    ) -> list[IntegrationView]:
        """Every row, optionally of one provider and/or status, by student_id and provider."""
        statement = _with_hotel_id().order_by(
            CustomerIntegration.student_id, CustomerIntegration.provider
        )
        if provider is not None:
            statement = statement.where(CustomerIntegration.provider == provider)
        if status is not None:
            statement = statement.where(CustomerIntegration.status == status)
        found = await self._session.execute(statement)
        return [_view(row, hotel_id) for row, hotel_id in found.all()]

    async def set_status(
        self, integration_id: str, status: str, reason: str | None, now: datetime
    ) -> IntegrationView | None:
        """Record the status and its reason (the row locked); None when there is no row.

        ``status_changed_at`` moves only when the status really changes, so it tells
        since when a row has been failing however often the failure is reported again.
        """
        row = await self._session.get(CustomerIntegration, integration_id, with_for_update=True)
        if row is None:
            return None
        if row.status != status:
            row.status_changed_at = now
        row.status = status
        row.last_error = reason
        row.updated_at = now
        await self._session.flush()
        return _view(row, await self._hotel_id(row.facility_id))

    async def update(
        self, integration_id: str, values: Mapping[str, Any], now: datetime
    ) -> IntegrationView | None:
        """Change columns of an existing row (flushed); None when there is none."""
        row = await self._session.get(CustomerIntegration, integration_id)
        if row is None:
            return None
        for column, value in values.items():
            setattr(row, column, value)
        row.updated_at = now
        await self._session.flush()
        return _view(row, await self._hotel_id(row.facility_id))

    async def token_ciphertext(self, integration_id: str) -> Ciphertext | None:
        """The row's token as stored (vault ciphertext); None without a token or a row."""
        token = await self._session.scalar(
            select(CustomerIntegration.token_enc).where(CustomerIntegration.id == integration_id)
        )
        return Ciphertext(token) if token is not None else None

    # --- the listings sync a reconnect asks for (run by the restart-listings-syncs job) ---

    async def set_listings_sync_due(self, integration_id: str, when: datetime | None) -> bool:
        """Set when the row's listings sync is due (None: not due); False when there is no row."""
        result = await self._session.execute(
            update(CustomerIntegration)
            .where(CustomerIntegration.id == integration_id)
            .values(listings_sync_due_at=when)
        )
        return bool(getattr(result, "rowcount", 0))

    async def due_listings_syncs(self, now: datetime) -> list[IntegrationView]:
        """The kross rows whose listings sync is due at ``now``, the longest-waiting first."""
        found = await self._session.execute(
            _with_hotel_id()
            .where(
                CustomerIntegration.provider == "kross",
                CustomerIntegration.listings_sync_due_at.is_not(None),
                CustomerIntegration.listings_sync_due_at <= now,
            )
            .order_by(CustomerIntegration.listings_sync_due_at, CustomerIntegration.id)
        )
        return [_view(row, hotel_id) for row, hotel_id in found.all()]

    async def reschedule_listings_sync(
        self, integration_id: str, *, expected: datetime, when: datetime | None
    ) -> bool:
        """Move the due time from ``expected`` to ``when`` (None: done); False if it had moved.

        A compare-and-set: a replica claims a due sync by moving it past its own run, and a
        reconnect that asks again while a sync runs is never wiped by that sync finishing.
        """
        result = await self._session.execute(
            update(CustomerIntegration)
            .where(
                CustomerIntegration.id == integration_id,
                CustomerIntegration.listings_sync_due_at == expected,
            )
            .values(listings_sync_due_at=when)
        )
        return bool(getattr(result, "rowcount", 0))

    async def _hotel_id(self, facility_id: int | None) -> str | None:
        if facility_id is None:
            return None
        return await self._session.scalar(
            select(Facility.hotel_id).where(Facility.id == facility_id)
        )
