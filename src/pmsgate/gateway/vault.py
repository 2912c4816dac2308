"""The credentials vault: AES-256-GCM with a key-id prefix and associated data.

A ciphertext reads ``<key id>:<base64(nonce ‖ ciphertext+tag)>``. The associated
data binds it to one facility and one field, so a ciphertext copied to another
row or column fails to decrypt instead of leaking the wrong secret.
Keys come from ``PMSGATE_SECRET_KEYS`` (``id:base64key,…``): the first encrypts,
all decrypt, and :meth:`Vault.needs_rotation` tells which values to re-encrypt.
:class:`VaultKeyCheck` tells whether the configured keys read what is stored (`pmsgate
doctor`, `/readyz`): a key id stored secrets name and the configuration lacks, or a key
under a known id that does not decrypt its sample.
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime

import anyio
import structlog
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import Clock
from pmsgate.config import Settings
from pmsgate.errors import ConfigurationError, PmsgateError
from pmsgate.storage.models import Ciphertext
from pmsgate.storage.secrets import StoredSecrets

NONCE_BYTES = 12

log = structlog.get_logger(__name__)


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

    @property
    def key_ids(self) -> tuple[str, ...]:
        """The configured key ids, the primary first."""
        return tuple(self._keys)

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


@dataclass(frozen=True)
class VaultKeyReport:
    """Whether the configured keys read the stored secrets, and which key ids do not."""

    # Key ids stored secrets name that PMSGATE_SECRET_KEYS does not list.
    missing: tuple[str, ...] = ()
    # Configured key ids whose stored sample fails to decrypt (another key under that id).
    wrong: tuple[str, ...] = ()
    # Configured key ids whose sample decrypted.
    verified: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when every stored secret names a configured key and every sample decrypted."""
        return not self.missing and not self.wrong

    def problem(self) -> str:
        """What is wrong, in one sentence naming the key ids (empty when nothing is)."""
        parts = []
        if self.missing:
            ids = ", ".join(repr(key_id) for key_id in self.missing)
            parts.append(
                f"stored secrets are encrypted with key id {ids}, not in PMSGATE_SECRET_KEYS"
            )
        if self.wrong:
            ids = ", ".join(repr(key_id) for key_id in self.wrong)
            parts.append(
                f"PMSGATE_SECRET_KEYS key {ids} does not decrypt the secrets stored under it"
            )
        return "; ".join(parts)


@dataclass(repr=False, eq=False)
class VaultKeyCheck:
    """Checks the configured keys against the stored secrets; caches the answer a while.

    Reads, per configured key id, one stored facility credential and decrypts it (the
    plaintext is dropped at once), and looks for ciphertexts naming a key id the
    configuration lacks (pmsgate.storage.secrets: a few ``LIMIT 1`` queries). `/readyz` asks
    through :meth:`cached`: a probe every few seconds decrypts at most once per
    ``max_age_s``. The answer changes only with the stored secrets (a rotation) or the
    configuration (a restart).
    """

    sessions: async_sessionmaker[AsyncSession]
    vault: Vault
    clock: Clock
    _: KW_ONLY
    max_age_s: float = 300.0
    _last: tuple[datetime, VaultKeyReport] | None = field(default=None, init=False)
    _lock: anyio.Lock = field(default_factory=anyio.Lock, init=False)

    def __repr__(self) -> str:
        return f"VaultKeyCheck({self.vault!r}, max_age_s={self.max_age_s})"

    async def check(self) -> VaultKeyReport:
        """The keys against the stored secrets, now."""
        wrong: list[str] = []
        verified: list[str] = []
        async with self.sessions() as session:
            stored = StoredSecrets(session)
            missing = await stored.key_ids_besides(self.vault.key_ids)
            for key_id in self.vault.key_ids:
                sample = await stored.facility_sample(key_id)
                if sample is None:
                    continue
                try:
                    self.vault.decrypt(
                        sample.ciphertext, context=facility_context(sample.hotel_id, sample.field)
                    )
                except VaultError:
                    wrong.append(key_id)
                else:
                    verified.append(key_id)
        report = VaultKeyReport(tuple(sorted(missing)), tuple(wrong), tuple(verified))
        if not report.ok:  # key ids only: never a key, a ciphertext or a facility's secret
            log.warning(
                "vault_keys_do_not_read_stored_secrets", missing=report.missing, wrong=report.wrong
            )
        return report

    async def cached(self) -> VaultKeyReport:
        """The last answer if younger than ``max_age_s``, else a new one (one at a time)."""
        async with self._lock:
            now = self.clock.now()
            if self._last is None or (now - self._last[0]).total_seconds() >= self.max_age_s:
                self._last = (now, await self.check())
            return self._last[1]


def vault_from_settings(settings: Settings) -> Vault:
    """The vault of PMSGATE_SECRET_KEYS (a clear configuration error when unset)."""
    spec = settings.secret_keys.get_secret_value() if settings.secret_keys else ""
    return Vault(spec)
