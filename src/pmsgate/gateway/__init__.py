"""The multi-tenant tool gateway: facilities, vault, tokens, limiter, cache, tools, MCP."""
