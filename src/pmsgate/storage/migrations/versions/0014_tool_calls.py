"""tool_calls: a bounded log of each facility's tool and operation calls; upstream_health

``tool_calls`` holds one row per tool or operation call a gateway key made for a
facility: when, which tool, the key's display prefix, the transport, the outcome and
error code, whether the answer came from the cache or the booking system, how old it
was, the latency, and only the non-personal shape of the arguments (never an answer).
Every replica appends its own rows in batches; a scheduled job purges rows older than
``PMSGATE_TOOL_CALL_LOG_RETENTION_DAYS`` and beyond the per-facility bound.
``upstream_health`` keeps each facility's latest successful and failed booking-system
request (the health panel's "last successful call").

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26 22:50:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tool_calls",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            nullable=False,
        ),
        sa.Column("facility_id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=80), nullable=False),
        sa.Column("transport", sa.String(length=8), nullable=False),
        sa.Column("key_prefix", sa.String(length=16), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("error_code", sa.String(length=64), nullable=True),
        sa.Column("status", sa.Integer(), nullable=True),
        sa.Column("source", sa.String(length=16), nullable=True),
        sa.Column("age_s", sa.Float(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("arguments", sa.JSON(), nullable=False),
        sa.CheckConstraint("kind IN ('tool', 'operation')", name=op.f("ck_tool_calls_kind")),
        sa.CheckConstraint("transport IN ('http', 'mcp')", name=op.f("ck_tool_calls_transport")),
        sa.CheckConstraint(
            "outcome IN ('ok', 'stale', 'replayed', 'error')",
            name=op.f("ck_tool_calls_outcome"),
        ),
        sa.ForeignKeyConstraint(
            ["facility_id"],
            ["facilities.id"],
            name=op.f("fk_tool_calls_facility_id_facilities"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tool_calls")),
    )
    op.create_index(
        op.f("ix_tool_calls_facility_id_at"), "tool_calls", ["facility_id", "at"], unique=False
    )
    op.create_index(op.f("ix_tool_calls_at"), "tool_calls", ["at"], unique=False)
    op.create_table(
        "upstream_health",
        sa.Column("facility_id", sa.Integer(), nullable=False),
        sa.Column("last_success_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_failure_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_failure_code", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(
            ["facility_id"],
            ["facilities.id"],
            name=op.f("fk_upstream_health_facility_id_facilities"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("facility_id", name=op.f("pk_upstream_health")),
    )


def downgrade() -> None:
    op.drop_table("upstream_health")
    op.drop_index(op.f("ix_tool_calls_at"), table_name="tool_calls")
    op.drop_index(op.f("ix_tool_calls_facility_id_at"), table_name="tool_calls")
    op.drop_table("tool_calls")
