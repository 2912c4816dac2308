"""${message}"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
${imports if imports else ""}
# The columns and constraints the migrations repeat are one call each in
# pmsgate.storage.migrations.columns (`from pmsgate.storage.migrations import columns as col`).

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
# Expand/contract (docs/deploy.md, Rolling back): true when the previous release's code still
# runs on the schema after this migration (new tables, new nullable columns, new indexes);
# false when it removes or changes what older code reads or writes.
backward_compatible = True


def upgrade() -> None:
    ${upgrades if upgrades else "pass"}


def downgrade() -> None:
    ${downgrades if downgrades else "pass"}
