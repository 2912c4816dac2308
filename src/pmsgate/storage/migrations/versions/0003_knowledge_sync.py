"""knowledge sync: page states and sync jobs

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 07:10:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "knowledge_page_states",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("student_id", sa.String(length=64), nullable=False),
        sa.Column("notes_page_id", sa.String(length=100), nullable=False),
        sa.Column("page_edited_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("read_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("format_version", sa.Integer(), nullable=False),
        sa.Column("template_complete", sa.Boolean(), nullable=False),
        sa.Column("missing_sections", sa.JSON(), nullable=False),
        sa.Column("wifi_found", sa.Boolean(), nullable=False),
        sa.Column("wifi_source_key", sa.String(length=200), nullable=True),
        sa.Column("node_hashes", sa.JSON(), nullable=False),
        sa.Column("synced_listing_id", sa.String(length=100), nullable=True),
        sa.Column("synced_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["student_id"],
            ["customers.student_id"],
            name=op.f("fk_knowledge_page_states_student_id_customers"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_knowledge_page_states")),
        sa.UniqueConstraint(
            "student_id", "notes_page_id", name=op.f("uq_knowledge_page_states_page")
        ),
    )
    op.create_table(
        "knowledge_sync_jobs",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("student_id", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("progress_done", sa.Integer(), nullable=False),
        sa.Column("progress_total", sa.Integer(), nullable=False),
        sa.Column("counters", sa.JSON(), nullable=True),
        sa.Column("report", sa.JSON(), nullable=True),
        sa.Column("error_code", sa.String(length=64), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("runner_id", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "kind IN ('dry_run', 'commit')", name=op.f("ck_knowledge_sync_jobs_kind")
        ),
        sa.CheckConstraint(
            "status IN ('queued', 'running', 'succeeded', 'failed')",
            name=op.f("ck_knowledge_sync_jobs_status"),
        ),
        sa.CheckConstraint(
            "progress_done >= 0 AND progress_total >= 0",
            name=op.f("ck_knowledge_sync_jobs_progress_non_negative"),
        ),
        sa.ForeignKeyConstraint(
            ["student_id"],
            ["customers.student_id"],
            name=op.f("fk_knowledge_sync_jobs_student_id_customers"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_knowledge_sync_jobs")),
    )
    op.create_index(
        op.f("ix_knowledge_sync_jobs_student_created_at"),
        "knowledge_sync_jobs",
        ["student_id", "created_at"],
        unique=False,
    )
    op.create_index(
        op.f("uq_knowledge_sync_jobs_one_active"),
        "knowledge_sync_jobs",
        ["student_id"],
        unique=True,
        sqlite_where=sa.text("status IN ('queued', 'running')"),
        postgresql_where=sa.text("status IN ('queued', 'running')"),
    )


def downgrade() -> None:
    op.drop_index(op.f("uq_knowledge_sync_jobs_one_active"), table_name="knowledge_sync_jobs")
    op.drop_index(
        op.f("ix_knowledge_sync_jobs_student_created_at"), table_name="knowledge_sync_jobs"
    )
    op.drop_table("knowledge_sync_jobs")
    op.drop_table("knowledge_page_states")
