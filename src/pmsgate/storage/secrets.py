"""Where the vault's ciphertexts are stored, read for the key check (never decrypted here).

A ciphertext reads ``<key id>:<base64>`` (pmsgate.gateway.vault). The key check of
`pmsgate doctor` and `/readyz` needs two things, both cheap whatever the number of rows:
the key ids stored secrets name that the configuration lacks (one ``LIMIT 1`` query per
column and id found), and one facility credential per configured key id to decrypt.
Key ids are letters and digits only (the vault refuses others), so they are safe in a
``LIKE`` pattern. The repository works in the caller's session and never commits.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import InstrumentedAttribute

from pmsgate.storage.models import (
    CustomerIntegration,
    Facility,
    FacilityToken,
    WebhookSubscription,
)
from pmsgate.storage.repository import Repository

# Every column that holds vault ciphertext.
CIPHERTEXT_COLUMNS: tuple[InstrumentedAttribute[str] | InstrumentedAttribute[str | None], ...] = (
    Facility.password_enc,
    Facility.api_key_enc,
    FacilityToken.token_enc,
    CustomerIntegration.token_enc,
    WebhookSubscription.secret_enc,
    WebhookSubscription.previous_secret_enc,
)


@dataclass(frozen=True)
class CredentialSample:
    """One stored facility credential: which facility, which field, its ciphertext."""

    hotel_id: str
    field: str  # password | api_key
    ciphertext: str


def _under(
    column: ColumnElement[str] | InstrumentedAttribute[str | None], key_id: str
) -> ColumnElement[bool]:
    return column.like(f"{key_id}:%")


class StoredSecrets(Repository):
    """Reads which key ids the stored ciphertexts name, and samples to decrypt."""

    async def key_ids_besides(self, known: Iterable[str]) -> set[str]:
        """The key ids stored ciphertexts name other than ``known`` (empty when all are known)."""
        found: set[str] = set()
        for column in CIPHERTEXT_COLUMNS:
            while True:
                excluded = [*known, *found]
                query = (
                    select(column)
                    .where(column.contains(":"), *(~_under(column, k) for k in excluded))
                    .limit(1)
                )
                ciphertext = (await self._session.execute(query)).scalar_one_or_none()
                key_id = None if ciphertext is None else ciphertext.partition(":")[0]
                if key_id is None or key_id in found:  # the latter: an id LIKE cannot exclude
                    break
                found.add(key_id)
        return found

    async def facility_sample(self, key_id: str) -> CredentialSample | None:
        """One facility credential encrypted under ``key_id`` (a password first), or None."""
        for field, column in (
            ("password", Facility.password_enc),
            ("api_key", Facility.api_key_enc),
        ):
            query = select(Facility.hotel_id, column).where(_under(column, key_id)).limit(1)
            row = (await self._session.execute(query)).first()
            if row is not None and row[1] is not None:
                return CredentialSample(row[0], field, row[1])
        return None
