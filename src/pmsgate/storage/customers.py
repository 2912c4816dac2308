"""Customers (spec §2.4, §4.3 step 1): the only queries on ``customers``.

A customer is keyed by its ``student_id``. Its profile (contact, kind, contract,
autonomy) comes from the customer file and is upserted as a whole; its
subscription changes on its own (billing) and has its own method.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import cast, get_args

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import Clock, SystemClock
from pmsgate.errors import Conflict, PmsgateError
from pmsgate.storage.integrity import (
    customer_not_found,
    dialect_insert,
    email_address,
    one_of,
    optional_text,
    required_text,
    translate_integrity_error,
)
from pmsgate.storage.models import Customer, CustomerKind, SubscriptionStatus

MAX_STUDENT_ID = 64
MAX_NAME = 200
MAX_REFERENCE = 100


@dataclass(frozen=True)
class CustomerProfile:
    """What the customer file says about a customer (everything but the subscription)."""

    student_id: str
    email: str
    name: str
    kind: str
    contract_ref: str | None = None
    contract_price_id: str | None = None
    handles_upsell: bool = False
    handles_late_check_in: bool = False


@dataclass(frozen=True)
class CustomerView:
    """A stored customer."""

    student_id: str
    email: str
    name: str
    kind: CustomerKind
    contract_ref: str | None
    contract_price_id: str | None
    subscription_id: str | None
    subscription_status: SubscriptionStatus | None
    subscription_price_id: str | None
    handles_upsell: bool
    handles_late_check_in: bool
    created_at: datetime
    updated_at: datetime

    @property
    def subscription_active_on_contract_price(self) -> bool:
        """The onboarding prerequisite: an active subscription on the contract's price."""
        return (
            self.subscription_status == "active"
            and self.contract_price_id is not None
            and self.subscription_price_id == self.contract_price_id
        )

    @property
    def needs_payment_link_generator(self) -> bool:
        """True when the guest agent also gets ``payment-link-generator`` (spec §2.4)."""
        return self.handles_upsell or self.handles_late_check_in


def _view(row: Customer) -> CustomerView:
    return CustomerView(
        student_id=row.student_id,
        email=row.email,
        name=row.name,
        kind=cast(CustomerKind, row.kind),
        contract_ref=row.contract_ref,
        contract_price_id=row.contract_price_id,
        subscription_id=row.subscription_id,
        subscription_status=cast(SubscriptionStatus | None, row.subscription_status),
        subscription_price_id=row.subscription_price_id,
        handles_upsell=row.handles_upsell,
        handles_late_check_in=row.handles_late_check_in,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def student_id_value(student_id: str) -> str:
    """A student_id as stored; an InvalidInput when blank or too long."""
    return required_text(student_id, "student_id", MAX_STUDENT_ID)


class CustomerExists(Conflict):
    """A customer with this student_id is already registered."""

    code = "customer_exists"
    hint = "Update it (upsert) instead of adding it again."


def _profile_values(profile: CustomerProfile) -> dict[str, object]:
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


class CustomerRepository:
    """Adds, upserts and reads customers; sets their subscription."""

    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], clock: Clock | None = None
    ) -> None:
        self._sessions = sessions
        self._clock = clock or SystemClock()

    async def add(self, profile: CustomerProfile) -> CustomerView:
        """Register a new customer; an existing student_id is a ``customer_exists`` conflict."""
        values = _profile_values(profile)
        now = self._clock.now()
        row = Customer(**values, created_at=now, updated_at=now)
        try:
            async with self._sessions.begin() as session:
                session.add(row)
        except IntegrityError as error:
            raise self._translate(error, str(values["student_id"])) from None
        return _view(row)

    async def upsert(self, profile: CustomerProfile) -> CustomerView:
        """Insert the customer, or replace its profile; its subscription is left as it is."""
        values = _profile_values(profile)
        now = self._clock.now()
        changes = {key: value for key, value in values.items() if key != "student_id"}
        try:
            async with self._sessions.begin() as session:
                statement = dialect_insert(session, Customer).values(
                    **values, created_at=now, updated_at=now
                )
                row = (
                    await session.scalars(
                        statement.on_conflict_do_update(
                            index_elements=[Customer.student_id],
                            set_={**changes, "updated_at": now},
                        ).returning(Customer)
                    )
                ).one()
        except IntegrityError as error:
            raise self._translate(error, str(values["student_id"])) from None
        return _view(row)

    async def find(self, student_id: str) -> CustomerView | None:
        """The customer with this student_id, if any."""
        if "\x00" in student_id:
            # No customer can have one, and PostgreSQL refuses NUL in a text parameter.
            return None
        async with self._sessions() as session:
            row = await session.scalar(
                select(Customer).where(Customer.student_id == student_id.strip())
            )
        return _view(row) if row is not None else None

    async def get(self, student_id: str) -> CustomerView:
        """The customer with this student_id; ``customer_not_found`` otherwise."""
        found = await self.find(student_id)
        if found is None:
            raise customer_not_found(student_id)
        return found

    async def all(self) -> list[CustomerView]:
        """Every customer, by student_id."""
        async with self._sessions() as session:
            rows = await session.scalars(select(Customer).order_by(Customer.student_id))
            return [_view(row) for row in rows]

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
            row = await session.scalar(
                update(Customer)
                .where(Customer.student_id == student_id.strip())
                .values(**values)
                .returning(Customer)
            )
            if row is None:
                raise customer_not_found(student_id)
            return _view(row)

    @staticmethod
    def _translate(error: IntegrityError, student_id: str) -> PmsgateError:
        return translate_integrity_error(
            error,
            Customer.__table__,  # type: ignore[arg-type]
            {
                "uq_customers_student_id": lambda: CustomerExists(
                    f"A customer with student_id {student_id} already exists."
                )
            },
        )
