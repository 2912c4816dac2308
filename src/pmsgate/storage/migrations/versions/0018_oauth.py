"""oauth: OAuth 2.1 for /mcp and /v1 (clients, grants, authorization requests, tokens)

``oauth_clients`` holds the apps registered with pmsgate's authorization server (a
confidential client's secret only as its SHA-256). ``oauth_grants`` is what a console
user allowed an app: one facility, its scopes, the resource the tokens are for; revoking
it ends every token issued under it. ``oauth_authorizations`` is one authorization
request from the redirect to the code's single exchange (only hashes of the reference and
the code). ``oauth_tokens`` holds access and refresh tokens as SHA-256, a refresh token
spent by its one use.
"""

from __future__ import annotations

from alembic import op

from pmsgate.storage.migrations import columns as col

revision = "0018"
down_revision = "0017"
# Additive: new tables nothing older reads (an older release simply accepts no OAuth token).
backward_compatible = True


def upgrade() -> None:
    col.create_id_table(
        "oauth_clients",
        col.string("client_id", 64),
        col.string("secret_hash", 64, nullable=True),
        col.json("metadata"),
        col.timestamp("created_at"),
        col.unique("oauth_clients", "client_id"),
    )
    col.create_id_table(
        "oauth_grants",
        col.integer("client_id"),
        col.integer("user_id", nullable=True),
        col.string("user_email", 254),
        col.facility_id(),
        col.json("scopes"),
        col.string("resource", 500),
        col.timestamp("created_at"),
        col.timestamp("revoked_at", nullable=True),
        col.string("revoked_by", 200, nullable=True),
        col.foreign_key("oauth_grants", "client_id", "oauth_clients.id", ondelete="CASCADE"),
        col.facility_key("oauth_grants"),
        col.foreign_key("oauth_grants", "user_id", "users.id", ondelete="SET NULL"),
    )
    col.create_indexes("oauth_grants", "facility_id", "user_id")
    op.create_table(
        "oauth_authorizations",
        col.string("request_hash", 64),
        col.integer("client_id"),
        col.json("params"),
        *col.expiring(),
        col.string("code_hash", 64, nullable=True),
        col.integer("grant_id", nullable=True),
        col.timestamp("code_expires_at", nullable=True),
        col.timestamp("used_at", nullable=True),
        col.foreign_key(
            "oauth_authorizations", "client_id", "oauth_clients.id", ondelete="CASCADE"
        ),
        col.foreign_key("oauth_authorizations", "grant_id", "oauth_grants.id", ondelete="CASCADE"),
        col.primary_key("oauth_authorizations", "request_hash"),
        col.unique("oauth_authorizations", "code_hash"),
    )
    col.create_index("oauth_authorizations", ["expires_at"])
    op.create_table(
        "oauth_tokens",
        col.string("token_hash", 64),
        col.integer("grant_id"),
        col.string("kind", 8),
        col.string("prefix", 16),
        *col.expiring(used=True),
        col.check("oauth_tokens", "kind", "kind IN ('access', 'refresh')"),
        col.foreign_key("oauth_tokens", "grant_id", "oauth_grants.id", ondelete="CASCADE"),
        col.primary_key("oauth_tokens", "token_hash"),
    )
    col.create_indexes("oauth_tokens", "grant_id", "expires_at")


def downgrade() -> None:
    col.drop_table("oauth_tokens", "ix_oauth_tokens_expires_at", "ix_oauth_tokens_grant_id")
    col.drop_table("oauth_authorizations", "ix_oauth_authorizations_expires_at")
    col.drop_table("oauth_grants", "ix_oauth_grants_user_id", "ix_oauth_grants_facility_id")
    op.drop_table("oauth_clients")
