"""schema_revisions: each migration applied from now on, and whether older code may run on it

One row per migration applied after this one exists (this one included): its revision,
``backward_compatible`` (the migration file's module attribute, true when absent) and
when it was applied. Written by the migration environment itself (``record_revision``
in pmsgate.storage.db), read at every start: a release that does not know the
database's revision runs on it only if every unknown migration is recorded as backward
compatible (docs/deploy.md, Rolling back).

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-26 23:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None
# Additive: a new table nothing older reads. (Every migration says so explicitly.)
backward_compatible = True


def upgrade() -> None:
    op.create_table(
        "schema_revisions",
        sa.Column("revision", sa.String(length=32), nullable=False),
        sa.Column("backward_compatible", sa.Boolean(), nullable=False),
        sa.Column("applied_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("revision", name=op.f("pk_schema_revisions")),
    )


def downgrade() -> None:
    op.drop_table("schema_revisions")
