"""onboarding: runs and step results with evidence

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 09:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "onboarding_runs",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("student_id", sa.String(length=64), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("route", sa.String(length=1), nullable=True),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at_step", sa.String(length=64), nullable=True),
        sa.Column("error_code", sa.String(length=64), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "status IN ('running', 'succeeded', 'failed', 'stopped')",
            name=op.f("ck_onboarding_runs_status"),
        ),
        sa.CheckConstraint(
            "route IS NULL OR route IN ('A', 'B')", name=op.f("ck_onboarding_runs_route")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_onboarding_runs")),
        sa.UniqueConstraint("student_id", "number", name=op.f("uq_onboarding_runs_student_number")),
    )
    op.create_index(
        op.f("ix_onboarding_runs_student_started_at"),
        "onboarding_runs",
        ["student_id", "started_at"],
        unique=False,
    )
    op.create_table(
        "onboarding_step_results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=32), nullable=True),
        sa.Column("student_id", sa.String(length=64), nullable=False),
        sa.Column("step_id", sa.String(length=64), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("done", sa.Boolean(), nullable=False),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("fix", sa.Text(), nullable=True),
        sa.Column("waiting_for", sa.Text(), nullable=True),
        sa.Column("due", sa.Date(), nullable=True),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("recorded_by", sa.String(length=16), nullable=False),
        sa.Column("person", sa.String(length=200), nullable=True),
        sa.CheckConstraint(
            "status IN ('done', 'not_done', 'waiting', 'would_do', 'failed', 'stopped')",
            name=op.f("ck_onboarding_step_results_status"),
        ),
        sa.CheckConstraint(
            "kind IN ('auto', 'check', 'manual')", name=op.f("ck_onboarding_step_results_kind")
        ),
        sa.CheckConstraint(
            "recorded_by IN ('system', 'person')",
            name=op.f("ck_onboarding_step_results_recorded_by"),
        ),
        sa.CheckConstraint(
            "number >= 1 AND number <= 17", name=op.f("ck_onboarding_step_results_number")
        ),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["onboarding_runs.id"],
            name=op.f("fk_onboarding_step_results_run_id_onboarding_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_onboarding_step_results")),
    )
    op.create_index(
        op.f("ix_onboarding_step_results_student_step"),
        "onboarding_step_results",
        ["student_id", "step_id", "id"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index(
        op.f("ix_onboarding_step_results_student_step"), table_name="onboarding_step_results"
    )
    op.drop_table("onboarding_step_results")
    op.drop_index(op.f("ix_onboarding_runs_student_started_at"), table_name="onboarding_runs")
    op.drop_table("onboarding_runs")
