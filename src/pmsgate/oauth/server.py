"""pmsgate's authorization server: clients, the user's consent, codes, tokens and grants.

The protocol's mechanics (request parsing, PKCE S256, redirect URI and code checks, the
error answers of RFC 6749) are the MCP SDK's handlers (``mcp.server.auth.handlers``);
this module is the provider they call (:class:`BoundProvider`, the SDK's
``OAuthAuthorizationServerProvider``) and what the console's consent and grants pages
use (:class:`AuthorizationServer`). Choices (docs/oauth.md):

- **Opaque tokens, stored hashed.** An access token is ``pmo_`` + 256 random bits, a
  refresh token ``pmr_`` + 256; only their SHA-256 is stored, as for gateway keys. A call
  finds the token's grant (facility, scopes, resource, revoked or not) by that hash, and
  the gateway remembers it for ``PMSGATE_GATEWAY_KEY_CACHE_S``: revocation is at once
  (published to every replica), which a self-contained JWT could not give without a
  per-call lookup anyway.
- **A grant per consent.** The user picks one facility (their own; an admin any) and sees
  the scopes; every token is issued under that grant, bound to the resource the app asked
  for (RFC 8707) and to those scopes. Revoking the grant ends every token at once.
- **Refresh tokens rotate.** Each refresh spends the presented token and issues a new
  pair; a spent refresh token presented again revokes the whole grant (the token was
  copied), audited ``oauth.refresh_reused``. A code is spent once; a second exchange
  revokes its grant too.
- **Client secrets** (a confidential client registered with ``client_secret_post`` or
  ``_basic``) are stored as SHA-256 and checked by :class:`HashedSecretAuthenticator`; most
  assistant apps register as public clients (``none``) and rely on PKCE.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import unquote, urlsplit

from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    RefreshToken,
    RegistrationError,
    TokenError,
    construct_redirect_uri,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from starlette.requests import Request

from pmsgate.audit.actions import Actor, AuditAction, Outcome
from pmsgate.audit.trail import AuditTrail
from pmsgate.clock import Clock
from pmsgate.config import Settings, is_loopback_host
from pmsgate.errors import InvalidInput, NotFound
from pmsgate.gateway.keys import hash_key
from pmsgate.gateway.oauth_tokens import (
    ACCESS_PREFIX,
    MCP_PATH,
    REFRESH_PREFIX,
    OAuthTokenCheck,
    mint_token,
    resource_of,
)
from pmsgate.gateway.scopes import DEFAULT_SCOPES, all_scopes
from pmsgate.storage.oauth import (
    OAuthAuthorizationRecord,
    OAuthClientRecord,
    OAuthGrantRecord,
    OAuthRepository,
)
from pmsgate.storage.records import Records

CONSENT_PATH = "/console/oauth/consent"
# What the authorization server's own events are recorded as (an app is not a console user).
SERVER_ACTOR = Actor.system("oauth")
# Client metadata kept from a registration (the credentials and times are columns or answers).
_NOT_KEPT = {"client_id", "client_secret", "client_id_issued_at", "client_secret_expires_at"}


def _hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def client_info(record: OAuthClientRecord) -> OAuthClientInformationFull:
    """A stored client as the SDK reads it (never with its secret: only the hash is kept)."""
    return OAuthClientInformationFull.model_validate(
        {**record.metadata, "client_id": record.client_id}
    )


def _redirect_allowed(uri: str) -> bool:
    """An https address, a loopback http one (a native app's local listener), or an app's
    private-use scheme (``com.example.app:/cb``); never a script or a data URL."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme == "https":
        return bool(parts.hostname)
    if scheme == "http":
        return parts.hostname is not None and is_loopback_host(parts.hostname)
    return bool(scheme) and scheme not in {"javascript", "data", "file", "vbscript", "about"}


@dataclass(frozen=True)
class PendingAuthorization:
    """An authorization request waiting for the signed-in user's answer (the consent page)."""

    reference: str
    client_name: str
    client_id: str
    redirect_uri: str
    redirect_host: str
    scopes: list[str]
    resource: str


@dataclass(frozen=True)
class FacilityChoice:
    """A facility the user may grant: its id, hotel id and name."""

    id: int
    hotel_id: str
    name: str


def _authorization_expired() -> NotFound:
    return NotFound(
        "This authorization request is unknown, expired or already answered.",
        code="oauth_request_unknown",
        hint="Start the connection again from your assistant app.",
    )


class AuthorizationServer(Records):
    """The authorization server's state and the console's verbs on it (one per process)."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        clock: Clock,
        settings: Settings,
        audit: AuditTrail,
        tokens: OAuthTokenCheck,
    ) -> None:
        super().__init__(sessions, clock)
        self.settings, self._audit, self._tokens = settings, audit, tokens

    def __repr__(self) -> str:
        return f"AuthorizationServer(registration={self.registration_open})"

    @property
    def registration_open(self) -> bool:
        """Whether apps may register themselves (PMSGATE_OAUTH_CLIENT_REGISTRATION)."""
        return self.settings.oauth_registration_open

    def provider(self, base: str) -> BoundProvider:
        """The SDK's provider for a request reaching the server at ``base``."""
        return BoundProvider(self, base)

    # --- clients ------------------------------------------------------------------------

    async def client_record(self, client_id: str) -> OAuthClientRecord | None:
        """A registered client (with its secret's hash), or None."""
        async with self._sessions() as session:
            return await OAuthRepository(session).client(client_id)

    async def register(self, info: OAuthClientInformationFull) -> None:
        """Keep a client the SDK's registration handler accepted (its secret as a hash)."""
        for uri in info.redirect_uris or ():
            if not _redirect_allowed(str(uri)):
                raise RegistrationError(
                    "invalid_redirect_uri",
                    f"{uri} is not allowed: use https, a loopback http address or an app scheme.",
                )
        requested = (info.scope or "").split()
        unknown = [scope for scope in requested if scope not in all_scopes()]
        if unknown:
            raise RegistrationError("invalid_client_metadata", f"Unknown scope {unknown[0]}.")
        metadata = info.model_dump(mode="json", exclude=_NOT_KEPT, exclude_none=True)
        secret_hash = None if info.client_secret is None else _hash(info.client_secret)
        async with self._sessions.begin() as session:
            await OAuthRepository(session).add_client(
                info.client_id, secret_hash=secret_hash, metadata=metadata, now=self._clock.now()
            )
            await self._audit.record_in(
                session,
                AuditAction.OAUTH_CLIENT_REGISTERED,
                actor=SERVER_ACTOR,
                subject=f"oauth_client:{info.client_id}",
                details={
                    "client_name": (info.client_name or "")[:200],
                    "redirect_hosts": sorted(
                        {
                            urlsplit(str(uri)).netloc or urlsplit(str(uri)).scheme
                            for uri in info.redirect_uris or ()
                        }
                    ),
                },
            )

    # --- the authorization request and the user's answer ----------------------------------

    async def start(
        self, client: OAuthClientInformationFull, params: AuthorizationParams, base: str
    ) -> str:
        """Keep an authorization request; the consent page's address (a local path)."""
        resource = (params.resource or resource_of(base, MCP_PATH)).rstrip("/")
        if resource not in (resource_of(base, MCP_PATH), resource_of(base, "")):
            raise AuthorizeError(
                "invalid_target", f"This server issues tokens for {resource_of(base, MCP_PATH)}."
            )
        scopes = list(params.scopes or DEFAULT_SCOPES)
        unknown = [scope for scope in scopes if scope not in all_scopes()]
        if unknown:
            raise AuthorizeError("invalid_scope", f"Unknown scope {unknown[0]}.")
        found = await self.client_record(client.client_id)
        if found is None:
            raise AuthorizeError("unauthorized_client", "Unknown client.")
        reference = secrets.token_urlsafe(32)
        now = self._clock.now()
        async with self._sessions.begin() as session:
            repository = OAuthRepository(session)
            await repository.delete_expired_authorizations(now)
            await repository.add_authorization(
                _hash(reference),
                client_pk=found.id,
                params={
                    "redirect_uri": str(params.redirect_uri),
                    "redirect_uri_provided_explicitly": params.redirect_uri_provided_explicitly,
                    "code_challenge": params.code_challenge,
                    "state": params.state,
                    "scopes": scopes,
                    "resource": resource,
                },
                now=now,
                expires_at=now + timedelta(seconds=self.settings.oauth_code_ttl_s),
            )
        return f"{CONSENT_PATH}?request={reference}"

    async def _waiting(self, reference: str) -> tuple[OAuthAuthorizationRecord, OAuthClientRecord]:
        async with self._sessions() as session:
            repository = OAuthRepository(session)
            found = await repository.authorization(_hash(reference))
            client = None
            if found is not None:
                client = await repository.client_by_pk(found.client_id)
        if (
            found is None
            or client is None
            or found.code_hash is not None
            or found.expires_at <= self._clock.now()
        ):
            raise _authorization_expired()
        return found, client

    async def pending(self, reference: str) -> PendingAuthorization:
        """The request the consent page shows; 404 oauth_request_unknown if unanswerable."""
        found, client = await self._waiting(reference)
        params = found.params
        return PendingAuthorization(
            reference=reference,
            client_name=str(client.metadata.get("client_name") or client.client_id),
            client_id=client.client_id,
            redirect_uri=params["redirect_uri"],
            redirect_host=urlsplit(params["redirect_uri"]).netloc
            or urlsplit(params["redirect_uri"]).scheme,
            scopes=list(params["scopes"]),
            resource=params["resource"],
        )

    async def facilities_for(self, student_id: str | None, *, admin: bool) -> list[FacilityChoice]:
        """The facilities a user may grant: a customer's own, every one for an admin."""
        if not admin and student_id is None:
            return []
        async with self._sessions() as session:
            rows = await OAuthRepository(session).facilities_of(None if admin else student_id)
        return [FacilityChoice(id=row[0], hotel_id=row[1], name=row[2]) for row in rows]

    async def approve(
        self,
        reference: str,
        *,
        facility_id: int,
        user_id: int,
        user_email: str,
        student_id: str | None,
        admin: bool,
        actor: Actor,
    ) -> str:
        """The user allowed the app on one facility: a grant, a code; where to send them."""
        found, client = await self._waiting(reference)
        allowed = {f.id for f in await self.facilities_for(student_id, admin=admin)}
        if facility_id not in allowed:
            raise InvalidInput(
                "Choose one of the facilities offered.",
                code="invalid_facility",
                hint="Pick a facility from the list; a customer account may grant only its own.",
            )
        params = found.params
        code = secrets.token_urlsafe(32)
        now = self._clock.now()
        async with self._sessions.begin() as session:
            repository = OAuthRepository(session)
            grant_id = await repository.add_grant(
                client_pk=client.id,
                user_id=user_id,
                user_email=user_email,
                facility_id=facility_id,
                scopes=list(params["scopes"]),
                resource=params["resource"],
                now=now,
            )
            attached = await repository.attach_code(
                found.request_hash,
                code_hash=_hash(code),
                grant_id=grant_id,
                code_expires_at=now + timedelta(seconds=self.settings.oauth_code_ttl_s),
            )
            if not attached:
                raise _authorization_expired()  # answered meanwhile (rolled back)
            await self._audit.record_in(
                session,
                AuditAction.OAUTH_GRANTED,
                actor=actor,
                subject=f"oauth_grant:{grant_id}",
                details={
                    "client_id": client.client_id,
                    "client_name": str(client.metadata.get("client_name") or "")[:200],
                    "scopes": list(params["scopes"]),
                    "resource": params["resource"],
                },
                facility_id=facility_id,
            )
        return construct_redirect_uri(params["redirect_uri"], code=code, state=params["state"])

    async def deny(self, reference: str, *, actor: Actor) -> str:
        """The user refused: the request ends; where to send them (``access_denied``)."""
        found, client = await self._waiting(reference)
        async with self._sessions.begin() as session:
            await OAuthRepository(session).delete_authorization(found.request_hash)
            await self._audit.record_in(
                session,
                AuditAction.OAUTH_DENIED,
                actor=actor,
                subject=f"oauth_client:{client.client_id}",
                outcome=Outcome.REFUSED,
            )
        return construct_redirect_uri(
            found.params["redirect_uri"], error="access_denied", state=found.params["state"]
        )

    # --- codes and tokens ---------------------------------------------------------------

    async def load_code(
        self, client: OAuthClientInformationFull, code: str
    ) -> AuthorizationCode | None:
        """The code's request as the SDK checks it (PKCE, redirect URI); None when unusable."""
        async with self._sessions() as session:
            found = await OAuthRepository(session).by_code(_hash(code))
            owner = (
                None
                if found is None
                else await OAuthRepository(session).client_by_pk(found.client_id)
            )
        if found is None or owner is None or owner.client_id != client.client_id:
            return None
        if found.used_at is not None and found.grant_id is not None:
            await self._end_grant(
                found.grant_id, by="code_reused", action=AuditAction.OAUTH_CODE_REUSED
            )
            return None
        if found.code_expires_at is None or found.code_expires_at <= self._clock.now():
            return None
        params = found.params
        return AuthorizationCode(
            code=code,
            scopes=list(params["scopes"]),
            # The expiry was checked above on the service's clock; the SDK compares this
            # with the wall clock, so it is not repeated there.
            expires_at=float("inf"),
            client_id=client.client_id,
            code_challenge=params["code_challenge"],
            redirect_uri=params["redirect_uri"],
            redirect_uri_provided_explicitly=params["redirect_uri_provided_explicitly"],
            resource=params["resource"],
            subject=str(found.grant_id),
        )

    async def exchange_code(self, code: AuthorizationCode) -> OAuthToken:
        """Spend the code once; the grant's first tokens."""
        grant_id = int(code.subject or 0)
        async with self._sessions.begin() as session:
            spent = await OAuthRepository(session).spend_code(_hash(code.code), self._clock.now())
        if not spent:
            await self._end_grant(grant_id, by="code_reused", action=AuditAction.OAUTH_CODE_REUSED)
            raise TokenError("invalid_grant", "The authorization code was already used.")
        return await self._issue(grant_id)

    async def load_refresh(
        self, client: OAuthClientInformationFull, raw: str
    ) -> RefreshToken | None:
        """A usable refresh token of this client; a spent one presented again ends its grant."""
        async with self._sessions() as session:
            found = await OAuthRepository(session).token(hash_key(raw))
        if found is None or found.kind != "refresh" or found.grant.revoked_at is not None:
            return None
        if await self._client_of(found.grant) != client.client_id:
            return None
        if found.used_at is not None:
            await self._end_grant(
                found.grant.id, by="refresh_reused", action=AuditAction.OAUTH_REFRESH_REUSED
            )
            return None
        if found.expires_at <= self._clock.now():
            return None
        return RefreshToken(
            token=raw,
            client_id=client.client_id,
            scopes=list(found.grant.scopes),
            resource=found.grant.resource,
            subject=str(found.grant.id),
        )

    async def rotate(self, refresh: RefreshToken) -> OAuthToken:
        """Spend the refresh token; a new pair. Lost a race to another use: the grant ends."""
        grant_id = int(refresh.subject or 0)
        async with self._sessions.begin() as session:
            spent = await OAuthRepository(session).spend_refresh(
                hash_key(refresh.token), self._clock.now()
            )
        if not spent:
            await self._end_grant(
                grant_id, by="refresh_reused", action=AuditAction.OAUTH_REFRESH_REUSED
            )
            raise TokenError("invalid_grant", "The refresh token was already used.")
        return await self._issue(grant_id)

    async def load_access(self, raw: str) -> AccessToken | None:
        """An access token as the SDK's revocation handler reads it; None when unknown."""
        async with self._sessions() as session:
            found = await OAuthRepository(session).token(hash_key(raw))
        if found is None or found.kind != "access":
            return None
        return AccessToken(
            token=raw,
            client_id=await self._client_of(found.grant) or "",
            scopes=list(found.grant.scopes),
            expires_at=int(found.expires_at.timestamp()),
            resource=found.grant.resource,
            subject=str(found.grant.id),
        )

    async def _client_of(self, grant: OAuthGrantRecord) -> str | None:
        async with self._sessions() as session:
            client = await OAuthRepository(session).client_by_pk(grant.client_id)
        return None if client is None else client.client_id

    async def _issue(self, grant_id: int) -> OAuthToken:
        """A new access and refresh token under a live grant."""
        now = self._clock.now()
        access, refresh = mint_token(ACCESS_PREFIX), mint_token(REFRESH_PREFIX)
        access_ttl = self.settings.oauth_access_token_ttl_s
        async with self._sessions.begin() as session:
            repository = OAuthRepository(session)
            grant = await repository.grant(grant_id)
            if grant is None or grant.revoked_at is not None:
                raise TokenError("invalid_grant", "The grant was revoked.")
            for minted, kind, ttl in (
                (access, "access", access_ttl),
                (refresh, "refresh", self.settings.oauth_refresh_token_ttl_s),
            ):
                await repository.add_token(
                    minted.key_hash,
                    grant_id=grant_id,
                    kind=kind,
                    prefix=minted.prefix,
                    now=now,
                    expires_at=now + timedelta(seconds=ttl),
                )
            await repository.delete_expired_tokens(now)
        return OAuthToken(
            access_token=access.raw,
            expires_in=int(access_ttl),
            scope=" ".join(grant.scopes),
            refresh_token=refresh.raw,
        )

    # --- grants -------------------------------------------------------------------------

    async def grants(self, student_id: str | None) -> list[OAuthGrantRecord]:
        """Grants newest first: a customer's, or every one (``None``, admins)."""
        async with self._sessions() as session:
            return await OAuthRepository(session).grants(student_id=student_id)

    async def revoke(
        self, grant_id: int, *, actor: Actor, student_id: str | None
    ) -> OAuthGrantRecord:
        """End a grant now (its tokens refused at once, on every replica).

        ``student_id``: the customer whose grant it must be (None: an admin, any grant).
        """
        async with self._sessions() as session:
            grant = await OAuthRepository(session).grant(grant_id)
        if grant is None or (student_id is not None and grant.student_id != student_id):
            raise NotFound(
                f"There is no app connection {grant_id}.",
                code="oauth_grant_not_found",
                hint="Pick a connection from the list.",
            )
        await self._end_grant(
            grant_id, by=str(actor), action=AuditAction.OAUTH_REVOKED, actor=actor
        )
        return grant

    async def revoke_token(self, subject: str | None) -> None:
        """RFC 7009: the app gave a token back; its grant ends."""
        if subject and subject.isdigit():
            await self._end_grant(int(subject), by="client", action=AuditAction.OAUTH_REVOKED)

    async def _end_grant(
        self, grant_id: int, *, by: str, action: AuditAction, actor: Actor = SERVER_ACTOR
    ) -> None:
        """Revoke a grant (once), audit it, and make every process forget its tokens."""
        async with self._sessions.begin() as session:
            repository = OAuthRepository(session)
            ended = await repository.revoke_grant(grant_id, now=self._clock.now(), by=by)
            grant = await repository.grant(grant_id)
            if grant is not None and (ended or action != AuditAction.OAUTH_REVOKED):
                await self._audit.record_in(
                    session,
                    action,
                    actor=actor,
                    subject=f"oauth_grant:{grant_id}",
                    outcome=Outcome.SUCCESS if ended else Outcome.REFUSED,
                    details={"client_name": grant.client_name[:200], "by": by[:200]},
                    facility_id=grant.facility_id,
                )
        await self._tokens.changed()


@dataclass(frozen=True)
class BoundProvider:
    """The SDK's ``OAuthAuthorizationServerProvider`` for one request (its base URL known)."""

    server: AuthorizationServer
    base: str

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        """The SDK's client lookup."""
        found = await self.server.client_record(client_id)
        return None if found is None else client_info(found)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        """The SDK's registration (already checked by its handler)."""
        await self.server.register(client_info)

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        """Where the user goes: the console's consent page."""
        return await self.server.start(client, params, self.base)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        """The SDK's code lookup."""
        return await self.server.load_code(client, authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        """The SDK's code exchange (PKCE already verified by its handler)."""
        return await self.server.exchange_code(authorization_code)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        """The SDK's refresh token lookup."""
        return await self.server.load_refresh(client, refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        """The SDK's refresh: rotation."""
        return await self.server.rotate(refresh_token)

    async def load_access_token(self, token: str) -> AccessToken | None:
        """The SDK's access token lookup (revocation)."""
        return await self.server.load_access(token)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        """The SDK's revocation: the token's grant ends."""
        await self.server.revoke_token(token.subject)

    async def exchange_identity_assertion(self, client: Any, params: Any) -> OAuthToken:
        """Not offered (the SDK's handler refuses the grant before calling this)."""
        raise TokenError("unsupported_grant_type", "Identity assertions are not accepted.")


class HashedSecretAuthenticator(ClientAuthenticator):
    """The token and revocation endpoints' client check, against the stored secret's hash."""

    def __init__(self, provider: BoundProvider) -> None:
        super().__init__(provider)
        self._server = provider.server

    async def authenticate_request(self, request: Request) -> OAuthClientInformationFull:
        """The client of the request; its secret compared by hash when it has one."""
        form = await request.form()
        client_id = form.get("client_id")
        if not isinstance(client_id, str) or not client_id:
            raise AuthenticationError("Missing client_id")
        found = await self._server.client_record(client_id)
        if found is None:
            raise AuthenticationError("Invalid client_id")
        method = found.metadata.get("token_endpoint_auth_method", "none")
        if method != "none":
            secret = _presented_secret(request, form.get("client_secret"), client_id, method)
            if (
                secret is None
                or found.secret_hash is None
                or not hmac.compare_digest(_hash(secret), found.secret_hash)
            ):
                raise AuthenticationError("Invalid client credentials")
        return client_info(found)


def _presented_secret(request: Request, posted: object, client_id: str, method: str) -> str | None:
    """The client secret of a token request: HTTP Basic or the form's ``client_secret``."""
    if method != "client_secret_basic":
        return posted if isinstance(posted, str) and posted else None
    scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        basic_id, _, secret = base64.b64decode(encoded).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return None
    return unquote(secret) if unquote(basic_id) == client_id else None
