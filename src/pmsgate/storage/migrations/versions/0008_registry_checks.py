"""registry_checks: the latest apartment-registry check of each customer

An apartment mapped to the wrong listing (docs/requirements.md R18.3, R18.5): one row
per customer, replaced by each check (the ``check-registry`` job, the console, the CLI),
so the console and the admin's "needs attention" view read it without a platform call.
"""

from __future__ import annotations

from alembic import op

from pmsgate.storage.migrations import columns as col

revision = "0008"
down_revision = "0007"


def upgrade() -> None:
    op.create_table(
        "registry_checks",
        col.student_id(),
        col.timestamp("checked_at"),
        col.string("status", 16),
        col.integer("problems"),
        col.json("report"),
        col.check(
            "registry_checks",
            "status",
            "status IN ('ok', 'problems', 'unchecked', 'not_applicable')",
        ),
        col.customer_key("registry_checks", ondelete="CASCADE"),
        col.primary_key("registry_checks", "student_id"),
    )
    col.create_index("registry_checks", ["status"])


def downgrade() -> None:
    col.drop_table("registry_checks", "ix_registry_checks_status")
