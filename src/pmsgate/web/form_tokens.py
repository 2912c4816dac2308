"""One-time form tokens: a console form that creates something creates it once.

A reload of the page a POST answered, a double click or the browser's "resend" sends
the same form again; without a guard each one would mint another key or start another
sync. Such a form carries a one-time token:

* **Issued** into the page by the Jinja global ``form_token("purpose")``, which renders
  ``<input type="hidden" name="form_token" value="…">``. The token is a random nonce
  signed with itsdangerous (the session-cookie key, a salt naming the purpose and the
  session), timestamped on the injected clock: a page view writes nothing, and a token
  works only for its form, in its session, for ``PMSGATE_FORM_TOKEN_TTL_S``.
* **Spent** by the route, first thing, with :func:`pmsgate.web.forms.spend_form_token` (or
  :meth:`FormTokens.spend`): one ``INSERT … ON CONFLICT DO NOTHING`` of its SHA-256 in
  ``form_token_uses``, so exactly one request wins however many replicas race (the
  database is the state every replica shares whatever the deployment: Redis is
  optional, an in-process set is not shared). The winner acts and then
  :meth:`FormTokens.finish`\\ es with the page it answered (303, POST/redirect/GET);
  a repeat (:attr:`FormTokenSpend.repeated`) does nothing and is sent to that page with
  ``repeated=1``, which says so in plain words. An action that fails changed nothing:
  :meth:`FormTokens.release` forgets the spend, so the same form can be sent again.
* **Hand-off.** A result that may be shown only once (a new gateway key) is not put in
  the redirect's URL: :meth:`FormTokens.finish` stores it encrypted by the vault (bound
  to the token and the session) for ``PMSGATE_KEY_HANDOFF_TTL_S``, the page after the
  redirect gets it with :meth:`FormTokens.take_handoff` — once, in the same session —
  and it is erased in the same statement. Its reference in the URL is the token's hash.

Errors: :class:`FormTokenRefused` (400 ``form_token_invalid``: missing, altered, another
form's or another session's token) and :class:`FormTokenExpired` (400 ``form_expired``).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import KW_ONLY, dataclass
from datetime import timedelta
from urllib.parse import urlencode, urlsplit, urlunsplit

import structlog
from itsdangerous import BadSignature, SignatureExpired, TimestampSigner
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import Clock
from pmsgate.config import Settings
from pmsgate.errors import PmsgateError
from pmsgate.gateway.vault import Vault
from pmsgate.storage.form_tokens import FormTokenRepository
from pmsgate.web.signing import session_signing_key

log = structlog.get_logger(__name__)

FORM_TOKEN_FIELD = "form_token"
# The query parameter of the page a repeated form is sent to.
REPEATED_PARAM = "repeated"
_SALT = "pmsgate.web.form-token"
_NONCE_BYTES = 18


class FormTokenRefused(PmsgateError):
    """The form's one-time token is missing, altered, or another form's or session's."""

    code = "form_token_invalid"
    status = 400
    hint = "Reload the page and send the form again."

    def __init__(self, message: str = "This form cannot be sent as it is.") -> None:
        super().__init__(message)


class FormTokenExpired(FormTokenRefused):
    """The form's page was shown longer ago than the token lives."""

    code = "form_expired"

    def __init__(self) -> None:
        super().__init__("This form was opened too long ago to be sent.")


@dataclass(frozen=True)
class FormTokenSpend:
    """A token's spend: the first one (``repeated`` False) acts, a repeat does nothing."""

    token_hash: str
    purpose: str
    session_hash: str
    repeated: bool
    # The page the first use answered with (None while it is still acting, or for a first use).
    result_path: str | None = None

    @property
    def ref(self) -> str:
        """What a redirect's URL may name this use by (a hash: never the token, never a secret)."""
        return self.token_hash


def with_query(path: str, **params: str) -> str:
    """``path`` with ``params`` added to its query (its ``#fragment`` kept at the end)."""
    parts = urlsplit(path)
    query = "&".join(filter(None, [parts.query, urlencode(params)]))
    return urlunsplit(("", "", parts.path, query, parts.fragment))


def repeated_path(spend: FormTokenSpend, fallback: str) -> str:
    """Where a repeated form goes: the first use's page (else ``fallback``), marked repeated."""
    return with_query(spend.result_path or fallback, **{REPEATED_PARAM: "1"})


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class _ClockSigner(TimestampSigner):
    def __init__(self, key: bytes, salt: str, clock: Clock) -> None:
        super().__init__(key, salt=salt, digest_method=hashlib.sha256)
        self._clock = clock

    def get_timestamp(self) -> int:
        """Seconds since the epoch, from the injected clock."""
        return int(self._clock.now().timestamp())


@dataclass(frozen=True, repr=False)
class FormTokens:
    """Issues and spends one-time form tokens; keeps one-time hand-offs (module docstring)."""

    sessions: async_sessionmaker[AsyncSession]
    _: KW_ONLY
    clock: Clock
    settings: Settings
    vault: Vault

    def __repr__(self) -> str:
        return "FormTokens()"

    @property
    def _ttl(self) -> timedelta:
        return timedelta(seconds=self.settings.form_token_ttl_s)

    def _signer(self, purpose: str, session_hash: str) -> _ClockSigner:
        # The salt binds the token to its form and its session: nothing else verifies it.
        salt = f"{_SALT}/{purpose}/{session_hash}"
        return _ClockSigner(session_signing_key(self.settings), salt, self.clock)

    def issue(self, purpose: str, session_hash: str) -> str:
        """A new token for one form of ``purpose`` shown to the session ``session_hash``."""
        nonce = secrets.token_urlsafe(_NONCE_BYTES)
        return self._signer(purpose, session_hash).sign(nonce).decode()

    def _verify(self, token: str, purpose: str, session_hash: str) -> None:
        if not token:
            raise FormTokenRefused("This form came without its one-time token.")
        try:
            self._signer(purpose, session_hash).unsign(
                token, max_age=int(self._ttl.total_seconds())
            )
        except SignatureExpired:
            raise FormTokenExpired() from None
        except BadSignature:
            raise FormTokenRefused() from None

    async def spend(self, token: str, *, purpose: str, session_hash: str) -> FormTokenSpend:
        """Spend ``token``: the first use wins (``repeated`` False), every other is a repeat.

        FormTokenRefused / FormTokenExpired when it is not a live token of this form and
        session (nothing is spent).
        """
        self._verify(token, purpose, session_hash)
        token_hash = _token_hash(token)
        now = self.clock.now()
        async with self.sessions.begin() as session:
            repo = FormTokenRepository(session)
            await repo.delete_expired(now)
            first = await repo.spend(
                token_hash,
                purpose=purpose,
                session_hash=session_hash,
                now=now,
                expires_at=now + self._ttl,
            )
            earlier = None if first else await repo.find(token_hash)
        if not first:
            log.info("web_form_repeated", purpose=purpose)
        return FormTokenSpend(
            token_hash=token_hash,
            purpose=purpose,
            session_hash=session_hash,
            repeated=not first,
            result_path=earlier.result_path if earlier is not None else None,
        )

    async def finish(
        self, spend: FormTokenSpend, *, result_path: str, handoff: str | None = None
    ) -> None:
        """Keep the page the first use answered with, and its one-time hand-off (encrypted)."""
        ciphertext = (
            self.vault.encrypt(handoff, context=self._context(spend.token_hash, spend.session_hash))
            if handoff is not None
            else None
        )
        handoff_ttl = timedelta(seconds=self.settings.key_handoff_ttl_s)
        async with self.sessions.begin() as session:
            await FormTokenRepository(session).set_result(
                spend.token_hash,
                result_path=result_path,
                handoff=ciphertext,
                handoff_expires_at=self.clock.now() + handoff_ttl if ciphertext else None,
            )

    async def release(self, spend: FormTokenSpend) -> None:
        """Forget a first use whose action failed and changed nothing (the form may be resent)."""
        if spend.repeated:
            return
        async with self.sessions.begin() as session:
            await FormTokenRepository(session).release(spend.token_hash)

    async def take_handoff(self, ref: str, *, session_hash: str) -> str | None:
        """The hand-off of the use ``ref`` for this session, once; None ever after."""
        if len(ref) != 64:
            return None
        async with self.sessions.begin() as session:
            ciphertext = await FormTokenRepository(session).take_handoff(
                ref, session_hash=session_hash, now=self.clock.now()
            )
        if ciphertext is None:
            return None
        return self.vault.decrypt(ciphertext, context=self._context(ref, session_hash))

    @staticmethod
    def _context(token_hash: str, session_hash: str) -> str:
        return f"pmsgate/form-handoff/{token_hash}/{session_hash}"
