"""customers.timezone and users.invited_at: accounts from day one

- ``customers.timezone``: the time zone the customer reads times in (the customer
  file's ``timezone``, an IANA name); NULL reads as Europe/Rome.
- ``users.invited_at``: when the account's invitation (a one-time set-password link) was
  last sent; onboarding sends one only to an account never invited, so a second run
  sends nothing. An account created by onboarding has no password until the invitation
  is used (its hash is the unusable marker ``!``, which no password verifies against).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26 20:20:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("customers") as batch:
        batch.add_column(sa.Column("timezone", sa.String(length=64), nullable=True))
    with op.batch_alter_table("users") as batch:
        batch.add_column(sa.Column("invited_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.drop_column("invited_at")
    with op.batch_alter_table("customers") as batch:
        batch.drop_column("timezone")
