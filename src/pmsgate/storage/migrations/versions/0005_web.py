"""web app and scheduled jobs: users, sessions, hourly gateway usage, job runs"""

from __future__ import annotations

from alembic import op

from pmsgate.storage.migrations import columns as col

revision = "0005"
down_revision = "0004"


def upgrade() -> None:
    col.create_id_table(
        "users",
        col.string("email", 254),
        col.text("password_hash"),
        col.string("role", 16),
        col.student_id(nullable=True),
        *col.timestamps(),
        col.timestamp("last_login_at", nullable=True),
        col.check("users", "role", "role IN ('customer', 'admin')"),
        col.check(
            "users",
            "role_student",
            "(role = 'customer' AND student_id IS NOT NULL) "
            "OR (role = 'admin' AND student_id IS NULL)",
        ),
        col.customer_key("users"),
        col.unique("users", "email"),
    )
    op.create_table(
        "web_sessions",
        col.string("id_hash", 64),
        col.integer("user_id"),
        col.string("csrf_token", 64),
        *col.expiring(),
        col.timestamp("last_seen_at"),
        col.foreign_key("web_sessions", "user_id", "users.id", ondelete="CASCADE"),
        col.primary_key("web_sessions", "id_hash"),
    )
    col.create_index("web_sessions", ["user_id"])
    op.create_table(
        "gateway_usage_hours",
        col.string("hotel_id", 32),
        col.timestamp("hour"),
        col.integer("tool_calls"),
        col.integer("upstream_calls"),
        col.check("gateway_usage_hours", "non_negative", "tool_calls >= 0 AND upstream_calls >= 0"),
        col.primary_key("gateway_usage_hours", "hotel_id", "hour"),
    )
    col.create_id_table(
        "job_runs",
        col.string("job", 64),
        col.string("status", 16),
        col.timestamp("started_at"),
        col.timestamp("finished_at", nullable=True),
        col.json("detail", nullable=True),
        col.check("job_runs", "status", "status IN ('running', 'succeeded', 'failed')"),
    )
    col.create_index("job_runs", ["job", "started_at"])
    col.add_columns("pms_integrations", col.timestamp("listings_sync_due_at", nullable=True))


def downgrade() -> None:
    col.drop_columns("pms_integrations", "listings_sync_due_at")
    col.drop_table("job_runs", "ix_job_runs_job_started_at")
    op.drop_table("gateway_usage_hours")
    col.drop_table("web_sessions", "ix_web_sessions_user_id")
    op.drop_table("users")
