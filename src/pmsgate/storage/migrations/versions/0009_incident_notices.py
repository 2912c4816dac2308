"""incident notices and one-time sign-in links; when a facility's status last changed

Incidents told, not discovered (docs/operations.md, Notifications):
``facilities.status_changed_at`` names an incident (the moment the facility went to
``error``); ``incident_notices`` holds one row per (facility, incident, kind, channel) —
the unique key that makes every replica send each notice at most once; ``login_links``
holds the SHA-256 of each one-time sign-in link (never the token), bound to one console
account, with its expiry and its use.
"""

from __future__ import annotations

from alembic import op

from pmsgate.storage.migrations import columns as col

revision = "0009"
down_revision = "0008"


def upgrade() -> None:
    col.add_columns("facilities", col.timestamp("status_changed_at", nullable=True))
    # Existing facilities: their last update is the best known moment of their status.
    op.execute("UPDATE facilities SET status_changed_at = updated_at")
    col.create_id_table(
        "incident_notices",
        col.facility_id(),
        col.timestamp("incident_at"),
        col.string("kind", 16),
        col.string("channel", 16),
        col.string("recipient", 320),
        col.student_id(nullable=True),
        col.string("status", 16),
        col.integer("attempts"),
        col.timestamp("claimed_until", nullable=True),
        col.string("last_error", 200, nullable=True),
        *col.timestamps(),
        col.timestamp("sent_at", nullable=True),
        col.check("incident_notices", "kind", "kind IN ('error', 'recovered')"),
        col.check("incident_notices", "channel", "channel IN ('customer', 'team', 'webhook')"),
        col.check(
            "incident_notices", "status", "status IN ('pending', 'sent', 'failed', 'skipped')"
        ),
        col.facility_key("incident_notices"),
        # One notice per facility, incident, kind and channel: replicas never send twice.
        col.unique("incident_notices", "facility_id", "incident_at", "kind", "channel"),
    )
    col.create_index("incident_notices", ["status"])
    col.create_id_table(
        "login_links",
        col.string("token_hash", 64),
        col.integer("user_id"),
        col.string("target", 300),
        col.string("purpose", 32),
        *col.expiring(used=True),
        col.foreign_key("login_links", "user_id", "users.id", ondelete="CASCADE"),
        col.unique("login_links", "token_hash"),
    )
    col.create_index("login_links", ["expires_at"])


def downgrade() -> None:
    col.drop_table("login_links", "ix_login_links_expires_at")
    col.drop_table("incident_notices", "ix_incident_notices_status")
    col.drop_columns("facilities", "status_changed_at")
