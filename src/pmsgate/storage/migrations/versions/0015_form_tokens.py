"""form_token_uses: spent one-time form tokens and the one-time hand-off of a new key

A console form that creates something carries a signed one-time token; spending it
inserts its SHA-256 here, so a reload or a double click on any replica finds it spent.
The row also holds the page the action answered with and, for a minted key, the raw
key encrypted by the vault until the page that shows it once has read it. Rows are
deleted once expired.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-26 23:10:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None
# Additive: a new table nothing older reads (an older release simply issues no tokens).
backward_compatible = True


def upgrade() -> None:
    op.create_table(
        "form_token_uses",
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("purpose", sa.String(length=40), nullable=False),
        sa.Column("session_hash", sa.String(length=64), nullable=False),
        sa.Column("spent_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("result_path", sa.String(length=300), nullable=True),
        sa.Column("handoff", sa.Text(), nullable=True),
        sa.Column("handoff_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("token_hash", name=op.f("pk_form_token_uses")),
    )
    op.create_index(
        op.f("ix_form_token_uses_expires_at"), "form_token_uses", ["expires_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_form_token_uses_expires_at"), table_name="form_token_uses")
    op.drop_table("form_token_uses")
