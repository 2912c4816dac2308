"""Workspace configurations as a service (docs/requirements.md R14.2, R21.3, R21.5).

Checks the values, raises the caller-facing errors and runs each call in one transaction
over :class:`pmsgate.storage.workspaces.WorkspaceConfigurationRepository`.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Literal, get_args

from sqlalchemy.exc import IntegrityError

from pmsgate.customers.checks import (
    one_of,
    optional_text,
    refused_on_customer,
    required_text,
    student_id_value,
)
from pmsgate.errors import Conflict, InvalidInput, NotFound, PmsgateError
from pmsgate.storage.models import BillingMode, WorkspaceConfiguration
from pmsgate.storage.records import Records
from pmsgate.storage.workspaces import (
    MAX_PLAN_LIMIT_USD,
    MAX_WORKSPACE_ID,
    MAX_WORKSPACE_NAME,
    MAX_WORKSPACE_SLUG,
    WorkspaceConfigurationRepository,
    WorkspaceConfigurationView,
)

_SLUG = re.compile(r"^[a-z0-9](?:[a-z0-9_-]*[a-z0-9])?$")


def _slug(value: str) -> str:
    slug = required_text(value, "workspace_slug", MAX_WORKSPACE_SLUG)
    if not _SLUG.match(slug):
        raise InvalidInput(
            "workspace_slug must be lower-case letters, digits, '-' or '_'.",
            code="invalid_workspace_slug",
            hint="Use a slug such as `acme-rentals`.",
        )
    return slug


def _plan_limit(value: Decimal | int | str) -> Decimal:
    try:
        # Through str: a float's binary expansion must never become the stored amount.
        amount = Decimal(str(value).strip())
    except InvalidOperation:
        amount = Decimal("NaN")
    if (
        isinstance(value, bool)
        or not amount.is_finite()
        or amount < 0
        or amount > MAX_PLAN_LIMIT_USD
        or amount != amount.quantize(Decimal("0.01"))
    ):
        raise InvalidInput(
            "plan_limit_usd must be an amount of dollars and cents, at least 0.",
            code="invalid_plan_limit_usd",
            hint="Give the plan's monthly limit in USD, e.g. 150 or 149.90.",
        )
    return amount


def _alert_threshold(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100:
        raise InvalidInput(
            "alert_threshold_pct must be a whole percentage from 1 to 100.",
            code="invalid_alert_threshold_pct",
            hint="Give the share of the plan limit at which to alert, e.g. 80.",
        )
    return value


def configuration_not_found(student_id: str) -> NotFound:
    """The error for a customer without a workspace configuration."""
    return NotFound(
        f"Customer {student_id} has no workspace configuration.",
        code="workspace_configuration_not_found",
        hint="Upsert the workspace configuration first (onboarding step 3).",
    )


def _refused(error: IntegrityError, student_id: str) -> PmsgateError:
    return refused_on_customer(
        error,
        WorkspaceConfiguration,
        student_id,
        {
            "uq_workspace_configurations_workspace_slug": lambda: Conflict(
                "Another customer's workspace already has this slug.",
                code="workspace_slug_taken",
                hint="Choose a slug of the customer's own.",
            ),
            "uq_workspace_configurations_workspace_id": lambda: Conflict(
                "Another customer's configuration already has this workspace_id.",
                code="workspace_id_taken",
                hint="Check the workspace id read back from the platform; "
                "each customer has a workspace of its own.",
            ),
        },
    )


class Workspaces(Records):
    """Upserts and reads workspace configurations; records the platform's workspace id."""

    async def upsert(
        self,
        student_id: str,
        *,
        workspace_name: str,
        workspace_slug: str,
        plan_limit_usd: Decimal | int | str,
        alert_threshold_pct: int,
        billing_mode: str = "partner_markup",
        notes: str = "",
        workspace_id: str | None = None,
    ) -> WorkspaceConfigurationView:
        """Insert or replace the configuration; a None workspace_id keeps the stored one."""
        student_id = student_id_value(student_id)
        values = {
            "workspace_name": required_text(workspace_name, "workspace_name", MAX_WORKSPACE_NAME),
            "workspace_slug": _slug(workspace_slug),
            "plan_limit_usd": _plan_limit(plan_limit_usd),
            "alert_threshold_pct": _alert_threshold(alert_threshold_pct),
            "billing_mode": one_of(billing_mode.strip(), get_args(BillingMode), "billing_mode"),
            "notes": notes.strip(),
        }
        workspace_id = optional_text(workspace_id, "workspace_id", MAX_WORKSPACE_ID)
        try:
            async with self._sessions.begin() as session:
                return await WorkspaceConfigurationRepository(session).upsert(
                    student_id, values, workspace_id, self._clock.now()
                )
        except IntegrityError as error:
            raise _refused(error, student_id) from None

    async def set_workspace_id(
        self, student_id: str, workspace_id: str
    ) -> WorkspaceConfigurationView:
        """Record the id the platform gave the customer's workspace (onboarding step 5)."""
        workspace_id = required_text(workspace_id, "workspace_id", MAX_WORKSPACE_ID)
        try:
            async with self._sessions.begin() as session:
                stored = await WorkspaceConfigurationRepository(session).set_workspace_id(
                    student_id.strip(), workspace_id, self._clock.now()
                )
        except IntegrityError as error:
            raise _refused(error, student_id) from None
        if stored is None:
            raise configuration_not_found(student_id)
        return stored

    async def find(self, student_id: str) -> WorkspaceConfigurationView | None:
        """The customer's configuration, if any."""
        return await self._find_by("student_id", student_id.strip())

    async def get(self, student_id: str) -> WorkspaceConfigurationView:
        """The customer's configuration; ``workspace_configuration_not_found`` otherwise."""
        found = await self.find(student_id)
        if found is None:
            raise configuration_not_found(student_id)
        return found

    async def by_slug(self, workspace_slug: str) -> WorkspaceConfigurationView | None:
        """The configuration with this workspace slug (unique), if any."""
        return await self._find_by("workspace_slug", workspace_slug.strip())

    async def all(self) -> list[WorkspaceConfigurationView]:
        """Every configuration, by student_id."""
        async with self._sessions() as session:
            return await WorkspaceConfigurationRepository(session).all()

    async def _find_by(
        self, column: Literal["student_id", "workspace_slug"], value: str
    ) -> WorkspaceConfigurationView | None:
        async with self._sessions() as session:
            return await WorkspaceConfigurationRepository(session).find_by(column, value)
