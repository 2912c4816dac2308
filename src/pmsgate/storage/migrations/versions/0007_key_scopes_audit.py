"""gateway keys: scopes, expiry and last use; the append-only audit trail

Existing keys get only ``tools:read`` (least privilege); an admin widens them with
``pmsgate facilities grant-scopes HOTEL_ID KEY_ID --all-scopes`` (docs/gateway.md, Scopes).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24 19:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("gateway_keys") as batch:
        batch.add_column(
            sa.Column("scopes", sa.JSON(), nullable=False, server_default='["tools:read"]')
        )
        batch.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "audit_events",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor_kind", sa.String(length=16), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("subject", sa.String(length=200), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("customer_id", sa.Integer(), nullable=True),
        sa.Column("facility_id", sa.Integer(), nullable=True),
        sa.Column("request_id", sa.String(length=64), nullable=True),
        sa.Column("client_address", sa.String(length=64), nullable=True),
        sa.Column("details", sa.JSON(), nullable=False),
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
