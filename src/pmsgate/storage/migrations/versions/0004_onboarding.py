"""onboarding: runs and step results with evidence"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from pmsgate.storage.migrations import columns as col

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    op.create_table(
        "onboarding_runs",
        col.string("id", 32),
        col.student_id(),
        col.integer("number"),
        col.string("status", 16),
        col.string("route", 1, nullable=True),
        col.boolean("dry_run"),
        col.timestamp("started_at"),
        col.timestamp("finished_at", nullable=True),
        col.string("ended_at_step", 64, nullable=True),
        col.string("error_code", 64, nullable=True),
        col.text("message", nullable=True),
        col.check(
            "onboarding_runs", "status", "status IN ('running', 'succeeded', 'failed', 'stopped')"
        ),
        col.check("onboarding_runs", "route", "route IS NULL OR route IN ('A', 'B')"),
        col.primary_key("onboarding_runs"),
        col.unique("onboarding_runs", "student_id", "number", name="student_number"),
    )
    col.create_index(
        "onboarding_runs",
        ["student_id", "started_at"],
        name="ix_onboarding_runs_student_started_at",
    )
    col.create_id_table(
        "onboarding_step_results",
        col.string("run_id", 32, nullable=True),
        col.student_id(),
        col.string("step_id", 64),
        col.integer("number"),
        col.string("kind", 16),
        col.string("status", 16),
        col.boolean("done"),
        col.boolean("dry_run"),
        col.json("evidence"),
        col.text("message"),
        col.text("fix", nullable=True),
        col.text("waiting_for", nullable=True),
        sa.Column("due", sa.Date(), nullable=True),
        col.timestamp("recorded_at"),
        col.string("recorded_by", 16),
        col.string("person", 200, nullable=True),
        col.check(
            "onboarding_step_results",
            "status",
            "status IN ('done', 'not_done', 'waiting', 'would_do', 'failed', 'stopped')",
        ),
        col.check("onboarding_step_results", "kind", "kind IN ('auto', 'check', 'manual')"),
        col.check("onboarding_step_results", "recorded_by", "recorded_by IN ('system', 'person')"),
        col.check("onboarding_step_results", "number", "number >= 1 AND number <= 17"),
        col.foreign_key(
            "onboarding_step_results", "run_id", "onboarding_runs.id", ondelete="CASCADE"
        ),
    )
    col.create_index(
        "onboarding_step_results",
        ["student_id", "step_id", "id"],
        name="ix_onboarding_step_results_student_step",
    )


def downgrade() -> None:
    col.drop_table("onboarding_step_results", "ix_onboarding_step_results_student_step")
    col.drop_table("onboarding_runs", "ix_onboarding_runs_student_started_at")
