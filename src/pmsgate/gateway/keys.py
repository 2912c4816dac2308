"""Gateway keys: random bearer keys a caller presents; only their SHA-256 is ever stored.

A key reads ``pgw_`` + ``secrets.token_urlsafe(32)`` (256 random bits). Because
the key is high-entropy, a plain SHA-256 is enough to store it (nothing to
brute-force, so no salt or slow hash), and looking a presented key up *by its
hash* keeps the check constant-time with respect to the secret: the database
compares digests, never the key itself. The short display prefix lets an
operator tell keys apart without exposing them.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass, field
from datetime import timedelta

from pmsgate.errors import InvalidInput

KEY_PREFIX = "pgw_"
# token_urlsafe(32) is always 43 characters of the URL-safe base64 alphabet.
_KEY_RE = re.compile(r"^pgw_[A-Za-z0-9_-]{43}$")
# "pgw_" + 8 characters: 48 bits, enough to tell keys apart, useless to guess one.
DISPLAY_PREFIX_LENGTH = 12


@dataclass(frozen=True)
class MintedKey:
    """A freshly generated key: the raw value (to show once), its hash and display prefix."""

    raw: str = field(repr=False)
    key_hash: str
    prefix: str


def hash_key(raw: str) -> str:
    """The SHA-256 hex digest under which a key is stored."""
    return hashlib.sha256(raw.encode()).hexdigest()


def display_prefix(raw: str) -> str:
    """The first characters of a key, safe to show in listings and logs."""
    return raw[:DISPLAY_PREFIX_LENGTH]


def is_well_formed(raw: str) -> bool:
    """True when the text has the shape of a gateway key (says nothing of its validity)."""
    return bool(_KEY_RE.match(raw))


def mint_key() -> MintedKey:
    """A new random gateway key."""
    raw = KEY_PREFIX + secrets.token_urlsafe(32)
    return MintedKey(raw=raw, key_hash=hash_key(raw), prefix=display_prefix(raw))


_DURATION_RE = re.compile(r"^\s*(\d{1,6})\s*([dhm])\s*$")
_UNITS = {"d": "days", "h": "hours", "m": "minutes"}


def parse_duration(text: str, *, option: str = "--expires-in") -> timedelta:
    """A positive duration written ``30d``, ``12h`` or ``90m`` (key expiry, rotation grace)."""
    match = _DURATION_RE.match(text)
    amount = int(match.group(1)) if match else 0
    if match is None or amount < 1:
        raise InvalidInput(
            f"{option} {text!r} is not a duration.",
            code="invalid_duration",
            hint=f"Write a positive whole number followed by d, h or m: {option} 30d.",
        )
    return timedelta(**{_UNITS[match.group(2)]: amount})
