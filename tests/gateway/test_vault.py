"""The credentials vault: AES-GCM bound to a facility and field, several keys, rotation."""

from __future__ import annotations

import base64

import pytest

from pmsgate.errors import PmsgateError
from pmsgate.gateway.vault import (
    Vault,
    VaultError,
    facility_context,
    generate_key_spec,
    parse_ciphertext,
    parse_key_spec,
)

KEY_1 = generate_key_spec("k1")
KEY_2 = generate_key_spec("k2")
PASSWORD_CONTEXT = facility_context("123456", "password")


def test_a_secret_round_trips_through_the_vault() -> None:
    vault = Vault(KEY_1)
    sealed = vault.encrypt("s3cret pässword", context=PASSWORD_CONTEXT)
    assert vault.decrypt(sealed, context=PASSWORD_CONTEXT) == "s3cret pässword"


def test_a_ciphertext_carries_its_key_id_but_not_the_plaintext_and_differs_every_time() -> None:
    vault = Vault(KEY_1)
    first = vault.encrypt("s3cret", context=PASSWORD_CONTEXT)
    second = vault.encrypt("s3cret", context=PASSWORD_CONTEXT)
    assert first.startswith("k1:")
    assert first != second
    assert "s3cret" not in first
    assert b"s3cret" not in base64.b64decode(first.partition(":")[2])


@pytest.mark.parametrize(
    "other_context",
    [facility_context("654321", "password"), facility_context("123456", "api_key")],
    ids=["another facility", "another field"],
)
def test_a_ciphertext_does_not_decrypt_in_another_context(other_context: str) -> None:
    vault = Vault(KEY_1)
    sealed = vault.encrypt("s3cret", context=PASSWORD_CONTEXT)
    with pytest.raises(VaultError) as caught:
        vault.decrypt(sealed, context=other_context)
    assert caught.value.code == "vault_decrypt_failed"
    assert "s3cret" not in str(caught.value)


def test_a_tampered_ciphertext_is_refused() -> None:
    vault = Vault(KEY_1)
    key_id, _, encoded = vault.encrypt("s3cret", context=PASSWORD_CONTEXT).partition(":")
    blob = bytearray(base64.b64decode(encoded))
    blob[-1] ^= 1
    with pytest.raises(VaultError):
        vault.decrypt(
            f"{key_id}:{base64.b64encode(bytes(blob)).decode()}", context=PASSWORD_CONTEXT
        )


def test_the_first_key_encrypts_and_every_listed_key_decrypts() -> None:
    old = Vault(KEY_1).encrypt("s3cret", context=PASSWORD_CONTEXT)
    both = Vault(f"{KEY_2},{KEY_1}")
    assert both.primary_key_id == "k2"
    assert both.decrypt(old, context=PASSWORD_CONTEXT) == "s3cret"
    assert both.needs_rotation(old)
    fresh = both.encrypt("s3cret", context=PASSWORD_CONTEXT)
    assert fresh.startswith("k2:")
    assert not both.needs_rotation(fresh)


def test_rotation_re_encrypts_under_the_first_key_and_the_old_key_can_then_go() -> None:
    old = Vault(KEY_1).encrypt("s3cret", context=PASSWORD_CONTEXT)
    rotated = Vault(f"{KEY_2},{KEY_1}").rotate(old, context=PASSWORD_CONTEXT)
    assert rotated.startswith("k2:")
    assert Vault(KEY_2).decrypt(rotated, context=PASSWORD_CONTEXT) == "s3cret"


def test_a_value_under_a_key_that_is_no_longer_listed_fails_with_a_vault_error() -> None:
    old = Vault(KEY_1).encrypt("s3cret", context=PASSWORD_CONTEXT)
    with pytest.raises(VaultError) as caught:
        Vault(KEY_2).decrypt(old, context=PASSWORD_CONTEXT)
    assert caught.value.code == "vault_decrypt_failed"


SHORT_KEY = base64.b64encode(b"x" * 16).decode()


@pytest.mark.parametrize(
    ("spec", "code"),
    [
        ("", "missing_secret_keys"),
        (" , ", "missing_secret_keys"),
        ("just-a-key", "invalid_secret_keys"),
        ("k1:not base64!", "invalid_secret_keys"),
        (f"k1:{SHORT_KEY}", "invalid_secret_keys"),
        (f"k-1:{KEY_1.partition(':')[2]}", "invalid_secret_keys"),
        (f"{KEY_1},{KEY_1}", "invalid_secret_keys"),
    ],
    ids=["empty", "only commas", "no id", "not base64", "16 bytes", "bad id", "duplicate id"],
)
def test_a_bad_key_specification_is_refused_with_its_code(spec: str, code: str) -> None:
    with pytest.raises(PmsgateError) as caught:
        Vault(spec)
    assert caught.value.code == code
    secret_part = KEY_1.partition(":")[2]
    assert secret_part not in str(caught.value)


def test_the_vault_repr_names_the_key_id_but_no_key_material() -> None:
    vault = Vault(f"{KEY_1},{KEY_2}")
    shown = repr(vault) + str(vault)
    assert "k1" in shown
    for spec in (KEY_1, KEY_2):
        assert spec.partition(":")[2] not in shown


def test_generated_key_specs_are_distinct_and_usable() -> None:
    first, second = generate_key_spec(), generate_key_spec()
    assert first != second
    vault = Vault(f"{first},{second}")
    assert vault.decrypt(vault.encrypt("x", context="c"), context="c") == "x"


def test_the_vault_parses_its_own_ciphertext_and_key_spec() -> None:
    first, second = generate_key_spec("k1"), generate_key_spec("k2")
    vault = Vault(f"{first},{second}")
    ciphertext = vault.encrypt("secret-value", context="ctx")

    key_id, sealed = parse_ciphertext(ciphertext)

    assert key_id == "k1"
    assert sealed is not None and len(sealed) == 12 + len("secret-value") + 16
    assert parse_ciphertext("plain-token-value") == ("plain-token-value", b"")
    assert parse_ciphertext("k1:not base64!") == ("k1", None)
    assert list(parse_key_spec(f"{first},{second}")) == ["k1", "k2"]
    assert parse_key_spec(first)["k1"] == base64.b64decode(first.partition(":")[2])
    assert vault.needs_rotation("k2:AAAA") and vault.needs_rotation("k1")
    assert not vault.needs_rotation(ciphertext)
