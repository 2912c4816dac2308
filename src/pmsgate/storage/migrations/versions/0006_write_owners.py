"""idempotency records: the owning process and the read taken before sending

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24 14:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("idempotency_records") as batch:
        batch.add_column(sa.Column("owner", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("read_before", sa.JSON(), nullable=True))
        batch.create_index(
            "ix_idempotency_records_unresolved",
            ["facility_id", "operation", "body_hash"],
            unique=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("idempotency_records") as batch:
        batch.drop_index("ix_idempotency_records_unresolved")
        batch.drop_column("read_before")
        batch.drop_column("owner")
