"""customers.language: the language the customer reads (incident notices, docs/i18n.md)

The customer file's ``language`` (``it`` or ``en``) is kept on the customer record, so a
message sent long after onboarding (a facility in error, its recovery) is written in it.
NULL for customers registered before: their notices are in English.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-24 21:45:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("customers") as batch:
        batch.add_column(sa.Column("language", sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("customers") as batch:
        batch.drop_column("language")
