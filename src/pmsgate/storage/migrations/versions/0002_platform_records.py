"""platform records: customers workspaces integrations apartments usage allowlist

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 06:37:05.672573
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "customers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("student_id", sa.String(length=64), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("contract_ref", sa.String(length=100), nullable=True),
        sa.Column("contract_price_id", sa.String(length=100), nullable=True),
        sa.Column("subscription_id", sa.String(length=100), nullable=True),
        sa.Column("subscription_status", sa.String(length=32), nullable=True),
        sa.Column("subscription_price_id", sa.String(length=100), nullable=True),
        sa.Column("handles_upsell", sa.Boolean(), nullable=False),
        sa.Column("handles_late_check_in", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("kind IN ('partner', 'own')", name=op.f("ck_customers_kind")),
        sa.CheckConstraint(
            "subscription_status IS NULL OR subscription_status IN ('active', 'trialing', "
            "'past_due', 'unpaid', 'canceled', 'incomplete', 'incomplete_expired', 'paused')",
            name=op.f("ck_customers_subscription_status"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_customers")),
        sa.UniqueConstraint("student_id", name=op.f("uq_customers_student_id")),
    )
    op.create_table(
        "knowledge_allowlist",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=False),
        sa.Column("added_on", sa.Date(), nullable=False),
        sa.Column("contract", sa.String(length=100), nullable=False),
        sa.Column("workspace", sa.String(length=200), nullable=False),
        sa.Column("apartments", sa.Integer(), nullable=True),
        sa.Column("subscription", sa.String(length=100), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_knowledge_allowlist")),
        sa.UniqueConstraint("email", name=op.f("uq_knowledge_allowlist_email")),
    )
    op.create_table(
        "apartments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("student_id", sa.String(length=64), nullable=False),
        sa.Column("pms_room_type_id", sa.String(length=64), nullable=False),
        sa.Column("assistant_listing_id", sa.String(length=100), nullable=True),
        sa.Column("notes_page_id", sa.String(length=100), nullable=True),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["student_id"],
            ["customers.student_id"],
            name=op.f("fk_apartments_student_id_customers"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_apartments")),
        sa.UniqueConstraint(
            "student_id", "assistant_listing_id", name=op.f("uq_apartments_student_listing")
        ),
        sa.UniqueConstraint(
            "student_id", "notes_page_id", name=op.f("uq_apartments_student_notes_page")
        ),
        sa.UniqueConstraint(
            "student_id", "pms_room_type_id", name=op.f("uq_apartments_student_room_type")
        ),
    )
    op.create_table(
        "pms_integrations",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("student_id", sa.String(length=64), nullable=False),
        sa.Column("provider", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("status_changed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("facility_id", sa.Integer(), nullable=True),
        sa.Column("notes_workspace_id", sa.String(length=100), nullable=True),
        sa.Column("apartments_database_id", sa.String(length=100), nullable=True),
        sa.Column("token_enc", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "provider = 'kross' OR facility_id IS NULL",
            name=op.f("ck_pms_integrations_facility_on_kross"),
        ),
        sa.CheckConstraint(
            "provider = 'notes' OR (notes_workspace_id IS NULL "
            "AND apartments_database_id IS NULL AND token_enc IS NULL)",
            name=op.f("ck_pms_integrations_notes_fields_on_notes"),
        ),
        sa.CheckConstraint(
            "provider IN ('notes', 'kross')", name=op.f("ck_pms_integrations_provider")
        ),
        sa.CheckConstraint(
            "status IN ('connected', 'error')", name=op.f("ck_pms_integrations_status")
        ),
        sa.CheckConstraint(
            "id <> student_id", name=op.f("ck_pms_integrations_id_is_not_student_id")
        ),
        sa.ForeignKeyConstraint(
            ["facility_id"],
            ["facilities.id"],
            name=op.f("fk_pms_integrations_facility_id_facilities"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["student_id"],
            ["customers.student_id"],
            name=op.f("fk_pms_integrations_student_id_customers"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pms_integrations")),
        sa.UniqueConstraint("facility_id", name=op.f("uq_pms_integrations_facility_id")),
        sa.UniqueConstraint(
            "student_id", "provider", name=op.f("uq_pms_integrations_student_provider")
        ),
    )
    op.create_table(
        "usage_snapshots",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("student_id", sa.String(length=64), nullable=False),
        sa.Column("workspace_id", sa.String(length=100), nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("usd_spent", sa.Numeric(precision=14, scale=4), nullable=False),
        sa.Column("messages", sa.Integer(), nullable=False),
        sa.Column("tool_calls", sa.Integer(), nullable=False),
        sa.Column("upstream_calls", sa.Integer(), nullable=False),
        sa.Column("details", sa.JSON(), nullable=True),
        sa.CheckConstraint(
            "kind IN ('baseline', 'periodic')", name=op.f("ck_usage_snapshots_kind")
        ),
        sa.CheckConstraint(
            "usd_spent >= 0 AND messages >= 0 AND tool_calls >= 0 AND upstream_calls >= 0",
            name=op.f("ck_usage_snapshots_non_negative"),
        ),
        sa.ForeignKeyConstraint(
            ["student_id"],
            ["customers.student_id"],
            name=op.f("fk_usage_snapshots_student_id_customers"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_usage_snapshots")),
        sa.UniqueConstraint(
            "student_id", "kind", "taken_at", name=op.f("uq_usage_snapshots_student_kind_taken_at")
        ),
    )
    op.create_index(
        op.f("ix_usage_snapshots_student_taken_at"),
        "usage_snapshots",
        ["student_id", "taken_at"],
        unique=False,
    )
    op.create_index(
        op.f("uq_usage_snapshots_one_baseline"),
        "usage_snapshots",
        ["student_id"],
        unique=True,
        sqlite_where=sa.text("kind = 'baseline'"),
        postgresql_where=sa.text("kind = 'baseline'"),
    )
    op.create_table(
        "workspace_configurations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("student_id", sa.String(length=64), nullable=False),
        sa.Column("workspace_id", sa.String(length=100), nullable=True),
        sa.Column("workspace_name", sa.String(length=200), nullable=False),
        sa.Column("workspace_slug", sa.String(length=100), nullable=False),
        sa.Column("plan_limit_usd", sa.Numeric(precision=12, scale=2), nullable=False),
        sa.Column("alert_threshold_pct", sa.Integer(), nullable=False),
        sa.Column("billing_mode", sa.String(length=32), nullable=False),
        sa.Column("notes", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "billing_mode IN ('partner_markup')",
            name=op.f("ck_workspace_configurations_billing_mode"),
        ),
        sa.CheckConstraint(
            "alert_threshold_pct >= 1 AND alert_threshold_pct <= 100",
            name=op.f("ck_workspace_configurations_alert_threshold_pct"),
        ),
        sa.CheckConstraint(
            "plan_limit_usd >= 0", name=op.f("ck_workspace_configurations_plan_limit_usd")
        ),
        sa.ForeignKeyConstraint(
            ["student_id"],
            ["customers.student_id"],
            name=op.f("fk_workspace_configurations_student_id_customers"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workspace_configurations")),
        sa.UniqueConstraint("student_id", name=op.f("uq_workspace_configurations_student_id")),
        sa.UniqueConstraint("workspace_id", name=op.f("uq_workspace_configurations_workspace_id")),
        sa.UniqueConstraint(
            "workspace_slug", name=op.f("uq_workspace_configurations_workspace_slug")
        ),
    )


def downgrade() -> None:
    op.drop_table("workspace_configurations")
    op.drop_table("usage_snapshots")
    op.drop_table("pms_integrations")
    op.drop_table("apartments")
    op.drop_table("knowledge_allowlist")
    op.drop_table("customers")
