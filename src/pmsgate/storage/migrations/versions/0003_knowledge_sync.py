"""knowledge sync: page states and sync jobs"""

from __future__ import annotations

from alembic import op

from pmsgate.storage.migrations import columns as col

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    col.create_id_table(
        "knowledge_page_states",
        col.student_id(),
        col.string("notes_page_id", 100),
        col.timestamp("page_edited_at", nullable=True),
        col.timestamp("read_at"),
        col.integer("format_version"),
        col.boolean("template_complete"),
        col.json("missing_sections"),
        col.boolean("wifi_found"),
        col.string("wifi_source_key", 200, nullable=True),
        col.json("node_hashes"),
        col.string("synced_listing_id", 100, nullable=True),
        col.timestamp("synced_at", nullable=True),
        col.timestamp("updated_at"),
        col.customer_key("knowledge_page_states"),
        col.unique("knowledge_page_states", "student_id", "notes_page_id", name="page"),
    )
    op.create_table(
        "knowledge_sync_jobs",
        col.string("id", 32),
        col.student_id(),
        col.string("kind", 16),
        col.string("status", 16),
        col.integer("progress_done"),
        col.integer("progress_total"),
        col.json("counters", nullable=True),
        col.json("report", nullable=True),
        col.string("error_code", 64, nullable=True),
        col.text("error", nullable=True),
        col.string("runner_id", 64),
        col.timestamp("created_at"),
        col.timestamp("started_at", nullable=True),
        col.timestamp("heartbeat_at", nullable=True),
        col.timestamp("finished_at", nullable=True),
        col.check("knowledge_sync_jobs", "kind", "kind IN ('dry_run', 'commit')"),
        col.check(
            "knowledge_sync_jobs",
            "status",
            "status IN ('queued', 'running', 'succeeded', 'failed')",
        ),
        col.check(
            "knowledge_sync_jobs",
            "progress_non_negative",
            "progress_done >= 0 AND progress_total >= 0",
        ),
        col.customer_key("knowledge_sync_jobs"),
        col.primary_key("knowledge_sync_jobs"),
    )
    col.create_index(
        "knowledge_sync_jobs",
        ["student_id", "created_at"],
        name="ix_knowledge_sync_jobs_student_created_at",
    )
    col.create_index(
        "knowledge_sync_jobs",
        ["student_id"],
        name="uq_knowledge_sync_jobs_one_active",
        unique=True,
        where="status IN ('queued', 'running')",
    )


def downgrade() -> None:
    col.drop_table(
        "knowledge_sync_jobs",
        "uq_knowledge_sync_jobs_one_active",
        "ix_knowledge_sync_jobs_student_created_at",
    )
    op.drop_table("knowledge_page_states")
