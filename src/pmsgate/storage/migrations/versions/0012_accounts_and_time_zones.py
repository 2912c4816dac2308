"""customers.timezone and users.invited_at: accounts from day one

- ``customers.timezone``: the time zone the customer reads times in (the customer
  file's ``timezone``, an IANA name); NULL reads as Europe/Rome.
- ``users.invited_at``: when the account's invitation (a one-time set-password link) was
  last sent; onboarding sends one only to an account never invited, so a second run
  sends nothing. An account created by onboarding has no password until the invitation
  is used (its hash is the unusable marker ``!``, which no password verifies against).
"""

from __future__ import annotations

from pmsgate.storage.migrations import columns as col

revision = "0012"
down_revision = "0011"


def upgrade() -> None:
    col.add_columns("customers", col.string("timezone", 64, nullable=True))
    col.add_columns("users", col.timestamp("invited_at", nullable=True))


def downgrade() -> None:
    col.drop_columns("users", "invited_at")
    col.drop_columns("customers", "timezone")
