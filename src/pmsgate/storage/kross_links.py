"""Each facility with the customer its kross integration links it to, read in one query.

The reconciliation (incidents) and the notices both read every facility once with its
customer; a facility without a link reads ``None`` for the customer's columns, and of
several links the one of the lowest customer id wins, so every reader sees the same one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, and_, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from pmsgate.storage.models import Customer, CustomerIntegration, Facility


def status_since() -> Any:
    """Since when a facility has had its status: ``status_changed_at``, else (a facility
    from before that column) its last update."""
    return func.coalesce(Facility.status_changed_at, Facility.updated_at)


async def facilities_with_customer(
    session: AsyncSession, *columns: Any, where: Sequence[ColumnElement[bool]] = ()
) -> list[Any]:
    """Rows of ``(Facility.id, *columns)``, one a facility matching ``where``, by facility id;
    ``columns`` may name ``CustomerIntegration`` and ``Customer`` columns of its kross link."""
    statement = (
        select(Facility.id, *columns)
        .select_from(Facility)
        .outerjoin(
            CustomerIntegration,
            and_(
                CustomerIntegration.facility_id == Facility.id,
                CustomerIntegration.provider == "kross",
            ),
        )
        .outerjoin(Customer, Customer.student_id == CustomerIntegration.student_id)
        .where(*where)
        .order_by(Facility.id, CustomerIntegration.student_id)
    )
    first: dict[int, Any] = {}
    for row in (await session.execute(statement)).all():
        first.setdefault(row[0], row)
    return list(first.values())
