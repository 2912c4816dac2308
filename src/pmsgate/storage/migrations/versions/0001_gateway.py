"""gateway facilities keys tokens idempotency"""

from __future__ import annotations

from alembic import op

from pmsgate.storage.migrations import columns as col

revision = "0001"
down_revision = None


def upgrade() -> None:

    col.create_id_table(
        "facilities",
        col.string("hotel_id", 32),
        col.string("username", 64),
        col.string("kind", 16),
        col.text("password_enc"),
        col.text("api_key_enc", nullable=True),
        col.string("integration_id", 64),
        col.string("name", 200),
        col.string("status", 16),
        col.text("last_error", nullable=True),
        col.timestamp("last_auth_attempt_at", nullable=True),
        col.integer("limit_per_minute"),
        col.integer("limit_per_hour"),
        col.integer("limit_per_day"),
        *col.timestamps(),
        col.unique("facilities", "hotel_id"),
    )
    op.create_table(
        "facility_tokens",
        col.facility_id(),
        col.text("token_enc"),
        col.timestamp("expires_at"),
        col.timestamp("obtained_at"),
        col.facility_key("facility_tokens"),
        col.primary_key("facility_tokens", "facility_id"),
    )
    col.create_id_table(
        "gateway_keys",
        col.facility_id(),
        col.string("prefix", 16),
        col.string("key_hash", 64),
        col.string("label", 100),
        col.timestamp("created_at"),
        col.timestamp("revoked_at", nullable=True),
        col.facility_key("gateway_keys"),
        col.unique("gateway_keys", "key_hash"),
    )
    col.create_id_table(
        "idempotency_records",
        col.facility_id(),
        col.string("key", 200),
        col.string("operation", 100),
        col.string("body_hash", 64),
        col.string("state", 16),
        col.integer("status_code", nullable=True),
        col.json("response", nullable=True),
        *col.timestamps(),
        col.facility_key("idempotency_records"),
        col.unique("idempotency_records", "facility_id", "key"),
    )


def downgrade() -> None:

    op.drop_table("idempotency_records")
    op.drop_table("gateway_keys")
    op.drop_table("facility_tokens")
    op.drop_table("facilities")
