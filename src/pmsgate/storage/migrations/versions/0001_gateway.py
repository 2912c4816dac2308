"""gateway facilities keys tokens idempotency

Revision ID: 0001
Revises:
Create Date: 2026-11-22 05:57:24.130664
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "facilities",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("hotel_id", sa.String(length=32), nullable=False),
        sa.Column("username", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("password_enc", sa.Text(), nullable=False),
        sa.Column("api_key_enc", sa.Text(), nullable=True),
        sa.Column("integration_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("last_auth_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("limit_per_minute", sa.Integer(), nullable=False),
        sa.Column("limit_per_hour", sa.Integer(), nullable=False),
        sa.Column("limit_per_day", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_facilities")),
        sa.UniqueConstraint("hotel_id", name=op.f("uq_facilities_hotel_id")),
    )
    op.create_table(
        "facility_tokens",
        sa.Column("facility_id", sa.Integer(), nullable=False),
        sa.Column("token_enc", sa.Text(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("obtained_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["facility_id"],
            ["facilities.id"],
            name=op.f("fk_facility_tokens_facility_id_facilities"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("facility_id", name=op.f("pk_facility_tokens")),
    )
    op.create_table(
        "gateway_keys",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("facility_id", sa.Integer(), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("label", sa.String(length=100), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["facility_id"],
            ["facilities.id"],
            name=op.f("fk_gateway_keys_facility_id_facilities"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_gateway_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_gateway_keys_key_hash")),
    )
    op.create_table(
        "idempotency_records",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("facility_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("operation", sa.String(length=100), nullable=False),
        sa.Column("body_hash", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("response", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["facility_id"],
            ["facilities.id"],
            name=op.f("fk_idempotency_records_facility_id_facilities"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_idempotency_records")),
        sa.UniqueConstraint("facility_id", "key", name=op.f("uq_idempotency_records_facility_id")),
    )


def downgrade() -> None:

    op.drop_table("idempotency_records")
    op.drop_table("gateway_keys")
    op.drop_table("facility_tokens")
    op.drop_table("facilities")
