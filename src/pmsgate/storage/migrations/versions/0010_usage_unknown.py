"""usage snapshots: the platform's figures may be unknown (NULL) — never invented zeros

docs/requirements.md R19.2: onboarding step 16 records the baseline from the platform's usage read;
when the platform offers no usage API, the baseline is recorded with ``usd_spent``,
``messages`` and ``tool_calls`` unknown (NULL) and the reason in ``details``.
``upstream_calls`` is the gateway's own count and stays required.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"

_COLUMNS = (
    ("usd_spent", sa.Numeric(precision=14, scale=4)),
    ("messages", sa.Integer()),
    ("tool_calls", sa.Integer()),
)


def upgrade() -> None:
    with op.batch_alter_table("usage_snapshots") as batch:
        for name, type_ in _COLUMNS:
            batch.alter_column(name, existing_type=type_, nullable=True)


def downgrade() -> None:
    # An unknown figure has no value to go back to: such snapshots cannot be downgraded.
    op.execute(
        "DELETE FROM usage_snapshots "
        "WHERE usd_spent IS NULL OR messages IS NULL OR tool_calls IS NULL"
    )
    with op.batch_alter_table("usage_snapshots") as batch:
        for name, type_ in _COLUMNS:
            batch.alter_column(name, existing_type=type_, nullable=False)
