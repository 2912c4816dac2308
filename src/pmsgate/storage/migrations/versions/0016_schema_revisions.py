"""schema_revisions: each migration applied from now on, and whether older code may run on it

One row per migration applied after this one exists (this one included): its revision,
``backward_compatible`` (the migration file's module attribute, true when absent) and
when it was applied. Written by the migration environment itself (``record_revision``
in pmsgate.storage.db), read at every start: a release that does not know the
database's revision runs on it only if every unknown migration is recorded as backward
compatible (docs/deploy.md, Rolling back).
"""

from __future__ import annotations

from alembic import op

from pmsgate.storage.migrations import columns as col

revision = "0016"
down_revision = "0015"
# Additive: a new table nothing older reads. (Every migration says so explicitly.)
backward_compatible = True


def upgrade() -> None:
    op.create_table(
        "schema_revisions",
        col.string("revision", 32),
        col.boolean("backward_compatible"),
        col.timestamp("applied_at"),
        col.primary_key("schema_revisions", "revision"),
    )


def downgrade() -> None:
    op.drop_table("schema_revisions")
