"""Spent one-time form tokens, in the caller's session (:mod:`pmsgate.web.form_tokens`).

Spending is one ``INSERT … ON CONFLICT DO NOTHING`` on the token's hash: whichever request
inserts the row won, on every backend and across replicas; the others read the row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update

from pmsgate.storage.integrity import insert_unless_taken
from pmsgate.storage.models import FormTokenUse
from pmsgate.storage.repository import Repository
from pmsgate.storage.views import view_of


@dataclass(frozen=True)
class FormTokenUseRecord:
    """A spent token as the web layer reads it (the hand-off stays ciphertext)."""

    token_hash: str
    purpose: str
    session_hash: str
    spent_at: datetime
    result_path: str | None
    handoff: str | None
    handoff_expires_at: datetime | None


def _record(row: FormTokenUse) -> FormTokenUseRecord:
    return view_of(FormTokenUseRecord, row)


class FormTokenRepository(Repository):
    """Spends tokens and keeps what their one use left behind, in the caller's session."""

    async def spend(self, token_hash: str, *, now: datetime, **columns: Any) -> bool:
        """Record the token as spent (with its ``purpose``, ``session_hash`` and
        ``expires_at``); False when it already was (by anyone, anywhere)."""
        return await insert_unless_taken(
            self._session,
            FormTokenUse,
            ["token_hash"],
            token_hash=token_hash,
            spent_at=now,
            **columns,
        )

    async def find(self, token_hash: str) -> FormTokenUseRecord | None:
        """The spent token with this hash, if any."""
        row = await self._session.get(FormTokenUse, token_hash, populate_existing=True)
        return None if row is None else _record(row)

    async def release(self, token_hash: str) -> None:
        """Forget a spend whose action changed nothing, so the same form can be sent again."""
        await self._session.execute(
            delete(FormTokenUse).where(FormTokenUse.token_hash == token_hash)
        )

    async def set_result(
        self,
        token_hash: str,
        *,
        result_path: str,
        handoff: str | None = None,
        handoff_expires_at: datetime | None = None,
    ) -> None:
        """Keep the page the action answered with, and a one-time hand-off (ciphertext)."""
        await self._session.execute(
            update(FormTokenUse)
            .where(FormTokenUse.token_hash == token_hash)
            .values(result_path=result_path, handoff=handoff, handoff_expires_at=handoff_expires_at)
        )

    async def take_handoff(
        self, token_hash: str, *, session_hash: str, now: datetime
    ) -> str | None:
        """The hand-off's ciphertext, erased in the same statement: only one reader gets it.

        None when it was read already, belongs to another session or has expired.
        """
        found = (
            await self._session.execute(
                select(FormTokenUse.handoff).where(
                    FormTokenUse.token_hash == token_hash,
                    FormTokenUse.session_hash == session_hash,
                    FormTokenUse.handoff.is_not(None),
                    FormTokenUse.handoff_expires_at > now,
                )
            )
        ).scalar_one_or_none()
        if found is None:
            return None
        # Conditional: of two concurrent readers, the one whose update erased it shows it.
        erased = await self._session.execute(
            update(FormTokenUse)
            .where(FormTokenUse.token_hash == token_hash, FormTokenUse.handoff == found)
            .values(handoff=None, handoff_expires_at=None)
        )
        return found if erased.rowcount else None  # type: ignore[attr-defined]

    async def delete_expired(self, now: datetime) -> int:
        """Delete spent tokens past their expiry, and erase hand-offs past theirs."""
        await self._session.execute(
            update(FormTokenUse)
            .where(FormTokenUse.handoff.is_not(None), FormTokenUse.handoff_expires_at <= now)
            .values(handoff=None, handoff_expires_at=None)
        )
        result = await self._session.execute(
            delete(FormTokenUse).where(FormTokenUse.expires_at <= now)
        )
        return int(result.rowcount)  # type: ignore[attr-defined]
