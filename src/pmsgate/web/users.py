"""Console accounts: argon2id passwords, server-side sessions and login throttling.

Passwords are hashed with argon2id using OWASP's recommended parameters (19 MiB,
2 iterations, 1 lane: about 0.1 s on a small server, where argon2-cffi's defaults —
64 MiB, 3 iterations — take 0.5 s and 64 MiB per concurrent sign-in), in a worker
thread so a sign-in never stalls the event loop, and re-hashed on the next sign-in
when those parameters change. A session is a random id: the browser keeps it
(in a signed cookie, see :mod:`pmsgate.web.auth`), the database only its SHA-256, so
a leaked table cannot be replayed and deleting the row really ends the session.

Failed sign-ins are counted with pyrate-limiter buckets (in memory, or one Redis sorted
set per key so replicas share the count) three ways: per account *from one client
address* (``PMSGATE_LOGIN_MAX_FAILURES``, small: one person's typos pause that person
only, from there), per client address alone (``PMSGATE_LOGIN_ADDRESS_MAX_FAILURES``,
much higher: the team behind the same office address still signs in) and per account
from every address (``PMSGATE_LOGIN_ACCOUNT_MAX_FAILURES``, against guessing one account
from many addresses). Only failures are counted: a success neither spends nor resets
anything. An admin lifts a pause with :meth:`UserService.unlock` (console or CLI).
Within a process, sign-ins for one e-mail address, and from one client address, run one
at a time (check → verify → record under per-key locks): parallel guesses cannot all
pass the check before the first failure is recorded.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Literal, cast, get_args

import anyio
import redis.asyncio as aioredis
import structlog
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from pydantic import SecretStr
from pyrate_limiter import Rate
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.boundary import has_control_characters
from pmsgate.clock import Clock
from pmsgate.config import Settings
from pmsgate.customers.checks import (
    customer_not_found,
    email_address,
    one_of,
    optional_text,
    translate_integrity_error,
)
from pmsgate.errors import Conflict, InvalidInput, NotFound, PmsgateError, Unauthorized
from pmsgate.gateway.shared_state import RedisHealth
from pmsgate.ratelimit import RateWindows
from pmsgate.storage.integrity import FOREIGN_KEY
from pmsgate.storage.models import User, UserRole
from pmsgate.storage.notices import LoginLinkRecord, LoginLinkRepository
from pmsgate.storage.users import (
    MAX_EMAIL,
    NO_PASSWORD,
    UserRecord,
    UserRepository,
    WebSessionRepository,
)

log = structlog.get_logger(__name__)

MIN_PASSWORD = 12
MAX_PASSWORD = 1024  # argon2 takes any length; this bounds the work one request can ask for
# last_seen_at is written at most this often per session: one write per page view is waste.
TOUCH_EVERY = timedelta(seconds=60)
# Each argon2 hash takes 19 MiB; this many run at once per process, the rest queue.
HASHING_CONCURRENCY = 4
# A Redis failure bucket outlives its window by this much, then disappears.
_EXPIRY_MARGIN_S = 60


class AccountTaken(Conflict):
    """The address already signs in to an account that is not this customer's."""

    code = "account_taken"
    hint = (
        "Give the customer another e-mail address in the customer file, or move the "
        "account with `pmsgate users remove` and run onboarding again."
    )


class UserExists(Conflict):
    """An account with this e-mail address already exists."""

    code = "user_exists"
    hint = "Choose another e-mail address, or change this user's password with set-password."


def user_not_found(email: str) -> NotFound:
    """The error for an account that does not exist."""
    return NotFound(
        f"No console user with e-mail {email}.",
        code="user_not_found",
        hint="List the users with `pmsgate users list`.",
    )


def _user_refused(error: IntegrityError, email: str, student_id: str | None) -> PmsgateError:
    """The caller-facing error for an insert a concurrent writer made break a constraint."""
    return translate_integrity_error(
        error,
        User.__table__,  # type: ignore[arg-type]
        {
            "uq_users_email": lambda: UserExists(
                f"A console user with e-mail {email} already exists."
            ),
            FOREIGN_KEY: lambda: customer_not_found(student_id or ""),
            "ck_users_role_student": lambda: InvalidInput(
                "A customer user needs a student_id; an admin has none.",
                code="invalid_role_student",
                hint="Give --student-id with --role customer only.",
            ),
        },
    )


@dataclass(frozen=True)
class UserView:
    """One console account as shown to operators (never its password hash)."""

    id: int
    email: str
    role: UserRole
    student_id: str | None
    created_at: datetime
    last_login_at: datetime | None
    invited_at: datetime | None = None  # when its invitation was last sent
    password_set: bool = True  # False until an invited account chooses its password


@dataclass(frozen=True)
class Principal:
    """The signed-in user of one request."""

    user_id: int
    email: str
    role: UserRole
    student_id: str | None
    # A per-session secret: kept out of reprs (and so out of logs).
    csrf_token: str = field(repr=False)
    # What a customer account's customer reads in (None: not known; admins have none).
    language: str | None = None
    timezone: str | None = None

    @property
    def is_admin(self) -> bool:
        """Whether this user is a platform admin."""
        return self.role == "admin"


LOGIN_LINK_BYTES = 32
MAX_LINK_TOKEN = 128
# Spent and expired links are deleted this long after their expiry.
LOGIN_LINK_KEEP = timedelta(days=7)
LinkState = Literal["usable", "used", "expired", "unknown"]
# Links whose page sets the account's password (an invitation, a password reset).
PASSWORD_LINK_PURPOSES = ("invite", "reset")


def login_link_hash(token: str) -> str:
    """What the database stores of a one-time link's token: its SHA-256, hex."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class LoginLinkIssued:
    """A new one-time link's token (to put in a message, never stored) and its expiry."""

    token: str = field(repr=False)
    expires_at: datetime
    user_id: int


@dataclass(frozen=True)
class LoginLinkCheck:
    """What a one-time link is now, and its record when it exists."""

    state: LinkState
    record: LoginLinkRecord | None


def _link_check(found: LoginLinkRecord | None, now: datetime) -> LoginLinkCheck:
    if found is None:
        return LoginLinkCheck("unknown", None)
    if found.used_at is not None:
        return LoginLinkCheck("used", found)
    if found.expires_at <= now:
        return LoginLinkCheck("expired", found)
    return LoginLinkCheck("usable", found)


async def _spend_link(
    links: LoginLinkRepository,
    token: str,
    now: datetime,
    purposes: tuple[str, ...] | None = None,
) -> LoginLinkRecord:
    """Mark a usable link used, in the caller's transaction; LoginLinkRefused otherwise.

    ``purposes``: the link must be one of these (another is "unknown" here). Two requests
    racing on one link: one wins, the other is refused as used.
    """
    if not token or len(token) > MAX_LINK_TOKEN:
        raise LoginLinkRefused("unknown")
    token_hash = login_link_hash(token)
    found = await links.by_hash(token_hash)
    if found is None or (purposes is not None and found.purpose not in purposes):
        raise LoginLinkRefused("unknown")
    check = _link_check(found, now)
    if check.state != "usable" or not await links.use(token_hash, now):
        raise LoginLinkRefused(check.state if check.state != "usable" else "used")
    return found


_LINK_REFUSALS: dict[str, str] = {
    "used": "This sign-in link has already been used.",
    "expired": "This sign-in link has expired.",
    "unknown": "This sign-in link is not valid.",
}


class LoginLinkRefused(PmsgateError):
    """A one-time sign-in link that cannot sign anyone in (unknown, used or expired)."""

    code = "login_link_invalid"
    status = 410
    hint = "Sign in with your e-mail address and password instead; the link works only once."

    def __init__(self, state: str) -> None:
        self.state = state if state in _LINK_REFUSALS else "unknown"
        super().__init__(_LINK_REFUSALS[self.state])


class TooManyLoginAttempts(PmsgateError):
    """Too many failed sign-ins for this account from this address, from this address, or
    for this account (``scope``: ``pair``, ``address``, ``account``)."""

    code = "too_many_login_attempts"
    status = 429

    def __init__(self, retry_after_s: float, scope: str = "pair") -> None:
        seconds = max(1, math.ceil(retry_after_s))
        self.retry_after_s = seconds
        self.scope = scope
        super().__init__(
            "Too many failed sign-ins; signing in is paused for a while.",
            hint=f"Wait {seconds} s, then try again (or ask an admin to unlock the sign-in "
            "with `pmsgate users unlock`).",
            headers={"Retry-After": str(seconds)},
        )


class InvalidCredentials(Unauthorized):
    """A wrong e-mail address or password; ``now_locked`` names the ceilings it just reached."""

    code = "invalid_credentials"
    hint = "Check both and sign in again; repeated failures pause signing in."

    def __init__(self, now_locked: tuple[str, ...] = ()) -> None:
        self.now_locked = now_locked
        super().__init__("The e-mail address or the password is wrong.")


def invalid_credentials(now_locked: tuple[str, ...] = ()) -> InvalidCredentials:
    """The one answer to a wrong e-mail address or a wrong password."""
    return InvalidCredentials(now_locked)


def _password_bytes(password: str) -> bytes:
    """UTF-8, as argon2-cffi would encode it; a lone surrogate (from JSON) does not raise."""
    return password.encode("utf-8", "surrogatepass")


def session_id_hash(raw_session_id: str) -> str:
    """What the database stores of a session id: its SHA-256, hex."""
    return hashlib.sha256(raw_session_id.encode()).hexdigest()


def _view(record: UserRecord) -> UserView:
    return UserView(**{each.name: getattr(record, each.name) for each in fields(UserView)})


def _principal(user: UserRecord, csrf_token: str, **more: str | None) -> Principal:
    """The principal of a session of ``user`` (``more``: what it reads in)."""
    return Principal(
        user_id=user.id,
        email=user.email,
        role=user.role,
        student_id=user.student_id,
        csrf_token=csrf_token,
        **more,
    )


def normalise_email(value: str) -> str:
    """An account's e-mail address as stored: stripped, lower-cased, validated."""
    cleaned = email_address(value)
    if has_control_characters(cleaned):
        raise InvalidInput(
            "email contains a control character.",
            code="invalid_email",
            hint="Give an address of the form name@domain.tld, without control characters.",
        )
    if len(cleaned) > MAX_EMAIL:
        raise InvalidInput(
            f"email is longer than {MAX_EMAIL} characters.",
            code="invalid_email",
            hint=f"Give an address of at most {MAX_EMAIL} characters.",
        )
    return cleaned


def check_password_policy(password: SecretStr) -> str:
    """The password when it is long enough and not absurdly long; an InvalidInput otherwise."""
    value = password.get_secret_value()
    if len(value) < MIN_PASSWORD:
        raise InvalidInput(
            f"The password is shorter than {MIN_PASSWORD} characters.",
            code="password_too_short",
            hint=f"Choose a password of at least {MIN_PASSWORD} characters (a passphrase works).",
        )
    if len(value) > MAX_PASSWORD:
        raise InvalidInput(
            f"The password is longer than {MAX_PASSWORD} characters.",
            code="password_too_long",
            hint=f"Choose a password of at most {MAX_PASSWORD} characters.",
        )
    return value


# A throttle key: its kind (``pair``, ``address``, ``account``, ``email``, ``client``), then
# the values it counts for (an e-mail address, a client address), hashed when stored.
ThrottleKey = tuple[str, ...]


def _hashed(value: str) -> str:
    # surrogatepass: a lone surrogate in an address must not make hashing raise.
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class LoginThrottle:
    """Failed attempts per key over one sliding window, in memory or shared through Redis.

    A policy on :class:`~pmsgate.ratelimit.RateWindows`: a key's window holds its failures
    (a permit per failure), a key is shut while it holds its kind's ceiling
    (``ceilings``, else ``max_failures``), and without Redis nothing is decided (fail
    closed). Keys are stored hashed value by value (``pair:<account>:<address>``), so an
    admin's unlock of an account or an address can find every key that names it.
    """

    def __init__(
        self,
        *,
        clock: Clock,
        max_failures: int,
        window_s: float,
        redis: aioredis.Redis | None = None,
        namespace: str = "pmsgate",
        health: RedisHealth | None = None,
        name: str = "login-failures",
        ceilings: Mapping[str, int] | None = None,
    ) -> None:
        # Fail closed: without Redis the failures of other replicas cannot be counted, so a
        # sign-in is refused (503 shared_state_unavailable) rather than left unthrottled.
        self._health = health if health is not None else RedisHealth(clock)
        self._interval_ms = max(1, int(window_s * 1000))
        self._max_failures = max_failures
        self._ceilings = dict(ceilings or {})
        self._windows = RateWindows(
            clock=clock,
            retention_ms=self._interval_ms,
            redis=redis,
            key_prefix=f"{namespace}:{name}",
            expiry_margin_s=_EXPIRY_MARGIN_S,
            trim_every_ms=0,
        )

    def _rates(self, key: ThrottleKey) -> list[Rate]:
        return [Rate(self._ceilings.get(key[0], self._max_failures), self._interval_ms)]

    async def check(self, *keys: ThrottleKey) -> None:
        """TooManyLoginAttempts when any key has used up its failures in the window."""
        with self._health.use("check sign-in attempts"):
            wait_ms, scope = 0, ""
            for key in keys:
                # While its ceiling-th newest failure is in the window, the key is shut.
                wait, _ = await self._windows.wait_ms(self.key_name(key), self._rates(key))
                if wait > wait_ms:
                    wait_ms, scope = wait, key[0]
            if wait_ms > 0:
                raise TooManyLoginAttempts(wait_ms / 1000, scope)

    async def record_failure(self, *keys: ThrottleKey) -> tuple[str, ...]:
        """Count one failed attempt against every key; the kinds this failure shut."""
        shut: list[str] = []
        with self._health.use("count a failed sign-in"):
            for key in keys:
                name, rates = self.key_name(key), self._rates(key)
                # A refused put means the key is already shut: nothing more to count.
                if await self._windows.put(name, rates):
                    wait, _ = await self._windows.wait_ms(name, rates)
                    if wait > 0:
                        shut.append(key[0])
        return tuple(shut)

    async def unlock(self, kind: str, value: str) -> int:
        """Empty the windows of every key naming ``value`` as ``kind`` (``account`` or
        ``address``), its pairs included; how many windows held failures."""
        hashed = _hashed(value)
        patterns = {
            "account": [f"account:{hashed}", f"pair:{hashed}:*", f"email:{hashed}"],
            "address": [f"address:{hashed}", f"pair:*:{hashed}", f"client:{hashed}"],
        }[kind]
        with self._health.use("unlock sign-ins"):
            return sum([await self._windows.forget(pattern) for pattern in patterns])

    def key_name(self, key: ThrottleKey) -> str:
        """The key as stored: its kind, then each value hashed (no address in Redis or memory)."""
        return ":".join([key[0], *(_hashed(value) for value in key[1:])])


@dataclass
class _KeyLock:
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    users: int = 0  # tasks holding or waiting for the lock


class KeyedLocks:
    """One anyio lock per key, forgotten as soon as nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, _KeyLock] = {}

    def __len__(self) -> int:
        return len(self._locks)

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """Hold the key's lock for the duration of the block."""
        entry = self._locks.get(key)
        if entry is None:
            entry = self._locks[key] = _KeyLock()
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            # Also when cancelled while waiting: the dict only holds keys in use.
            entry.users -= 1
            if entry.users == 0:
                del self._locks[key]


def sign_in_keys(address: str, client: str) -> tuple[ThrottleKey, ...]:
    """What one sign-in counts against: the account from this address, the address, the account.

    The pair has the small ceiling (one person's typos pause that person only, here);
    the address alone a much higher one (guessing many accounts from one place), the
    account alone too (guessing one account from many places).
    """
    return (("pair", address, client), ("address", client), ("account", address))


# OWASP Password Storage Cheat Sheet, argon2id: m=19 MiB, t=2, p=1.
ARGON2_TIME_COST, ARGON2_MEMORY_KIB, ARGON2_PARALLELISM = 2, 19 * 1024, 1


class UserService:
    """Accounts, sign-in and sessions of the web console."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        *,
        clock: Clock,
        settings: Settings,
        redis: aioredis.Redis | None,
        health: RedisHealth | None = None,
    ) -> None:
        self._clock = clock
        self._settings = settings
        self._database = sessions
        self._hasher = PasswordHasher(
            time_cost=ARGON2_TIME_COST,
            memory_cost=ARGON2_MEMORY_KIB,
            parallelism=ARGON2_PARALLELISM,
        )
        # One account from one address has the small ceiling; an address alone and an
        # account alone much higher ones (docs/web.md, "Sign-in throttling").
        self._throttle = LoginThrottle(
            clock=clock,
            max_failures=settings.login_max_failures,
            window_s=settings.login_failure_window_s,
            redis=redis,
            namespace=settings.redis_namespace,
            health=health,
            ceilings={
                "address": settings.login_address_max_failures,
                "account": settings.login_account_max_failures,
            },
        )
        # "Forgot password?" requests: every request counts, per address and per client.
        self._resets = LoginThrottle(
            clock=clock,
            max_failures=settings.password_reset_max_per_hour,
            window_s=3600,
            redis=redis,
            namespace=settings.redis_namespace,
            health=health,
            name="password-resets",
        )
        self._dummy_hash: str | None = None
        self._hashing: anyio.CapacityLimiter | None = None
        # Sign-ins per e-mail key and per client key run one at a time (see sign_in).
        self._email_locks = KeyedLocks()
        self._client_locks = KeyedLocks()

    def __repr__(self) -> str:
        return "UserService()"

    # --- accounts --------------------------------------------------------------------------

    async def add(
        self,
        email: str,
        password: SecretStr,
        *,
        role: str,
        student_id: str | None = None,
    ) -> UserView:
        """Create an account (argon2id hash); a customer's must name an existing customer."""
        address = normalise_email(email)
        checked_role = cast(UserRole, one_of(role.strip().lower(), get_args(UserRole), "role"))
        student = optional_text(student_id, "student_id", 64)
        if student is not None and has_control_characters(student):
            raise InvalidInput(
                "student_id contains a control character.",
                code="invalid_student_id",
                hint="Give the customer's student_id as listed by `pmsgate customers list`.",
            )
        if checked_role == "customer" and student is None:
            raise InvalidInput(
                "A customer user needs the student_id of its customer.",
                code="student_id_required",
                hint="Give --student-id with --role customer.",
            )
        if checked_role == "admin" and student is not None:
            raise InvalidInput(
                "An admin user belongs to no customer.",
                code="student_id_not_allowed",
                hint="Leave out --student-id with --role admin.",
            )
        value = check_password_policy(password)
        password_hash = await self._hash(value)
        try:
            async with self._database.begin() as session:
                users = UserRepository(session, self._clock)
                if student is not None and not await users.customer_exists(student):
                    raise customer_not_found(student)
                if await users.by_email(address) is not None:
                    raise UserExists(f"A console user with e-mail {address} already exists.")
                record = await users.add(
                    address, password_hash=password_hash, role=checked_role, student_id=student
                )
        except IntegrityError as error:
            # A concurrent writer got there between the checks and the insert.
            raise _user_refused(error, address, student) from None
        log.info("web_user_added", user_id=record.id, role=record.role)
        return _view(record)

    async def ensure_customer_account(self, student_id: str, email: str) -> tuple[UserView, bool]:
        """The customer's console account with this address, created when absent.

        A new account has no password (no password verifies against it) until its
        invitation is used. ``(account, created)``; :class:`AccountTaken` when the address
        already signs in to an admin or another customer.
        """
        address = normalise_email(email)
        try:
            async with self._database.begin() as session:
                users = UserRepository(session, self._clock)
                found = await users.by_email(address)
                if found is not None:
                    if found.role != "customer" or found.student_id != student_id:
                        raise AccountTaken(
                            f"{address} already signs in to another console account."
                        )
                    return _view(found), False
                if not await users.customer_exists(student_id):
                    raise customer_not_found(student_id)
                record = await users.add(
                    address, password_hash=NO_PASSWORD, role="customer", student_id=student_id
                )
        except IntegrityError as error:
            raise _user_refused(error, address, student_id) from None
        log.info("web_user_added", user_id=record.id, role=record.role, by="onboarding")
        return _view(record), True

    async def account(self, email: str) -> UserView | None:
        """The account of this address, if any (an invalid address has none)."""
        try:
            address = normalise_email(email)
        except PmsgateError:
            return None
        record = await self._user_by_email(address)
        return None if record is None else _view(record)

    async def account_by_id(self, user_id: int) -> UserView | None:
        """The account with this id, if any."""
        async with self._database() as session:
            record = await UserRepository(session, self._clock).by_id(user_id)
        return None if record is None else _view(record)

    async def issue_link(
        self, user_id: int, *, purpose: str, target: str, ttl: timedelta
    ) -> LoginLinkIssued:
        """A new one-time link of the account (only its token's SHA-256 is stored)."""
        now = self._clock.now()
        token = secrets.token_urlsafe(LOGIN_LINK_BYTES)
        async with self._database.begin() as session:
            links = LoginLinkRepository(session)
            # Links that expired a while ago are of no use to anyone: keep the table small.
            await links.delete_older_than(now - LOGIN_LINK_KEEP)
            await links.create(
                token_hash=login_link_hash(token),
                user_id=user_id,
                target=target,
                purpose=purpose,
                created_at=now,
                expires_at=now + ttl,
            )
            if purpose == "invite":
                await UserRepository(session, self._clock).mark_invited(user_id, now)
        log.info("web_login_link_created", user_id=user_id, purpose=purpose)
        return LoginLinkIssued(token=token, expires_at=now + ttl, user_id=user_id)

    async def set_password_with_link(
        self, token: str, password: SecretStr
    ) -> tuple[Principal, str, LoginLinkRecord]:
        """Use an invitation or reset link: the account's new password and a new session.

        The password is checked first: a refused one leaves the link unspent. Setting it
        ends every other session of the account.
        """
        value = check_password_policy(password)
        password_hash = await self._hash(value)
        now = self._clock.now()
        async with self._database.begin() as session:
            found = await _spend_link(
                LoginLinkRepository(session), token, now, PASSWORD_LINK_PURPOSES
            )
            users = UserRepository(session, self._clock)
            await users.set_hash_of(found.user_id, password_hash)
            user = await users.by_id(found.user_id)
            if user is None:
                raise LoginLinkRefused("unknown")
            principal, raw_session_id = await self._open_session(session, user, now)
        log.info("web_password_set_with_link", user_id=user.id, purpose=found.purpose)
        return principal, raw_session_id, found

    async def count_reset_request(self, email: str, *, client: str) -> None:
        """Count one "Forgot password?" request; TooManyLoginAttempts past the hourly limit."""
        keys = (("email", email.strip().lower()), ("client", client))
        await self._resets.check(*keys)
        await self._resets.record_failure(*keys)

    async def list(self) -> list[UserView]:
        """Every account, ordered by e-mail address."""
        async with self._database() as session:
            return [_view(record) for record in await UserRepository(session, self._clock).all()]

    async def remove(self, email: str) -> None:
        """Delete the account and end all its sessions."""
        address = normalise_email(email)
        async with self._database.begin() as session:
            if not await UserRepository(session, self._clock).remove(address):
                raise user_not_found(address)
        log.info("web_user_removed")

    async def set_password(self, email: str, password: SecretStr) -> None:
        """Give the account a new password and end all its sessions."""
        address = normalise_email(email)
        value = check_password_policy(password)
        password_hash = await self._hash(value)
        async with self._database.begin() as session:
            if not await UserRepository(session, self._clock).set_password_hash(
                address, password_hash
            ):
                raise user_not_found(address)
        log.info("web_user_password_changed")

    # --- sign-in and sessions ----------------------------------------------------------------

    async def sign_in(
        self, email: str, password: SecretStr, *, client: str
    ) -> tuple[Principal, str]:
        """A new session for valid credentials: the principal and the raw session id."""
        address = email.strip().lower()
        keys = sign_in_keys(address, client)
        email_key, client_key = ("account", address), ("address", client)
        value = password.get_secret_value()
        # Check, verify and record under both keys' locks: otherwise parallel guesses all
        # pass the check before the first failure is recorded. Always the e-mail lock
        # first, then the client's, so two sign-ins never wait for each other in a cycle.
        # Lock names are hashed like the throttle's keys: no address kept in memory.
        async with (
            self._email_locks.hold(self._throttle.key_name(email_key)),
            self._client_locks.hold(self._throttle.key_name(client_key)),
        ):
            await self._throttle.check(*keys)
            # An address with a control character (NUL included) names no account and must
            # not reach PostgreSQL: it is answered like any unknown address.
            lookup = 0 < len(address) <= MAX_EMAIL and not has_control_characters(address)
            user = await self._user_by_email(address) if lookup else None
            if len(value) > MAX_PASSWORD:
                ok = False  # never hash an oversized input; it cannot be anyone's password
            elif user is None:
                # Same work as for a known user, so the answer's timing does not tell who exists.
                await self._verify(await self._dummy(), value)
                ok = False
            else:
                ok = await self._verify(user.password_hash, value)
            if not ok or user is None:
                now_locked = await self._throttle.record_failure(*keys)
                # Neither the address nor the password: users type passwords into the wrong field.
                log.info("web_sign_in_failed", client=client, now_locked=list(now_locked))
                raise invalid_credentials(now_locked)
        rehashed = (
            await self._hash(value) if self._hasher.check_needs_rehash(user.password_hash) else None
        )
        now = self._clock.now()
        async with self._database.begin() as session:
            users = UserRepository(session, self._clock)
            if rehashed is not None:
                await users.rehash(user.id, old_hash=user.password_hash, new_hash=rehashed)
            principal, raw_session_id = await self._open_session(session, user, now)
        log.info("web_signed_in", user_id=user.id, role=user.role)
        return principal, raw_session_id

    async def unlock(self, *, email: str | None = None, client: str | None = None) -> int:
        """Lift the sign-in pauses of an account (from every address) and/or of a client
        address (for every account); how many paused or counting windows were emptied."""
        emptied = 0
        if email:
            emptied += await self._throttle.unlock("account", email.strip().lower())
        if client:
            emptied += await self._throttle.unlock("address", client.strip())
        log.info("web_sign_in_unlocked", account=bool(email), address=bool(client))
        return emptied

    async def _open_session(
        self, session: AsyncSession, user: UserRecord, now: datetime
    ) -> tuple[Principal, str]:
        """A new session of ``user`` in the caller's transaction: the principal, the raw id."""
        raw_session_id = secrets.token_urlsafe(32)
        web_sessions = WebSessionRepository(session)
        await web_sessions.delete_expired(now)
        stored = await web_sessions.create(
            id_hash=session_id_hash(raw_session_id),
            user_id=user.id,
            csrf_token=secrets.token_urlsafe(32),
            created_at=now,
            expires_at=now + timedelta(seconds=self._settings.session_ttl_s),
        )
        await UserRepository(session, self._clock).record_login(user.id, now)
        principal = _principal(user, stored.csrf_token)
        return principal, raw_session_id

    # --- one-time sign-in links (docs/web.md, docs/operations.md Notifications) ------------

    async def create_login_link(
        self,
        student_id: str,
        *,
        preferred_email: str | None,
        target: str,
        purpose: str,
        ttl: timedelta,
    ) -> LoginLinkIssued | None:
        """A one-time link signing in the customer's console account; None without one.

        The account is the customer's with ``preferred_email`` (the customer record's
        address), else its oldest. Only the token's SHA-256 is stored.
        """
        async with self._database() as session:
            user_id = await LoginLinkRepository(session).customer_login(student_id, preferred_email)
        if user_id is None:
            return None
        return await self.issue_link(user_id, purpose=purpose, target=target, ttl=ttl)

    async def login_link(self, token: str) -> LoginLinkCheck:
        """What a link is now (without using it): usable, used, expired or unknown."""
        if not token or len(token) > MAX_LINK_TOKEN:
            return LoginLinkCheck("unknown", None)
        async with self._database() as session:
            found = await LoginLinkRepository(session).by_hash(login_link_hash(token))
        return _link_check(found, self._clock.now())

    async def sign_in_with_link(self, token: str) -> tuple[Principal, str, LoginLinkRecord]:
        """Use a one-time link: a new session of its account (the link is then spent).

        Refused with :class:`LoginLinkRefused` when the link is unknown, used or expired;
        two requests racing on one link: one wins, the other is refused.
        """
        now = self._clock.now()
        async with self._database.begin() as session:
            found = await _spend_link(LoginLinkRepository(session), token, now)
            user = await UserRepository(session, self._clock).by_id(found.user_id)
            if user is None:
                raise LoginLinkRefused("unknown")
            principal, raw_session_id = await self._open_session(session, user, now)
        log.info("web_signed_in_with_link", user_id=user.id, purpose=found.purpose)
        return principal, raw_session_id, found

    async def principal(self, raw_session_id: str) -> Principal | None:
        """The signed-in user of a session id; None when unknown or expired."""
        if not raw_session_id:
            return None
        id_hash = session_id_hash(raw_session_id)
        now = self._clock.now()
        async with self._database.begin() as session:
            web_sessions = WebSessionRepository(session)
            found = await web_sessions.live(id_hash, now)
            if found is None:
                return None
            stored, user = found
            if now - stored.last_seen_at >= TOUCH_EVERY:
                await web_sessions.touch(id_hash, now)
        return _principal(user, stored.csrf_token, language=user.language, timezone=user.timezone)

    async def sign_out(self, raw_session_id: str) -> None:
        """End the session (a no-op when it has already ended)."""
        async with self._database.begin() as session:
            await WebSessionRepository(session).end(session_id_hash(raw_session_id))
        log.info("web_signed_out")

    async def _user_by_email(self, address: str) -> UserRecord | None:
        async with self._database() as session:
            return await UserRepository(session, self._clock).by_email(address)

    # --- hashing -------------------------------------------------------------------------------

    def _limiter(self) -> anyio.CapacityLimiter:
        # Built on first use: a CapacityLimiter belongs to the running event loop.
        if self._hashing is None:
            self._hashing = anyio.CapacityLimiter(HASHING_CONCURRENCY)
        return self._hashing

    async def _hash(self, password: str) -> str:
        return await anyio.to_thread.run_sync(
            self._hasher.hash, _password_bytes(password), limiter=self._limiter()
        )

    async def _verify(self, password_hash: str, password: str) -> bool:
        def verify() -> bool:
            try:
                return bool(self._hasher.verify(password_hash, _password_bytes(password)))
            except (VerificationError, InvalidHashError):
                return False

        return await anyio.to_thread.run_sync(verify, limiter=self._limiter())

    async def _dummy(self) -> str:
        if self._dummy_hash is None:
            self._dummy_hash = await self._hash(secrets.token_urlsafe(24))
        return self._dummy_hash
