"""platform records: customers workspaces integrations apartments usage allowlist"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from pmsgate.storage.migrations import columns as col

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    col.create_id_table(
        "customers",
        col.student_id(),
        col.string("email", 320),
        col.string("name", 200),
        col.string("kind", 16),
        col.string("contract_ref", 100, nullable=True),
        col.string("contract_price_id", 100, nullable=True),
        col.string("subscription_id", 100, nullable=True),
        col.string("subscription_status", 32, nullable=True),
        col.string("subscription_price_id", 100, nullable=True),
        col.boolean("handles_upsell"),
        col.boolean("handles_late_check_in"),
        *col.timestamps(),
        col.check("customers", "kind", "kind IN ('partner', 'own')"),
        col.check(
            "customers",
            "subscription_status",
            "subscription_status IS NULL OR subscription_status IN ('active', 'trialing', "
            "'past_due', 'unpaid', 'canceled', 'incomplete', 'incomplete_expired', 'paused')",
        ),
        col.unique("customers", "student_id"),
    )
    col.create_id_table(
        "knowledge_allowlist",
        col.string("email", 320),
        sa.Column("added_on", sa.Date(), nullable=False),
        col.string("contract", 100),
        col.string("workspace", 200),
        col.integer("apartments", nullable=True),
        col.string("subscription", 100),
        *col.timestamps(),
        col.unique("knowledge_allowlist", "email"),
    )
    col.create_id_table(
        "apartments",
        col.student_id(),
        col.string("pms_room_type_id", 64),
        col.string("assistant_listing_id", 100, nullable=True),
        col.string("notes_page_id", 100, nullable=True),
        col.string("name", 200),
        *col.timestamps(),
        col.customer_key("apartments"),
        col.unique("apartments", "student_id", "assistant_listing_id", name="student_listing"),
        col.unique("apartments", "student_id", "notes_page_id", name="student_notes_page"),
        col.unique("apartments", "student_id", "pms_room_type_id", name="student_room_type"),
    )
    op.create_table(
        "pms_integrations",
        col.string("id", 64),
        col.student_id(),
        col.string("provider", 16),
        col.string("status", 16),
        col.text("last_error", nullable=True),
        col.timestamp("status_changed_at"),
        col.facility_id(nullable=True),
        col.string("notes_workspace_id", 100, nullable=True),
        col.string("apartments_database_id", 100, nullable=True),
        col.text("token_enc", nullable=True),
        *col.timestamps(),
        col.check(
            "pms_integrations", "facility_on_kross", "provider = 'kross' OR facility_id IS NULL"
        ),
        col.check(
            "pms_integrations",
            "notes_fields_on_notes",
            "provider = 'notes' OR (notes_workspace_id IS NULL "
            "AND apartments_database_id IS NULL AND token_enc IS NULL)",
        ),
        col.check("pms_integrations", "provider", "provider IN ('notes', 'kross')"),
        col.check("pms_integrations", "status", "status IN ('connected', 'error')"),
        col.check("pms_integrations", "id_is_not_student_id", "id <> student_id"),
        col.facility_key("pms_integrations", ondelete="SET NULL"),
        col.customer_key("pms_integrations"),
        col.primary_key("pms_integrations"),
        col.unique("pms_integrations", "facility_id"),
        col.unique("pms_integrations", "student_id", "provider", name="student_provider"),
    )
    col.create_id_table(
        "usage_snapshots",
        col.student_id(),
        col.string("workspace_id", 100, nullable=True),
        col.string("kind", 16),
        col.timestamp("taken_at"),
        sa.Column("usd_spent", sa.Numeric(precision=14, scale=4), nullable=False),
        col.integer("messages"),
        col.integer("tool_calls"),
        col.integer("upstream_calls"),
        col.json("details", nullable=True),
        col.check("usage_snapshots", "kind", "kind IN ('baseline', 'periodic')"),
        col.check(
            "usage_snapshots",
            "non_negative",
            "usd_spent >= 0 AND messages >= 0 AND tool_calls >= 0 AND upstream_calls >= 0",
        ),
        col.customer_key("usage_snapshots"),
        col.unique(
            "usage_snapshots", "student_id", "kind", "taken_at", name="student_kind_taken_at"
        ),
    )
    col.create_index(
        "usage_snapshots", ["student_id", "taken_at"], name="ix_usage_snapshots_student_taken_at"
    )
    col.create_index(
        "usage_snapshots",
        ["student_id"],
        name="uq_usage_snapshots_one_baseline",
        unique=True,
        where="kind = 'baseline'",
    )
    col.create_id_table(
        "workspace_configurations",
        col.student_id(),
        col.string("workspace_id", 100, nullable=True),
        col.string("workspace_name", 200),
        col.string("workspace_slug", 100),
        sa.Column("plan_limit_usd", sa.Numeric(precision=12, scale=2), nullable=False),
        col.integer("alert_threshold_pct"),
        col.string("billing_mode", 32),
        col.text("notes"),
        *col.timestamps(),
        col.check("workspace_configurations", "billing_mode", "billing_mode IN ('partner_markup')"),
        col.check(
            "workspace_configurations",
            "alert_threshold_pct",
            "alert_threshold_pct >= 1 AND alert_threshold_pct <= 100",
        ),
        col.check("workspace_configurations", "plan_limit_usd", "plan_limit_usd >= 0"),
        col.customer_key("workspace_configurations"),
        col.unique("workspace_configurations", "student_id"),
        col.unique("workspace_configurations", "workspace_id"),
        col.unique("workspace_configurations", "workspace_slug"),
    )


def downgrade() -> None:
    op.drop_table("workspace_configurations")
    op.drop_table("usage_snapshots")
    op.drop_table("pms_integrations")
    op.drop_table("apartments")
    op.drop_table("knowledge_allowlist")
    op.drop_table("customers")
