"""incidents: a facility's problem as an object the team can triage

``incidents`` holds one row per problem of one subject (a facility in ``error``, a
scheduled job that keeps failing, a customer's registry check with problems, a facility
whose daily budget is spent), from the moment it is seen to its recovery: first and last
seen, the count of failed attempts, its state (open, acknowledged, snoozed, resolved) and
assignee. The unique (kind, open_key) — ``open_key`` NULL once resolved — lets every
replica's reconciliation open the same incident while one row exists. ``incident_events``
is each incident's timeline (the notices stay in ``incident_notices``).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26 22:50:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "incidents",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("subject", sa.String(length=200), nullable=False),
        sa.Column("open_key", sa.String(length=200), nullable=True),
        sa.Column("facility_id", sa.Integer(), nullable=True),
        sa.Column("student_id", sa.String(length=64), nullable=True),
        sa.Column("job", sa.String(length=64), nullable=True),
        sa.Column("incident_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("reason", sa.String(length=300), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("last_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("acknowledged_by", sa.String(length=200), nullable=True),
        sa.Column("acknowledged_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("snoozed_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("assignee_id", sa.Integer(), nullable=True),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "kind IN ('pms_error', 'job_failing', 'registry', 'budget')",
            name=op.f("ck_incidents_kind"),
        ),
        sa.CheckConstraint(
            "state IN ('open', 'acknowledged', 'snoozed', 'resolved')",
            name=op.f("ck_incidents_state"),
        ),
        sa.ForeignKeyConstraint(
            ["facility_id"],
            ["facilities.id"],
            name=op.f("fk_incidents_facility_id_facilities"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["assignee_id"],
            ["users.id"],
            name=op.f("fk_incidents_assignee_id_users"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_incidents")),
        # One unresolved incident per kind and subject, whichever replica opens it.
        sa.UniqueConstraint("kind", "open_key", name=op.f("uq_incidents_kind")),
    )
    op.create_index(op.f("ix_incidents_state"), "incidents", ["state"], unique=False)
    op.create_index(op.f("ix_incidents_facility_id"), "incidents", ["facility_id"], unique=False)
    op.create_index(op.f("ix_incidents_student_id"), "incidents", ["student_id"], unique=False)
    op.create_table(
        "incident_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("incident_id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.CheckConstraint(
            "kind IN ('opened', 'acknowledged', 'assigned', 'snoozed', 'woke', 'note', "
            "'check', 'link_resent', 'recovered')",
            name=op.f("ck_incident_events_kind"),
        ),
        sa.ForeignKeyConstraint(
            ["incident_id"],
            ["incidents.id"],
            name=op.f("fk_incident_events_incident_id_incidents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_incident_events")),
    )
    op.create_index(
        op.f("ix_incident_events_incident_id"), "incident_events", ["incident_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_incident_events_incident_id"), table_name="incident_events")
    op.drop_table("incident_events")
    op.drop_index(op.f("ix_incidents_student_id"), table_name="incidents")
    op.drop_index(op.f("ix_incidents_facility_id"), table_name="incidents")
    op.drop_index(op.f("ix_incidents_state"), table_name="incidents")
    op.drop_table("incidents")
