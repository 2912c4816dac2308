"""gateway keys: scopes, expiry and last use; the append-only audit trail

Existing keys get only ``tools:read`` (least privilege); an admin widens them with
``pmsgate facilities grant-scopes HOTEL_ID KEY_ID --all-scopes`` (docs/gateway.md, Scopes).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from pmsgate.storage.migrations import columns as col

revision = "0007"
down_revision = "0006"


def upgrade() -> None:
    with op.batch_alter_table("gateway_keys") as batch:
        batch.add_column(
            sa.Column("scopes", sa.JSON(), nullable=False, server_default='["tools:read"]')
        )
        batch.add_column(col.timestamp("expires_at", nullable=True))
        batch.add_column(col.timestamp("last_used_at", nullable=True))
    op.create_table(
        "audit_events",
        sa.Column("id", sa.Integer(), primary_key=True),
        col.timestamp("occurred_at"),
        col.string("actor_kind", 16),
        col.string("actor", 200),
        col.string("action", 64),
        col.string("subject", 200),
        col.string("outcome", 16),
        col.integer("customer_id", nullable=True),
        col.facility_id(nullable=True),
        col.string("request_id", 64, nullable=True),
        col.string("client_address", 64, nullable=True),
        col.json("details"),
    )
    op.create_index("ix_audit_events_occurred_at", "audit_events", ["occurred_at"])
    op.create_index("ix_audit_events_customer", "audit_events", ["customer_id", "occurred_at"])
    op.create_index("ix_audit_events_facility", "audit_events", ["facility_id", "occurred_at"])


def downgrade() -> None:
    op.drop_index("ix_audit_events_facility", table_name="audit_events")
    op.drop_index("ix_audit_events_customer", table_name="audit_events")
    op.drop_index("ix_audit_events_occurred_at", table_name="audit_events")
    op.drop_table("audit_events")
    with op.batch_alter_table("gateway_keys") as batch:
        batch.drop_column("last_used_at")
        batch.drop_column("expires_at")
        batch.drop_column("scopes")
