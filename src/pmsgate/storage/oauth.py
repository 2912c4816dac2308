"""OAuth clients, grants, authorization requests and tokens, in the caller's session.

Only hashes of secrets are stored: a client secret, the consent page's reference, a code
and every token are looked up by their SHA-256 (docs/oauth.md). Spending a code or a
refresh token is one ``UPDATE … WHERE used_at IS NULL``: whichever request changes the
row won, on every backend and across replicas.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import CursorResult, delete, select, update

from pmsgate.storage.models import (
    Customer,
    CustomerIntegration,
    Facility,
    OAuthAuthorization,
    OAuthClient,
    OAuthGrant,
    OAuthToken,
)
from pmsgate.storage.repository import Repository
from pmsgate.storage.views import view_of


@dataclass(frozen=True)
class OAuthClientRecord:
    """A registered client (never its secret: only whether it has one, and its hash)."""

    id: int
    client_id: str
    secret_hash: str | None
    metadata: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True)
class OAuthAuthorizationRecord:
    """One authorization request, and its code once the user consented."""

    request_hash: str
    client_id: int
    params: dict[str, Any]
    expires_at: datetime
    code_hash: str | None
    grant_id: int | None
    code_expires_at: datetime | None
    used_at: datetime | None


@dataclass(frozen=True)
class OAuthGrantRecord:
    """A grant with the names a listing shows: the client's, the facility's, the customer."""

    id: int
    client_id: int
    client_name: str
    user_id: int | None
    user_email: str
    facility_id: int
    hotel_id: str
    facility_name: str
    student_id: str | None
    scopes: list[str]
    resource: str
    created_at: datetime
    revoked_at: datetime | None
    revoked_by: str | None


@dataclass(frozen=True)
class OAuthTokenRecord:
    """A token (its hash and display prefix) and its grant."""

    token_hash: str
    kind: str
    prefix: str
    expires_at: datetime
    used_at: datetime | None
    grant: OAuthGrantRecord
    facility: Facility


def _client(row: OAuthClient) -> OAuthClientRecord:
    return view_of(OAuthClientRecord, row, metadata=dict(row.metadata_ or {}))


def _grant(
    row: OAuthGrant, client: OAuthClient, facility: Facility, student_id: str | None
) -> OAuthGrantRecord:
    name = (client.metadata_ or {}).get("client_name") or client.client_id
    return view_of(
        OAuthGrantRecord,
        row,
        client_name=str(name),
        hotel_id=facility.hotel_id,
        facility_name=facility.name,
        student_id=student_id,
        scopes=list(row.scopes or ()),
    )


def _grants_query() -> Any:
    """Grants joined with their client, facility and the customer the facility is linked to."""
    return (
        select(OAuthGrant, OAuthClient, Facility, CustomerIntegration.student_id)
        .join(OAuthClient, OAuthClient.id == OAuthGrant.client_id)
        .join(Facility, Facility.id == OAuthGrant.facility_id)
        .outerjoin(
            CustomerIntegration,
            (CustomerIntegration.facility_id == Facility.id)
            & (CustomerIntegration.provider == "kross"),
        )
    )


class OAuthRepository(Repository):
    """The authorization server's rows, in the caller's session; never commits."""

    # --- clients ------------------------------------------------------------------------

    async def add_client(
        self, client_id: str, *, secret_hash: str | None, metadata: dict[str, Any], now: datetime
    ) -> OAuthClientRecord:
        """Register a client."""
        row = await self._add(
            OAuthClient(
                client_id=client_id, secret_hash=secret_hash, metadata_=metadata, created_at=now
            )
        )
        return _client(row)

    async def client(self, client_id: str) -> OAuthClientRecord | None:
        """The client of that ``client_id``, or None."""
        row = await self._session.scalar(
            select(OAuthClient).where(OAuthClient.client_id == client_id)
        )
        return None if row is None else _client(row)

    async def client_by_pk(self, pk: int) -> OAuthClientRecord | None:
        """The client of that row id, or None."""
        row = await self._session.get(OAuthClient, pk)
        return None if row is None else _client(row)

    # --- authorization requests and codes -------------------------------------------------

    async def add_authorization(
        self,
        request_hash: str,
        *,
        client_pk: int,
        params: dict[str, Any],
        now: datetime,
        expires_at: datetime,
    ) -> None:
        """Keep an authorization request until the user answers it (or it expires)."""
        await self._add(
            OAuthAuthorization(
                request_hash=request_hash,
                client_id=client_pk,
                params=params,
                created_at=now,
                expires_at=expires_at,
            )
        )

    async def authorization(self, request_hash: str) -> OAuthAuthorizationRecord | None:
        """The authorization request of that reference, or None."""
        row = await self._session.get(OAuthAuthorization, request_hash)
        return None if row is None else view_of(OAuthAuthorizationRecord, row)

    async def attach_code(
        self, request_hash: str, *, code_hash: str, grant_id: int, code_expires_at: datetime
    ) -> bool:
        """Give an unanswered request its code and grant; False when it was answered already."""
        result: CursorResult[Any] = await self._session.execute(  # type: ignore[assignment]
            update(OAuthAuthorization)
            .where(
                OAuthAuthorization.request_hash == request_hash,
                OAuthAuthorization.code_hash.is_(None),
            )
            .values(code_hash=code_hash, grant_id=grant_id, code_expires_at=code_expires_at)
        )
        return result.rowcount == 1

    async def by_code(self, code_hash: str) -> OAuthAuthorizationRecord | None:
        """The authorization request a code was issued for, or None."""
        row = await self._session.scalar(
            select(OAuthAuthorization).where(OAuthAuthorization.code_hash == code_hash)
        )
        return None if row is None else view_of(OAuthAuthorizationRecord, row)

    async def spend_code(self, code_hash: str, now: datetime) -> bool:
        """Mark a code used; False when it had been used already."""
        result: CursorResult[Any] = await self._session.execute(  # type: ignore[assignment]
            update(OAuthAuthorization)
            .where(OAuthAuthorization.code_hash == code_hash, OAuthAuthorization.used_at.is_(None))
            .values(used_at=now)
        )
        return result.rowcount == 1

    async def delete_authorization(self, request_hash: str) -> None:
        """Forget an authorization request (the user refused)."""
        await self._session.execute(
            delete(OAuthAuthorization).where(OAuthAuthorization.request_hash == request_hash)
        )

    async def delete_expired_authorizations(self, now: datetime) -> None:
        """Forget authorization requests whose time is over (a grant made from one stays)."""
        await self._session.execute(
            delete(OAuthAuthorization).where(OAuthAuthorization.expires_at < now)
        )

    # --- grants -------------------------------------------------------------------------

    async def add_grant(
        self,
        *,
        client_pk: int,
        user_id: int | None,
        user_email: str,
        facility_id: int,
        scopes: list[str],
        resource: str,
        now: datetime,
    ) -> int:
        """A new grant's id."""
        row = await self._add(
            OAuthGrant(
                client_id=client_pk,
                user_id=user_id,
                user_email=user_email,
                facility_id=facility_id,
                scopes=scopes,
                resource=resource,
                created_at=now,
            )
        )
        return row.id

    async def grant(self, grant_id: int) -> OAuthGrantRecord | None:
        """The grant of that id, or None."""
        row = (
            await self._session.execute(_grants_query().where(OAuthGrant.id == grant_id))
        ).first()
        return None if row is None else _grant(*row)

    async def grants(
        self, *, student_id: str | None = None, limit: int = 200
    ) -> list[OAuthGrantRecord]:
        """Grants newest first: one customer's (its facilities'), or everyone's (None)."""
        query = _grants_query()
        if student_id is not None:
            query = query.where(CustomerIntegration.student_id == student_id)
        query = query.order_by(OAuthGrant.id.desc()).limit(limit)
        return [_grant(*row) for row in (await self._session.execute(query)).all()]

    async def revoke_grant(self, grant_id: int, *, now: datetime, by: str) -> bool:
        """End a grant (every token under it); False when it was already ended or unknown."""
        result: CursorResult[Any] = await self._session.execute(  # type: ignore[assignment]
            update(OAuthGrant)
            .where(OAuthGrant.id == grant_id, OAuthGrant.revoked_at.is_(None))
            .values(revoked_at=now, revoked_by=by[:200])
        )
        return result.rowcount == 1

    # --- tokens -------------------------------------------------------------------------

    async def add_token(
        self,
        token_hash: str,
        *,
        grant_id: int,
        kind: str,
        prefix: str,
        now: datetime,
        expires_at: datetime,
    ) -> None:
        """Keep a new token's hash."""
        await self._add(
            OAuthToken(
                token_hash=token_hash,
                grant_id=grant_id,
                kind=kind,
                prefix=prefix,
                created_at=now,
                expires_at=expires_at,
            )
        )

    async def token(self, token_hash: str) -> OAuthTokenRecord | None:
        """The token of that hash with its grant and facility, or None."""
        query = (
            _grants_query()
            .add_columns(OAuthToken)
            .join(OAuthToken, OAuthToken.grant_id == OAuthGrant.id)
        )
        row = (
            await self._session.execute(query.where(OAuthToken.token_hash == token_hash))
        ).first()
        if row is None:
            return None
        grant, client, facility, student_id, token = row
        return view_of(
            OAuthTokenRecord,
            token,
            grant=_grant(grant, client, facility, student_id),
            facility=facility,
        )

    async def spend_refresh(self, token_hash: str, now: datetime) -> bool:
        """Mark a refresh token used; False when it had been used already."""
        result: CursorResult[Any] = await self._session.execute(  # type: ignore[assignment]
            update(OAuthToken)
            .where(
                OAuthToken.token_hash == token_hash,
                OAuthToken.kind == "refresh",
                OAuthToken.used_at.is_(None),
            )
            .values(used_at=now)
        )
        return result.rowcount == 1

    async def delete_expired_tokens(self, now: datetime) -> None:
        """Forget tokens past their expiry (a spent refresh token is kept until then)."""
        await self._session.execute(delete(OAuthToken).where(OAuthToken.expires_at < now))

    # --- what a user may grant ------------------------------------------------------------

    async def facilities_of(self, student_id: str | None) -> list[tuple[int, str, str]]:
        """(id, hotel_id, name) of a customer's facilities, or of every facility (None)."""
        query = select(Facility.id, Facility.hotel_id, Facility.name).order_by(Facility.hotel_id)
        if student_id is not None:
            query = (
                query.join(CustomerIntegration, CustomerIntegration.facility_id == Facility.id)
                .join(Customer, Customer.student_id == CustomerIntegration.student_id)
                .where(
                    CustomerIntegration.provider == "kross",
                    CustomerIntegration.student_id == student_id,
                )
            )
        return [(row[0], row[1], row[2]) for row in (await self._session.execute(query)).all()]
