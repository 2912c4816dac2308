"""Console accounts and their sessions: the only queries on ``users`` and ``web_sessions``.

A user row holds an argon2id hash, never a password. A session row holds the SHA-256
of the session id the browser's cookie carries (never the id itself), its CSRF token
and its expiry; deleting the row ends the session wherever the cookie still lives.
The repositories work in the caller's session and never commit; the checks and the
caller-facing errors are :class:`pmsgate.web.users.UserService`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from pmsgate.clock import Clock
from pmsgate.storage.models import Customer, User, UserRole, WebSession
from pmsgate.storage.repository import Repository
from pmsgate.storage.views import view_of

MAX_EMAIL = 254  # the column's length (RFC 5321 path limit)
# The password hash of an account whose password is not set yet (created by onboarding,
# waiting for its invitation to be used): no password verifies against it.
NO_PASSWORD = "!"


@dataclass(frozen=True)
class UserRecord:
    """A stored account, with its password hash (for the service's checks only)."""

    id: int
    email: str
    role: UserRole
    student_id: str | None
    created_at: datetime
    updated_at: datetime
    last_login_at: datetime | None
    password_hash: str = field(repr=False)
    invited_at: datetime | None = None
    # A customer account's customer reads in this language and time zone (None: not known).
    language: str | None = None
    timezone: str | None = None

    @property
    def password_set(self) -> bool:
        """Whether the account has a password (an invited one may not have chosen it yet)."""
        return self.password_hash != NO_PASSWORD


@dataclass(frozen=True)
class SessionRecord:
    """A live session of one user."""

    id_hash: str
    user_id: int
    csrf_token: str = field(repr=False)
    created_at: datetime
    expires_at: datetime
    last_seen_at: datetime


def _record(row: User, customer: Customer | None = None) -> UserRecord:
    return view_of(
        UserRecord,
        row,
        language=customer.language if customer is not None else None,
        timezone=customer.timezone if customer is not None else None,
    )


def _session_record(row: WebSession) -> SessionRecord:
    return view_of(SessionRecord, row)


class UserRepository(Repository):
    """Adds, reads, changes and removes console accounts (by e-mail address), in the caller's
    session; never commits (an insert that breaks a constraint raises ``IntegrityError``)."""

    def __init__(self, session: AsyncSession, clock: Clock) -> None:
        super().__init__(session)
        self._clock = clock

    async def add(self, email: str, **columns: Any) -> UserRecord:
        """Store a new account given its ``password_hash``, ``role`` and ``student_id``
        (flushed, so its id is known); it has never signed in."""
        now = self._clock.now()
        row = User(email=email, **columns, created_at=now, updated_at=now, last_login_at=None)
        await self._add(row)
        return _record(row)

    async def all(self) -> list[UserRecord]:
        """Every account, ordered by e-mail address."""
        rows = (await self._session.execute(select(User).order_by(User.email))).scalars().all()
        return [_record(row) for row in rows]

    async def by_email(self, email: str) -> UserRecord | None:
        """The account with this (normalised) e-mail address, if any."""
        row = await self._by_email(email)
        return None if row is None else _record(row)

    async def by_id(self, user_id: int) -> UserRecord | None:
        """The account with this id, if any."""
        row = await self._session.get(User, user_id)
        return None if row is None else _record(row)

    async def customer_exists(self, student_id: str) -> bool:
        """Whether a customer with this student_id exists (a customer user's must)."""
        found = (
            await self._session.execute(
                select(Customer.id).where(Customer.student_id == student_id)
            )
        ).first()
        return found is not None

    async def remove(self, email: str) -> bool:
        """Delete the account and every session of it; False when there is none."""
        row = await self._by_email(email)
        if row is None:
            return False
        # Explicit, not only ON DELETE CASCADE: the sessions must end on every backend.
        await self._session.execute(delete(WebSession).where(WebSession.user_id == row.id))
        await self._session.delete(row)
        return True

    async def set_password_hash(self, email: str, password_hash: str) -> bool:
        """Replace the account's hash and end every session of it; False when there is none."""
        row = await self._by_email(email)
        if row is None:
            return False
        row.password_hash = password_hash
        row.updated_at = self._clock.now()
        await self._session.execute(delete(WebSession).where(WebSession.user_id == row.id))
        return True

    async def rehash(self, user_id: int, *, old_hash: str, new_hash: str) -> None:
        """Replace a hash made with old argon2 parameters, unless the password changed since."""
        await self._session.execute(
            update(User)
            .where(User.id == user_id, User.password_hash == old_hash)
            .values(password_hash=new_hash)
        )

    async def mark_invited(self, user_id: int, at: datetime) -> None:
        """Remember that the account's invitation was sent now."""
        await self._session.execute(update(User).where(User.id == user_id).values(invited_at=at))

    async def set_hash_of(self, user_id: int, password_hash: str) -> None:
        """Give the account with this id a new hash and end every session of it."""
        await self._session.execute(
            update(User)
            .where(User.id == user_id)
            .values(password_hash=password_hash, updated_at=self._clock.now())
        )
        await self._session.execute(delete(WebSession).where(WebSession.user_id == user_id))

    async def record_login(self, user_id: int, at: datetime) -> None:
        """Remember when the user last signed in."""
        await self._session.execute(update(User).where(User.id == user_id).values(last_login_at=at))

    async def _by_email(self, email: str) -> User | None:
        found: User | None = (
            await self._session.execute(select(User).where(User.email == email))
        ).scalar_one_or_none()
        return found


class WebSessionRepository(Repository):
    """Creates, finds, touches and ends console sessions (by the hash of their id), in the
    caller's session; never commits."""

    async def create(self, **columns: Any) -> SessionRecord:
        """Store a new session of the user, given its columns (``id_hash``, ``user_id``,
        ``csrf_token``, ``created_at``, ``expires_at``); it was last seen when created."""
        row = WebSession(**columns, last_seen_at=columns["created_at"])
        await self._add(row)
        return _session_record(row)

    async def live(self, id_hash: str, now: datetime) -> tuple[SessionRecord, UserRecord] | None:
        """The unexpired session with this hash and its user, if any."""
        found = (
            await self._session.execute(
                select(WebSession, User, Customer)
                .join(User, User.id == WebSession.user_id)
                .outerjoin(Customer, Customer.student_id == User.student_id)
                .where(WebSession.id_hash == id_hash, WebSession.expires_at > now)
            )
        ).one_or_none()
        if found is None:
            return None
        return _session_record(found[0]), _record(found[1], found[2])

    async def touch(self, id_hash: str, at: datetime) -> None:
        """Record that the session was just used."""
        await self._session.execute(
            update(WebSession).where(WebSession.id_hash == id_hash).values(last_seen_at=at)
        )

    async def end(self, id_hash: str) -> None:
        """Delete the session (a no-op when it is already gone)."""
        await self._session.execute(delete(WebSession).where(WebSession.id_hash == id_hash))

    async def delete_expired(self, now: datetime) -> int:
        """Delete every expired session; how many were deleted."""
        result = await self._session.execute(delete(WebSession).where(WebSession.expires_at <= now))
        return int(getattr(result, "rowcount", 0) or 0)

    async def count_for(self, user_id: int, now: datetime) -> int:
        """How many live sessions the user has."""
        rows = (
            await self._session.execute(
                select(WebSession.id_hash).where(
                    WebSession.user_id == user_id, WebSession.expires_at > now
                )
            )
        ).all()
        return len(rows)
