"""idempotency records: the owning process and the read taken before sending"""

from __future__ import annotations

from alembic import op

from pmsgate.storage.migrations import columns as col

revision = "0006"
down_revision = "0005"


def upgrade() -> None:
    with op.batch_alter_table("idempotency_records") as batch:
        batch.add_column(col.string("owner", 64, nullable=True))
        batch.add_column(col.json("read_before", nullable=True))
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
