"""The bearer credential of a /mcp or /v1 call: a gateway key, or an OAuth access token.

:class:`BearerAuth` is the one check both transports call. A bearer that reads as a
gateway key (``pgw_…``) goes the way it always went (:class:`~pmsgate.gateway.key_check.KeyCheck`);
anything else is an OAuth access token issued by pmsgate's authorization server
(docs/oauth.md), checked by :class:`OAuthTokenCheck`: known and its grant not revoked,
not expired, issued for this resource (RFC 8707 audience, on every call), holding the
scope the call needs, for one facility.

Refusals carry the challenge of the MCP authorization specification: a 401 answers
``WWW-Authenticate: Bearer resource_metadata="…/.well-known/oauth-protected-resource…",
scope="…"`` (with ``error="invalid_token"`` when a credential was sent), so a client finds
the authorization server from the refusal alone; an OAuth token without the scope gets 403
``error="insufficient_scope"``.

A checked token is remembered like a gateway key (``PMSGATE_GATEWAY_KEY_CACHE_S``): a
cached call costs no database query. A revocation is published on the key-change channel
(:mod:`pmsgate.gateway.key_cache`), so every replica forgets at once; the expiry is
checked on every call, remembered or not.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from starlette.types import Scope

from pmsgate.errors import Forbidden, PmsgateError, Unauthorized
from pmsgate.gateway.facilities import FacilityView
from pmsgate.gateway.key_cache import CachedCheck
from pmsgate.gateway.keys import KEY_PREFIX, MintedKey, display_prefix, hash_key
from pmsgate.storage.oauth import OAuthRepository

ACCESS_PREFIX = "pmo_"
REFRESH_PREFIX = "pmr_"
# token_urlsafe(32): 43 characters of the URL-safe base64 alphabet, 256 random bits.
_ACCESS_RE = re.compile(r"^pmo_[A-Za-z0-9_-]{43}$")
WELL_KNOWN_RESOURCE = "/.well-known/oauth-protected-resource"
# The path of the MCP endpoint: its own protected resource (RFC 9728, path-suffixed).
MCP_PATH = "/mcp"


def mint_token(prefix: str) -> MintedKey:
    """A new random token (access: ``pmo_``, refresh: ``pmr_``), its hash and display prefix."""
    raw = prefix + secrets.token_urlsafe(32)
    return MintedKey(raw=raw, key_hash=hash_key(raw), prefix=display_prefix(raw))


def bearer_credential(authorization: str | None) -> str:
    """The credential of an ``Authorization: Bearer`` header, or a 401."""
    scheme, _, credential = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not credential.strip():
        raise Unauthorized(
            "A gateway key or an OAuth access token is required.",
            code="missing_gateway_key",
            hint="Send `Authorization: Bearer <gateway key>` (an admin mints one with "
            "`pmsgate facilities mint-key HOTEL_ID`), or connect an OAuth client: it finds "
            "the authorization server from this answer's WWW-Authenticate header.",
        )
    return credential.strip()


def public_base(scope: Scope, public_url: str | None) -> str:
    """The server's base URL: PMSGATE_GATEWAY_PUBLIC_URL, else the request's own."""
    if public_url:
        return public_url.rstrip("/")
    scheme = scope.get("scheme", "http")
    host = ""
    for name, value in scope.get("headers") or ():
        if name == b"host":
            host = value.decode("latin-1")
            break
    if not host and scope.get("server"):
        server_host, port = scope["server"]
        host = f"{server_host}:{port}"
    return f"{scheme}://{host}{scope.get('root_path', '')}".rstrip("/")


def resource_of(base: str, path: str) -> str:
    """The resource identifier (RFC 8707) of the API at ``path``: ``/mcp`` has its own,
    the HTTP API (``/v1``) is the server's origin."""
    return base + MCP_PATH if path == MCP_PATH else base


def resource_metadata_url(base: str, path: str) -> str:
    """Where the protected resource metadata (RFC 9728) of the API at ``path`` is."""
    return base + WELL_KNOWN_RESOURCE + (MCP_PATH if path == MCP_PATH else "")


def accepted_audiences(base: str, path: str) -> tuple[str, ...]:
    """The token audiences a call on ``path`` accepts: its resource, and for /mcp the
    server's origin too (a parent resource covers it)."""
    return (base + MCP_PATH, base) if path == MCP_PATH else (base,)


@dataclass(frozen=True)
class Caller:
    """Who a call is from: its facility and the credential's display prefix (logs, audit)."""

    facility: FacilityView
    prefix: str


@dataclass(frozen=True)
class AccessGrant:
    """What a presented access token may do (remembered together)."""

    facility: FacilityView
    grant_id: int
    prefix: str
    scopes: frozenset[str]
    resource: str
    expires_at: datetime


def admit(grant: AccessGrant, scope: str, audiences: tuple[str, ...], now: datetime) -> AccessGrant:
    """``grant`` when it is unexpired, for one of ``audiences`` and holds ``scope``; checked on
    every call, remembered or not. Else 401 invalid_token, or 403 with insufficient_scope."""
    if grant.expires_at <= now:
        raise invalid_token(f"The access token {grant.prefix}… has expired.")
    if grant.resource not in audiences:
        raise invalid_token(f"The access token {grant.prefix}… was issued for another resource.")
    if scope not in grant.scopes:
        raise Forbidden(
            f"The access token {grant.prefix}… does not hold the scope {scope}; nothing was sent.",
            code="scope_missing",
            hint=f"Authorize the app again asking for the scope {scope}.",
            headers={"WWW-Authenticate": f'Bearer error="insufficient_scope", scope="{scope}"'},
        )
    return grant


class TokenCheck(Protocol):
    """What checks an access token: pmsgate's own (:class:`OAuthTokenCheck`) or an external
    authorization server's JWTs (:mod:`pmsgate.gateway.oauth_external`)."""

    async def check(self, raw: str, scope: str, audiences: tuple[str, ...]) -> AccessGrant:
        """The grant of a valid token for one of ``audiences`` holding ``scope``."""
        ...


def invalid_token(message: str) -> Unauthorized:
    return Unauthorized(
        message,
        code="invalid_token",
        hint="Get a new access token from the authorization server (refresh it, or "
        "authorize again); see docs/oauth.md.",
    )


class OAuthTokenCheck(CachedCheck[AccessGrant]):
    """Checks presented OAuth access tokens (remembered a while, forgotten on any change)."""

    def __repr__(self) -> str:
        return f"OAuthTokenCheck({self._memory!r})"

    async def check(self, raw: str, scope: str, audiences: tuple[str, ...]) -> AccessGrant:
        """The grant of a valid access token for one of ``audiences`` holding ``scope``.

        Unknown, revoked, expired or issued for another resource: 401 invalid_token;
        without the scope: 403 scope_missing with the insufficient_scope challenge.
        """
        return admit(await self._grant(raw), scope, audiences, self._clock.now())

    async def _grant(self, raw: str) -> AccessGrant:
        if not _ACCESS_RE.match(raw):
            raise invalid_token("The bearer is neither a gateway key nor an access token.")
        token_hash = hash_key(raw)
        if cached := self._memory.get(token_hash):
            return cached
        async with self._sessions() as session:
            found = await OAuthRepository(session).token(token_hash)
            facility = None if found is None else FacilityView.of(found.facility)
        if found is None or facility is None or found.kind != "access":
            raise invalid_token("The access token is not valid.")
        if found.grant.revoked_at is not None:
            # Not remembered: a refusal costs a query, as for an unknown gateway key.
            raise invalid_token(f"The access token {found.prefix}… was revoked.")
        grant = AccessGrant(
            facility=facility,
            grant_id=found.grant.id,
            prefix=found.prefix,
            scopes=frozenset(found.grant.scopes),
            resource=found.grant.resource,
            expires_at=found.expires_at,
        )
        self._memory.keep(token_hash, grant)
        return grant


KeyAuthenticate = Callable[[str, str], Awaitable[FacilityView]]


class BearerAuth:
    """The one bearer check of /v1 and /mcp: gateway keys the old way, OAuth tokens here."""

    def __init__(
        self,
        keys: KeyAuthenticate,
        tokens: TokenCheck | None,
        *,
        public_url: str | None = None,
    ) -> None:
        self._keys = keys
        self.tokens = tokens
        self._public_url = public_url

    def __repr__(self) -> str:
        return f"BearerAuth(oauth={self.tokens is not None})"

    async def authenticate(
        self, authorization: str | None, scope: str, request: Scope, path: str = ""
    ) -> Caller:
        """The caller of a request on ``path`` (``/mcp``, or ``""`` for /v1) that may use
        ``scope``; refusals carry the OAuth challenge (401) or insufficient_scope (403)."""
        try:
            raw = bearer_credential(authorization)
            if raw.startswith(KEY_PREFIX) or self.tokens is None:
                return Caller(await self._keys(raw, scope), display_prefix(raw))
            base = public_base(request, self._public_url)
            grant = await self.tokens.check(raw, scope, accepted_audiences(base, path))
            return Caller(grant.facility, grant.prefix)
        except PmsgateError as error:
            self._challenge(error, request, path, scope, sent=bool(authorization))
            raise

    def _challenge(
        self, error: PmsgateError, request: Scope, path: str, scope: str, *, sent: bool
    ) -> None:
        """Add the WWW-Authenticate challenge to a refusal (401; a 403 that has one)."""
        present = error.headers.get("WWW-Authenticate")
        if self.tokens is None or (error.status != 401 and present is None):
            return  # no authorization server to point to, or nothing to challenge
        metadata = resource_metadata_url(public_base(request, self._public_url), path)
        if present is not None:
            error.headers["WWW-Authenticate"] = f'{present}, resource_metadata="{metadata}"'
            return
        parts = [f'resource_metadata="{metadata}"', f'scope="{scope}"']
        if sent:
            # A header is ASCII: the message without its ellipsis, quotes or backslashes.
            description = "".join(c for c in error.message if " " <= c <= "~" and c not in '"\\')
            parts[:0] = ['error="invalid_token"', f'error_description="{description}"']
        error.headers["WWW-Authenticate"] = "Bearer " + ", ".join(parts)
