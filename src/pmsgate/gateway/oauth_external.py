"""Access tokens of an external authorization server: JWTs checked against its JWKS.

With ``PMSGATE_OAUTH_EXTERNAL_ISSUER`` and ``PMSGATE_OAUTH_EXTERNAL_JWKS_URL`` set, pmsgate
does not issue tokens itself: its protected resource metadata names that issuer, and a
bearer that is not a gateway key must be a JWT the issuer signed (RS256, PS256, ES256 or
EdDSA; the key named by ``kid`` in its JWKS) with

- ``iss`` the issuer, ``exp`` in the future (the service's clock),
- ``aud`` (a string or a list) naming this resource: ``<base>/mcp`` on /mcp, or ``<base>``,
- ``scope`` (space-separated) or ``scp`` (a list) holding the call's scope,
- the facility claim (``PMSGATE_OAUTH_EXTERNAL_FACILITY_CLAIM``, ``pmsgate_facility``): the
  ``hotel_id`` of a registered facility.

Anything else is 401 ``invalid_token`` with the challenge, a missing scope 403
``insufficient_scope`` (:func:`~pmsgate.gateway.oauth_tokens.admit`). The JWKS is fetched
once and again at most every ``jwks_ttl_s`` (sooner for an unknown ``kid``, at most once a
minute); a checked token is remembered like a gateway key. Revocation is the issuer's: keep
its access tokens short-lived.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import httpx
import jwt
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import Clock
from pmsgate.errors import PmsgateError
from pmsgate.gateway.facilities import FacilityView
from pmsgate.gateway.key_cache import CheckMemory
from pmsgate.gateway.oauth_tokens import AccessGrant, admit, invalid_token
from pmsgate.storage.facilities import FacilityRepository
from pmsgate.storage.records import Records

ALGORITHMS = ("RS256", "PS256", "ES256", "EdDSA")
# An unknown key id sends the JWKS to be fetched again, at most this often.
REFETCH_S = 60.0


class ExternalTokenCheck(Records):
    """Checks JWT access tokens of an external authorization server."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        clock: Clock,
        http: httpx.AsyncClient,
        *,
        issuer: str,
        jwks_url: str,
        facility_claim: str = "pmsgate_facility",
        cache_s: float = 0.0,
        jwks_ttl_s: float = 3600.0,
    ) -> None:
        super().__init__(sessions, clock)
        self._http, self.issuer, self._jwks_url = http, issuer, jwks_url
        self._claim, self._jwks_ttl_s = facility_claim, jwks_ttl_s
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at: float | None = None
        self._memory = CheckMemory[AccessGrant](clock, cache_s)

    def __repr__(self) -> str:
        return f"ExternalTokenCheck(issuer={self.issuer!r})"

    async def check(self, raw: str, scope: str, audiences: tuple[str, ...]) -> AccessGrant:
        """The grant a valid JWT carries, for one of ``audiences`` and holding ``scope``."""
        digest = hashlib.sha256(raw.encode()).hexdigest()
        grant = self._memory.get(digest)
        if grant is None:
            grant = await self._verify(raw, digest, audiences)
            self._memory.keep(digest, grant)
        return admit(grant, scope, audiences, self._clock.now())

    async def _verify(self, raw: str, digest: str, audiences: tuple[str, ...]) -> AccessGrant:
        try:
            header = jwt.get_unverified_header(raw)
        except jwt.InvalidTokenError:
            raise invalid_token("The bearer is neither a gateway key nor a JWT.") from None
        if header.get("alg") not in ALGORITHMS:
            raise invalid_token("The token's signing algorithm is not accepted.")
        key = await self._key(str(header.get("kid") or ""))
        try:
            claims: dict[str, Any] = jwt.decode(
                raw,
                key,
                algorithms=[str(header["alg"])],
                issuer=self.issuer,
                # The expiry is checked on the service's clock (admit), the audience below.
                options={"verify_exp": False, "verify_aud": False, "require": ["iss", "exp"]},
            )
        except jwt.InvalidTokenError as error:
            raise invalid_token(f"The token is not valid ({type(error).__name__}).") from None
        aud = claims.get("aud")
        named = [aud] if isinstance(aud, str) else [a for a in aud or () if isinstance(a, str)]
        resource = next((a for a in named if a in audiences), named[0] if named else "")
        scopes = claims.get("scope")
        held = scopes.split() if isinstance(scopes, str) else list(claims.get("scp") or ())
        facility = await self._facility(claims.get(self._claim))
        exp = claims.get("exp")
        if not isinstance(exp, int | float):
            raise invalid_token("The token has no expiry.")
        return AccessGrant(
            facility=facility,
            grant_id=0,
            prefix="jwt_" + digest[:8],
            scopes=frozenset(str(s) for s in held),
            resource=resource,
            expires_at=datetime.fromtimestamp(exp, UTC),
        )

    async def _facility(self, hotel_id: object) -> FacilityView:
        if not isinstance(hotel_id, str | int) or not str(hotel_id).isdigit():
            raise invalid_token(f"The token names no facility (claim {self._claim}).")
        async with self._sessions() as session:
            row = await FacilityRepository(session).by_hotel_id(str(hotel_id))
            facility = None if row is None else FacilityView.of(row)
        if facility is None:
            raise invalid_token("The token names a facility this gateway does not serve.")
        return facility

    async def _key(self, kid: str) -> jwt.PyJWK:
        now = self._clock.now().timestamp()
        stale = self._fetched_at is None or now - self._fetched_at >= self._jwks_ttl_s
        unknown = kid not in self._keys
        if stale or (unknown and now - (self._fetched_at or 0.0) >= REFETCH_S):
            await self._fetch(now)
        key = self._keys.get(kid)
        if key is None and not self._keys:
            raise PmsgateError(
                "The authorization server's signing keys cannot be read just now.",
                code="oauth_issuer_unavailable",
                status=503,
                hint="Retry in a minute; if it lasts, the operator checks "
                "PMSGATE_OAUTH_EXTERNAL_JWKS_URL.",
                headers={"Retry-After": str(int(REFETCH_S))},
            )
        if key is None:
            raise invalid_token("The token is signed with a key the issuer does not publish.")
        return key

    async def _fetch(self, now: float) -> None:
        try:
            answer = await self._http.get(self._jwks_url)
            answer.raise_for_status()
            keys = jwt.PyJWKSet.from_dict(answer.json()).keys
        except (httpx.HTTPError, ValueError, jwt.PyJWKSetError):
            # Kept what was fetched before; retried at the next unknown key or expiry.
            self._fetched_at = now
            return
        self._keys = {str(key.key_id or ""): key for key in keys}
        self._fetched_at = now
