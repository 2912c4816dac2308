"""incident notices and one-time sign-in links; when a facility's status last changed

Incidents told, not discovered (docs/operations.md, Notifications):
``facilities.status_changed_at`` names an incident (the moment the facility went to
``error``); ``incident_notices`` holds one row per (facility, incident, kind, channel) —
the unique key that makes every replica send each notice at most once; ``login_links``
holds the SHA-256 of each one-time sign-in link (never the token), bound to one console
account, with its expiry and its use.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24 21:40:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("facilities") as batch:
        batch.add_column(sa.Column("status_changed_at", sa.DateTime(timezone=True), nullable=True))
    # Existing facilities: their last update is the best known moment of their status.
    op.execute("UPDATE facilities SET status_changed_at = updated_at")
    op.create_table(
        "incident_notices",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("facility_id", sa.Integer(), nullable=False),
        sa.Column("incident_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("channel", sa.String(length=16), nullable=False),
        sa.Column("recipient", sa.String(length=320), nullable=False),
        sa.Column("student_id", sa.String(length=64), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("claimed_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("kind IN ('error', 'recovered')", name=op.f("ck_incident_notices_kind")),
        sa.CheckConstraint(
            "channel IN ('customer', 'team', 'webhook')",
            name=op.f("ck_incident_notices_channel"),
        ),
        sa.CheckConstraint(
            "status IN ('pending', 'sent', 'failed', 'skipped')",
            name=op.f("ck_incident_notices_status"),
        ),
        sa.ForeignKeyConstraint(
            ["facility_id"],
            ["facilities.id"],
            name=op.f("fk_incident_notices_facility_id_facilities"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_incident_notices")),
        # One notice per facility, incident, kind and channel: replicas never send twice.
        sa.UniqueConstraint(
            "facility_id",
            "incident_at",
            "kind",
            "channel",
            name=op.f("uq_incident_notices_facility_id"),
        ),
    )
    op.create_index(
        op.f("ix_incident_notices_status"), "incident_notices", ["status"], unique=False
    )
    op.create_table(
        "login_links",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(length=300), nullable=False),
        sa.Column("purpose", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_login_links_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_login_links")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_login_links_token_hash")),
    )
    op.create_index(op.f("ix_login_links_expires_at"), "login_links", ["expires_at"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_login_links_expires_at"), table_name="login_links")
    op.drop_table("login_links")
    op.drop_index(op.f("ix_incident_notices_status"), table_name="incident_notices")
    op.drop_table("incident_notices")
    with op.batch_alter_table("facilities") as batch:
        batch.drop_column("status_changed_at")
