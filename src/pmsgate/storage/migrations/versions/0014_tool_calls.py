"""tool_calls: a bounded log of each facility's tool and operation calls; upstream_health

``tool_calls`` holds one row per tool or operation call a gateway key made for a
facility: when, which tool, the key's display prefix, the transport, the outcome and
error code, whether the answer came from the cache or the booking system, how old it
was, the latency, and only the non-personal shape of the arguments (never an answer).
Every replica appends its own rows in batches; a scheduled job purges rows older than
``PMSGATE_TOOL_CALL_LOG_RETENTION_DAYS`` and beyond the per-facility bound.
``upstream_health`` keeps each facility's latest successful and failed booking-system
request (the health panel's "last successful call").
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from pmsgate.storage.migrations import columns as col

revision = "0014"
down_revision = "0013"


def upgrade() -> None:
    op.create_table(
        "tool_calls",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            nullable=False,
        ),
        col.facility_id(),
        col.timestamp("at"),
        col.string("kind", 16),
        col.string("name", 80),
        col.string("transport", 8),
        col.string("key_prefix", 16, nullable=True),
        col.string("outcome", 16),
        col.string("error_code", 64, nullable=True),
        col.integer("status", nullable=True),
        col.string("source", 16, nullable=True),
        sa.Column("age_s", sa.Float(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        col.json("arguments"),
        col.check("tool_calls", "kind", "kind IN ('tool', 'operation')"),
        col.check("tool_calls", "transport", "transport IN ('http', 'mcp')"),
        col.check("tool_calls", "outcome", "outcome IN ('ok', 'stale', 'replayed', 'error')"),
        col.facility_key("tool_calls"),
        col.primary_key("tool_calls"),
    )
    col.create_index("tool_calls", ["facility_id", "at"])
    col.create_index("tool_calls", ["at"])
    op.create_table(
        "upstream_health",
        col.facility_id(),
        col.timestamp("last_success_at", nullable=True),
        col.timestamp("last_failure_at", nullable=True),
        col.string("last_failure_code", 64, nullable=True),
        col.facility_key("upstream_health"),
        col.primary_key("upstream_health", "facility_id"),
    )


def downgrade() -> None:
    op.drop_table("upstream_health")
    col.drop_table("tool_calls", "ix_tool_calls_at", "ix_tool_calls_facility_id_at")
