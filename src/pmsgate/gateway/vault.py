"""The credentials vault: AES-256-GCM with a key-id prefix and associated data.

A ciphertext reads ``<key id>:<base64(nonce ‖ ciphertext+tag)>``. The associated
data binds it to one facility and one field, so a ciphertext copied to another
row or column fails to decrypt instead of leaking the wrong secret.
Keys come from ``PMSGATE_SECRET_KEYS`` (``id:base64key,…``): the first encrypts,
all decrypt, and :meth:`Vault.needs_rotation` tells which values to re-encrypt.
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from pmsgate.errors import ConfigurationError, PmsgateError
from pmsgate.storage.models import Ciphertext

NONCE_BYTES = 12


class VaultError(PmsgateError):
    """A stored secret cannot be decrypted with the configured keys."""

    code = "vault_decrypt_failed"
    status = 500
    hint = "Check that PMSGATE_SECRET_KEYS still lists the key this secret was encrypted with."


def generate_key_spec(key_id: str | None = None) -> str:
    """A fresh ``id:base64key`` entry for PMSGATE_SECRET_KEYS."""
    key_id = key_id or f"k{secrets.token_hex(3)}"
    return f"{key_id}:{base64.b64encode(AESGCM.generate_key(bit_length=256)).decode()}"


def parse_key_spec(spec: str) -> dict[str, bytes]:
    """The 32-byte keys of a PMSGATE_SECRET_KEYS spec by id, the primary (first) one first."""
    keys: dict[str, bytes] = {}
    for entry in (part.strip() for part in spec.split(",")):
        if not entry:
            continue
        key_id, sep, encoded = entry.partition(":")
        if not sep or not key_id.isalnum():
            raise ConfigurationError(
                "PMSGATE_SECRET_KEYS has an entry that is not `id:base64key`.",
                code="invalid_secret_keys",
                hint="Generate one with `pmsgate secrets generate-key`.",
            )
        try:
            raw = base64.b64decode(encoded, validate=True)
        except binascii.Error:
            raw = b""
        if len(raw) != 32:
            raise ConfigurationError(
                f"PMSGATE_SECRET_KEYS key {key_id!r} is not 32 bytes of base64.",
                code="invalid_secret_keys",
                hint="Generate one with `pmsgate secrets generate-key`.",
            )
        if key_id in keys:
            raise ConfigurationError(
                f"PMSGATE_SECRET_KEYS lists key id {key_id!r} twice.",
                code="invalid_secret_keys",
                hint="Give every key its own id.",
            )
        keys[key_id] = raw
    if not keys:
        raise ConfigurationError(
            "PMSGATE_SECRET_KEYS is not set: credentials cannot be stored encrypted.",
            code="missing_secret_keys",
            hint="Generate a key with `pmsgate secrets generate-key` and set PMSGATE_SECRET_KEYS.",
        )
    return keys


def parse_ciphertext(ciphertext: str) -> tuple[str, bytes | None]:
    """The key id of ``<key id>:<base64(nonce ‖ ciphertext+tag)>`` and its sealed bytes
    (None when they are not base64)."""
    key_id, _, encoded = ciphertext.partition(":")
    try:
        return key_id, base64.b64decode(encoded, validate=True)
    except binascii.Error:
        return key_id, None


class Vault:
    """Encrypts and decrypts secrets bound to a context (facility and field)."""

    def __init__(self, key_spec: str) -> None:
        self._keys = {key_id: AESGCM(raw) for key_id, raw in parse_key_spec(key_spec).items()}
        self.primary_key_id = next(iter(self._keys))

    def __repr__(self) -> str:
        return f"Vault(primary={self.primary_key_id!r}, keys={len(self._keys)})"

    def encrypt(self, plaintext: str, *, context: str) -> Ciphertext:
        """Ciphertext of the plaintext under the primary key, bound to the context."""
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._keys[self.primary_key_id].encrypt(
            nonce, plaintext.encode(), context.encode()
        )
        return Ciphertext(f"{self.primary_key_id}:{base64.b64encode(nonce + sealed).decode()}")

    def decrypt(self, ciphertext: str, *, context: str) -> str:
        """The plaintext, if the ciphertext was made for this context with a known key."""
        key_id, blob = parse_ciphertext(ciphertext)
        aead = self._keys.get(key_id)
        if aead is None:
            raise VaultError(f"No configured key has id {key_id!r}.")
        try:
            if blob is None:
                raise ValueError("not base64")
            return aead.decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], context.encode()).decode()
        except (InvalidTag, ValueError):
            raise VaultError("A stored secret failed authentication for its context.") from None

    def needs_rotation(self, ciphertext: str) -> bool:
        """True when the ciphertext was not made with the primary key."""
        return ":" not in ciphertext or parse_ciphertext(ciphertext)[0] != self.primary_key_id

    def rotate(self, ciphertext: str, *, context: str) -> str:
        """The same secret re-encrypted under the primary key."""
        return self.encrypt(self.decrypt(ciphertext, context=context), context=context)


def facility_context(hotel_id: str, field: str) -> str:
    """Associated data for a facility's secret field (password, api_key, token)."""
    return f"pmsgate/facility/{hotel_id}/{field}"
