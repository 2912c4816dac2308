"""web app and scheduled jobs: users, sessions, hourly gateway usage, job runs

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22 12:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("email", sa.String(length=254), nullable=False),
        sa.Column("password_hash", sa.Text(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("student_id", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_login_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("role IN ('customer', 'admin')", name=op.f("ck_users_role")),
        sa.CheckConstraint(
            "(role = 'customer' AND student_id IS NOT NULL) "
            "OR (role = 'admin' AND student_id IS NULL)",
            name=op.f("ck_users_role_student"),
        ),
        sa.ForeignKeyConstraint(
            ["student_id"],
            ["customers.student_id"],
            name=op.f("fk_users_student_id_customers"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("email", name=op.f("uq_users_email")),
    )
    op.create_table(
        "web_sessions",
        sa.Column("id_hash", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("csrf_token", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_web_sessions_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id_hash", name=op.f("pk_web_sessions")),
    )
    op.create_index(op.f("ix_web_sessions_user_id"), "web_sessions", ["user_id"], unique=False)
    op.create_table(
        "gateway_usage_hours",
        sa.Column("hotel_id", sa.String(length=32), nullable=False),
        sa.Column("hour", sa.DateTime(timezone=True), nullable=False),
        sa.Column("tool_calls", sa.Integer(), nullable=False),
        sa.Column("upstream_calls", sa.Integer(), nullable=False),
        sa.CheckConstraint(
            "tool_calls >= 0 AND upstream_calls >= 0",
            name=op.f("ck_gateway_usage_hours_non_negative"),
        ),
        sa.PrimaryKeyConstraint("hotel_id", "hour", name=op.f("pk_gateway_usage_hours")),
    )
    op.create_table(
        "job_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=True),
        sa.CheckConstraint(
            "status IN ('running', 'succeeded', 'failed')", name=op.f("ck_job_runs_status")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_runs")),
    )
    op.create_index(
        op.f("ix_job_runs_job_started_at"), "job_runs", ["job", "started_at"], unique=False
    )
    with op.batch_alter_table("pms_integrations") as batch:
        batch.add_column(
            sa.Column("listings_sync_due_at", sa.DateTime(timezone=True), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("pms_integrations") as batch:
        batch.drop_column("listings_sync_due_at")
    op.drop_index(op.f("ix_job_runs_job_started_at"), table_name="job_runs")
    op.drop_table("job_runs")
    op.drop_table("gateway_usage_hours")
    op.drop_index(op.f("ix_web_sessions_user_id"), table_name="web_sessions")
    op.drop_table("web_sessions")
    op.drop_table("users")
