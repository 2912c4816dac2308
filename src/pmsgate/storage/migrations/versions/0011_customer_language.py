"""customers.language: the language the customer reads (incident notices, docs/i18n.md)

The customer file's ``language`` (``it`` or ``en``) is kept on the customer record, so a
message sent long after onboarding (a facility in error, its recovery) is written in it.
NULL for customers registered before: their notices are in English.
"""

from __future__ import annotations

from pmsgate.storage.migrations import columns as col

revision = "0011"
down_revision = "0010"


def upgrade() -> None:
    col.add_columns("customers", col.string("language", 16, nullable=True))


def downgrade() -> None:
    col.drop_columns("customers", "language")
