"""Alembic environment: runs on the connection handed over by pmsgate.storage.db.

That connection is already in the transaction (and holds the lock) of
:func:`pmsgate.storage.db.prepare_schema`; each applied migration is recorded in
``schema_revisions`` with whether older code may still run on it (``record_revision``).
"""

from __future__ import annotations

from typing import Any

from alembic import context

from pmsgate.storage import models  # noqa: F401  (registers every table on Base.metadata)
from pmsgate.storage.db import SCHEMA_REVISIONS, Base, record_revision

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - always invoked through pmsgate.storage.db
    raise RuntimeError("Run migrations with `pmsgate db upgrade`.")


def include_name(name: str | None, type_: str, _parents: Any) -> bool:
    """The migrations' bookkeeping is not part of the models (autogenerate leaves it alone)."""
    return not (type_ == "table" and name == SCHEMA_REVISIONS.name)


context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
    include_name=include_name,
    on_version_apply=record_revision,
)
with context.begin_transaction():
    context.run_migrations()
