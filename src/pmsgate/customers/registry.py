"""Customers as a service (docs/requirements.md R14.1, R21.1).

Checks a customer's profile and subscription, raises the caller-facing errors and runs
each call in one transaction over :class:`pmsgate.storage.customers.CustomerRepository`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import get_args

from sqlalchemy.exc import IntegrityError

from pmsgate.customers.checks import (
    customer_not_found,
    email_address,
    one_of,
    optional_text,
    required_text,
    student_id_value,
    translate_integrity_error,
)
from pmsgate.errors import Conflict, InvalidInput, PmsgateError
from pmsgate.i18n import is_timezone
from pmsgate.storage.customers import (
    MAX_NAME,
    MAX_REFERENCE,
    CustomerProfile,
    CustomerRepository,
    CustomerView,
)
from pmsgate.storage.models import Customer, CustomerKind, SubscriptionStatus
from pmsgate.storage.records import Records

MAX_LANGUAGE = 16
MAX_TIMEZONE = 64


class CustomerExists(Conflict):
    """A customer with this student_id is already registered."""

    code = "customer_exists"
    hint = "Update it (upsert) instead of adding it again."


def _profile_values(profile: CustomerProfile) -> dict[str, object]:
    values = _required_profile_values(profile)
    language = optional_text(profile.language, "language", MAX_LANGUAGE)
    if language is not None:  # None keeps the stored language (an upsert without one)
        values["language"] = language.lower()
    timezone = optional_text(profile.timezone, "timezone", MAX_TIMEZONE)
    if timezone is not None:  # None keeps the stored time zone
        if not is_timezone(timezone):
            raise InvalidInput(
                f"timezone {timezone!r} is not a time zone this service knows.",
                code="invalid_timezone",
                hint="Give an IANA time zone name such as Europe/Rome.",
            )
        values["timezone"] = timezone
    return values


def _required_profile_values(profile: CustomerProfile) -> dict[str, object]:
    return {
        "student_id": student_id_value(profile.student_id),
        "email": email_address(profile.email),
        "name": required_text(profile.name, "name", MAX_NAME),
        "kind": one_of(profile.kind.strip().lower(), get_args(CustomerKind), "kind"),
        "contract_ref": optional_text(profile.contract_ref, "contract_ref", MAX_REFERENCE),
        "contract_price_id": optional_text(
            profile.contract_price_id, "contract_price_id", MAX_REFERENCE
        ),
        "handles_upsell": bool(profile.handles_upsell),
        "handles_late_check_in": bool(profile.handles_late_check_in),
    }


def _refused(error: IntegrityError, student_id: str) -> PmsgateError:
    return translate_integrity_error(
        error,
        Customer.__table__,  # type: ignore[arg-type]
        {
            "uq_customers_student_id": lambda: CustomerExists(
                f"A customer with student_id {student_id} already exists."
            )
        },
    )


class Customers(Records):
    """Adds, upserts and reads customers; sets their subscription."""

    async def add(self, profile: CustomerProfile) -> CustomerView:
        """Register a new customer; an existing student_id is a ``customer_exists`` conflict."""
        return await self._store(profile, CustomerRepository.insert)

    async def upsert(self, profile: CustomerProfile) -> CustomerView:
        """Insert the customer, or replace its profile; its subscription is left as it is."""
        return await self._store(profile, CustomerRepository.upsert)

    async def _store(
        self,
        profile: CustomerProfile,
        write: Callable[[CustomerRepository, dict[str, object], datetime], Awaitable[CustomerView]],
    ) -> CustomerView:
        values = _profile_values(profile)
        try:
            async with self._sessions.begin() as session:
                return await write(CustomerRepository(session), values, self._clock.now())
        except IntegrityError as error:
            raise _refused(error, str(values["student_id"])) from None

    async def find(self, student_id: str) -> CustomerView | None:
        """The customer with this student_id, if any."""
        if "\x00" in student_id:
            # No customer can have one, and PostgreSQL refuses NUL in a text parameter.
            return None
        async with self._sessions() as session:
            return await CustomerRepository(session).find(student_id.strip())

    async def get(self, student_id: str) -> CustomerView:
        """The customer with this student_id; ``customer_not_found`` otherwise."""
        found = await self.find(student_id)
        if found is None:
            raise customer_not_found(student_id)
        return found

    async def all(self) -> list[CustomerView]:
        """Every customer, by student_id."""
        async with self._sessions() as session:
            return await CustomerRepository(session).all()

    async def set_subscription(
        self,
        student_id: str,
        *,
        subscription_id: str | None,
        status: str | None,
        price_id: str | None,
    ) -> CustomerView:
        """Record the customer's subscription as billing reports it (None: no subscription)."""
        values = {
            "subscription_id": optional_text(subscription_id, "subscription_id", MAX_REFERENCE),
            "subscription_status": (
                None
                if status is None
                else one_of(
                    status.strip().lower(), get_args(SubscriptionStatus), "subscription_status"
                )
            ),
            "subscription_price_id": optional_text(
                price_id, "subscription_price_id", MAX_REFERENCE
            ),
            "updated_at": self._clock.now(),
        }
        async with self._sessions.begin() as session:
            stored = await CustomerRepository(session).set_subscription(student_id.strip(), values)
        if stored is None:
            raise customer_not_found(student_id)
        return stored
