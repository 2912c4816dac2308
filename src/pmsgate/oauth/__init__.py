"""pmsgate's own OAuth 2.1 authorization server for /mcp and /v1, backed by the console's
accounts (docs/oauth.md): server.py (clients, consent, codes, tokens, grants), routes.py
(the metadata documents and the /oauth/* endpoints)."""
