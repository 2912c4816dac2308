"""registry_checks: the latest apartment-registry check of each customer

An apartment mapped to the wrong listing (docs/requirements.md R18.3, R18.5): one row
per customer, replaced by each check (the ``check-registry`` job, the console, the CLI),
so the console and the admin's "needs attention" view read it without a platform call.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24 21:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "registry_checks",
        sa.Column("student_id", sa.String(length=64), nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("problems", sa.Integer(), nullable=False),
        sa.Column("report", sa.JSON(), nullable=False),
        sa.CheckConstraint(
            "status IN ('ok', 'problems', 'unchecked', 'not_applicable')",
            name=op.f("ck_registry_checks_status"),
        ),
        sa.ForeignKeyConstraint(
            ["student_id"],
            ["customers.student_id"],
            name=op.f("fk_registry_checks_student_id_customers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("student_id", name=op.f("pk_registry_checks")),
    )
    op.create_index(op.f("ix_registry_checks_status"), "registry_checks", ["status"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_registry_checks_status"), table_name="registry_checks")
    op.drop_table("registry_checks")
