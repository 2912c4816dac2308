"""form_token_uses: spent one-time form tokens and the one-time hand-off of a new key

A console form that creates something carries a signed one-time token; spending it
inserts its SHA-256 here, so a reload or a double click on any replica finds it spent.
The row also holds the page the action answered with and, for a minted key, the raw
key encrypted by the vault until the page that shows it once has read it. Rows are
deleted once expired.
"""

from __future__ import annotations

from alembic import op

from pmsgate.storage.migrations import columns as col

revision = "0015"
down_revision = "0014"
# Additive: a new table nothing older reads (an older release simply issues no tokens).
backward_compatible = True


def upgrade() -> None:
    op.create_table(
        "form_token_uses",
        col.string("token_hash", 64),
        col.string("purpose", 40),
        col.string("session_hash", 64),
        col.timestamp("spent_at"),
        col.timestamp("expires_at"),
        col.string("result_path", 300, nullable=True),
        col.text("handoff", nullable=True),
        col.timestamp("handoff_expires_at", nullable=True),
        col.primary_key("form_token_uses", "token_hash"),
    )
    col.create_index("form_token_uses", ["expires_at"])


def downgrade() -> None:
    col.drop_table("form_token_uses", "ix_form_token_uses_expires_at")
