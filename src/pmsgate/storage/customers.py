"""Customers (docs/requirements.md R14.1): the only queries on ``customers``.

A customer is keyed by its ``student_id``. Its profile (contact, kind, contract,
autonomy) comes from the customer file and is upserted as a whole; its
subscription changes on its own (billing) and has its own method. The repository works
in the caller's session and never commits; :class:`pmsgate.customers.registry.Customers`
checks the values, raises the caller-facing errors and owns the transactions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update

from pmsgate.storage.integrity import dialect_insert
from pmsgate.storage.models import Customer, CustomerKind, SubscriptionStatus
from pmsgate.storage.repository import Repository
from pmsgate.storage.views import view_of

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
    # The language the customer reads (``it``, ``en``); None keeps the stored one.
    language: str | None = None
    # The IANA time zone the customer reads times in; None keeps the stored one.
    timezone: str | None = None


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
    language: str | None = None  # the language the customer reads; None: not known
    timezone: str | None = None  # the IANA time zone it reads times in; None: Europe/Rome

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
        """Whether the agent also gets ``payment-link-generator`` (docs/requirements.md R15.5)."""
        return self.handles_upsell or self.handles_late_check_in


def _view(row: Customer) -> CustomerView:
    return view_of(CustomerView, row)


class CustomerRepository(Repository):
    """Inserts, upserts and reads customers and sets their subscription (values already
    checked), in the caller's session; never commits (a taken student_id on insert raises
    ``IntegrityError``)."""

    async def insert(self, values: Mapping[str, object], now: datetime) -> CustomerView:
        """Store a new customer (flushed)."""
        row = Customer(**values, created_at=now, updated_at=now)
        await self._add(row)
        return _view(row)

    async def upsert(self, values: Mapping[str, object], now: datetime) -> CustomerView:
        """Insert the customer, or replace its profile; its subscription is left as it is."""
        changes = {key: value for key, value in values.items() if key != "student_id"}
        statement = dialect_insert(self._session, Customer).values(
            **values, created_at=now, updated_at=now
        )
        row = (
            await self._session.scalars(
                statement.on_conflict_do_update(
                    index_elements=[Customer.student_id],
                    set_={**changes, "updated_at": now},
                ).returning(Customer)
            )
        ).one()
        return _view(row)

    async def find(self, student_id: str) -> CustomerView | None:
        """The customer with this student_id, if any."""
        row = await self._session.scalar(select(Customer).where(Customer.student_id == student_id))
        return _view(row) if row is not None else None

    async def all(self) -> list[CustomerView]:
        """Every customer, by student_id."""
        rows = await self._session.scalars(select(Customer).order_by(Customer.student_id))
        return [_view(row) for row in rows]

    async def set_subscription(
        self, student_id: str, values: Mapping[str, object]
    ) -> CustomerView | None:
        """Record the customer's subscription values; None when there is no such customer."""
        row = await self._session.scalar(
            update(Customer)
            .where(Customer.student_id == student_id)
            .values(**values)
            .returning(Customer)
        )
        return _view(row) if row is not None else None
