"""The key the console's cookies and one-time form tokens are signed with; how a cookie is set.

``PMSGATE_SESSION_SECRET``, or, when it is unset, a key derived with HKDF-SHA256 (info
``pmsgate web session``) from the primary key of ``PMSGATE_SECRET_KEYS``: every replica
derives the same key, nothing else to distribute (docs/web.md, The session cookie).
"""

from __future__ import annotations

from functools import lru_cache

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from starlette.responses import Response

from pmsgate.config import Settings
from pmsgate.errors import ConfigurationError
from pmsgate.gateway.vault import parse_key_spec

HKDF_INFO = b"pmsgate web session"


@lru_cache(maxsize=4)
def _key_from_vault_spec(spec: str) -> bytes:
    raw = next(iter(parse_key_spec(spec).values()))  # validated with the vault's own errors
    # A separate key for another purpose: the AES key itself never signs anything.
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=HKDF_INFO).derive(raw)


def session_signing_key(settings: Settings) -> bytes:
    """The key session cookies are signed with (configured, or derived from the vault key)."""
    if settings.session_secret is not None and settings.session_secret.get_secret_value():
        return settings.session_secret.get_secret_value().encode()
    if settings.secret_keys is None or not settings.secret_keys.get_secret_value().strip():
        raise ConfigurationError(
            "Neither PMSGATE_SESSION_SECRET nor PMSGATE_SECRET_KEYS is set: session cookies "
            "cannot be signed.",
            code="missing_session_secret",
            hint="Set PMSGATE_SECRET_KEYS (see `pmsgate secrets generate-key`) or "
            "PMSGATE_SESSION_SECRET.",
        )
    return _key_from_vault_spec(settings.secret_keys.get_secret_value())


def set_console_cookie(
    response: Response, name: str, value: str, *, max_age: int, secure: bool
) -> None:
    """Set one of the console's cookies: for the whole site, never read by scripts, not sent
    with another site's requests (``samesite=lax``)."""
    response.set_cookie(
        name, value, max_age=max_age, path="/", httponly=True, samesite="lax", secure=secure
    )
