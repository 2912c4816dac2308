"""webhooks: signed event webhooks (subscriptions, the event outbox, deliveries)

``webhook_subscriptions`` holds one receiver each: a customer's (``student_id``) or the
team's (``student_id`` NULL, every customer's events), its URL, the events it wants and
its signing secret sealed by the vault (``secret_enc``); during a rotation the previous
secret (``previous_secret_enc``) signs too until ``previous_secret_expires_at``.
``webhook_events`` is the outbox: one row per event (``msg_…`` id), written in the
transaction of the change it reports; ``fanned_out_at`` is set once its deliveries exist.
``webhook_deliveries`` is one event to one subscription (unique pair: delivered once per
subscription whichever replica sends it) with its attempts, the next attempt's time and
the lease (``claimed_until``) of the replica sending it.
"""

from __future__ import annotations

from alembic import op

from pmsgate.storage.migrations import columns as col

revision = "0017"
down_revision = "0016"
# Additive: new tables nothing older reads (an older release emits and delivers nothing).
backward_compatible = True

EVENT_TYPES = (
    "type IN ('facility.connection_lost', 'facility.connection_restored', "
    "'facility.budget_exhausted', 'knowledge.sync_finished', "
    "'knowledge.sync_failed', 'onboarding.completed')"
)


def upgrade() -> None:
    col.create_id_table(
        "webhook_subscriptions",
        col.student_id(nullable=True),
        col.string("url", 2000),
        col.string("description", 200),
        col.json("events"),
        col.text("secret_enc"),
        col.text("previous_secret_enc", nullable=True),
        col.timestamp("previous_secret_expires_at", nullable=True),
        col.boolean("enabled"),
        col.string("disabled_reason", 64, nullable=True),
        col.string("created_by", 200),
        *col.timestamps(),
        col.customer_key("webhook_subscriptions", ondelete="CASCADE"),
    )
    col.create_index("webhook_subscriptions", ["student_id"])
    op.create_table(
        "webhook_events",
        col.string("id", 40),
        col.string("type", 64),
        col.student_id(nullable=True),
        col.facility_id(nullable=True),
        col.json("payload"),
        col.timestamp("occurred_at"),
        col.timestamp("fanned_out_at", nullable=True),
        col.check("webhook_events", "type", EVENT_TYPES),
        col.primary_key("webhook_events"),
    )
    col.create_indexes("webhook_events", "fanned_out_at", "occurred_at")
    col.create_id_table(
        "webhook_deliveries",
        col.string("event_id", 40),
        col.integer("subscription_id"),
        col.string("status", 16),
        col.integer("attempts"),
        col.timestamp("next_attempt_at", nullable=True),
        col.timestamp("claimed_until", nullable=True),
        col.timestamp("last_attempt_at", nullable=True),
        col.integer("response_status", nullable=True),
        col.string("last_error", 200, nullable=True),
        col.timestamp("delivered_at", nullable=True),
        *col.timestamps(),
        col.check(
            "webhook_deliveries",
            "status",
            "status IN ('pending', 'delivered', 'failed', 'disabled')",
        ),
        col.foreign_key("webhook_deliveries", "event_id", "webhook_events.id", ondelete="CASCADE"),
        col.foreign_key(
            "webhook_deliveries",
            "subscription_id",
            "webhook_subscriptions.id",
            ondelete="CASCADE",
        ),
        # One delivery of an event per subscription, however many replicas fan it out.
        col.unique("webhook_deliveries", "event_id", "subscription_id"),
    )
    col.create_index(
        "webhook_deliveries", ["status", "next_attempt_at"], name="ix_webhook_deliveries_due"
    )
    col.create_index("webhook_deliveries", ["subscription_id"])


def downgrade() -> None:
    col.drop_table(
        "webhook_deliveries",
        "ix_webhook_deliveries_subscription_id",
        "ix_webhook_deliveries_due",
    )
    col.drop_table(
        "webhook_events", "ix_webhook_events_occurred_at", "ix_webhook_events_fanned_out_at"
    )
    col.drop_table("webhook_subscriptions", "ix_webhook_subscriptions_student_id")
