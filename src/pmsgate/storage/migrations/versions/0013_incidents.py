"""incidents: a facility's problem as an object the team can triage

``incidents`` holds one row per problem of one subject (a facility in ``error``, a
scheduled job that keeps failing, a customer's registry check with problems, a facility
whose daily budget is spent), from the moment it is seen to its recovery: first and last
seen, the count of failed attempts, its state (open, acknowledged, snoozed, resolved) and
assignee. The unique (kind, open_key) — ``open_key`` NULL once resolved — lets every
replica's reconciliation open the same incident while one row exists. ``incident_events``
is each incident's timeline (the notices stay in ``incident_notices``).
"""

from __future__ import annotations

from pmsgate.storage.migrations import columns as col

revision = "0013"
down_revision = "0012"


def upgrade() -> None:
    col.create_id_table(
        "incidents",
        col.string("kind", 16),
        col.string("subject", 200),
        col.string("open_key", 200, nullable=True),
        col.facility_id(nullable=True),
        col.student_id(nullable=True),
        col.string("job", 64, nullable=True),
        col.timestamp("incident_at", nullable=True),
        col.string("reason", 300, nullable=True),
        col.string("state", 16),
        col.timestamp("first_seen"),
        col.timestamp("last_seen"),
        col.integer("failures"),
        col.timestamp("last_attempt_at", nullable=True),
        col.string("acknowledged_by", 200, nullable=True),
        col.timestamp("acknowledged_at", nullable=True),
        col.timestamp("snoozed_until", nullable=True),
        col.integer("assignee_id", nullable=True),
        col.timestamp("resolved_at", nullable=True),
        col.timestamp("updated_at"),
        col.check(
            "incidents", "kind", "kind IN ('pms_error', 'job_failing', 'registry', 'budget')"
        ),
        col.check("incidents", "state", "state IN ('open', 'acknowledged', 'snoozed', 'resolved')"),
        col.facility_key("incidents"),
        col.foreign_key("incidents", "assignee_id", "users.id", ondelete="SET NULL"),
        # One unresolved incident per kind and subject, whichever replica opens it.
        col.unique("incidents", "kind", "open_key"),
    )
    col.create_indexes("incidents", "state", "facility_id", "student_id")
    col.create_id_table(
        "incident_events",
        col.integer("incident_id"),
        col.timestamp("at"),
        col.string("kind", 16),
        col.string("actor", 200),
        col.text("note", nullable=True),
        col.json("details"),
        col.check(
            "incident_events",
            "kind",
            "kind IN ('opened', 'acknowledged', 'assigned', 'snoozed', 'woke', 'note', "
            "'check', 'link_resent', 'recovered')",
        ),
        col.foreign_key("incident_events", "incident_id", "incidents.id", ondelete="CASCADE"),
    )
    col.create_index("incident_events", ["incident_id"])


def downgrade() -> None:
    col.drop_table("incident_events", "ix_incident_events_incident_id")
    col.drop_table(
        "incidents", "ix_incidents_student_id", "ix_incidents_facility_id", "ix_incidents_state"
    )
