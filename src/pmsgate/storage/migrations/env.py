"""Alembic environment: runs on the connection handed over by pmsgate.storage.db."""

from __future__ import annotations

from alembic import context

from pmsgate.storage import models  # noqa: F401  (registers every table on Base.metadata)
from pmsgate.storage.db import Base

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - always invoked through pmsgate.storage.db
    raise RuntimeError("Run migrations with `pmsgate db upgrade`.")

context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
