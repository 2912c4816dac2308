"""`pmsgate facilities …` and `pmsgate secrets …` through the real command line."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from pydantic import SecretStr
from typer.testing import Result

from pmsgate.clock import ManualClock
from pmsgate.errors import PmsgateError
from pmsgate.gateway.scopes import all_scopes
from pmsgate.gateway.vault import Vault, generate_key_spec
from tests.cli_support import assert_failed_with as failed_with
from tests.cli_support import pmsgate
from tests.support.cli import cli_environment

from .facility_support import (
    KEY_1,
    KEY_2,
    OWN_API_KEY,
    PARTNER_KEY,
    all_stored_text,
    facility_service,
    row_counts,
)

pytestmark = pytest.mark.anyio

PASSWORD = "cli-secret-pw-7"
ADD = [
    "facilities",
    "add",
    "--hotel-id",
    "123456",
    "--username",
    "api12345",
    "--kind",
    "partner",
    "--integration-id",
    "int-9",
    "--name",
    "Casa Esempio",
    # Nothing answers at the booking system's address here: stored without trying it
    # (the verified add is tested against the emulator in test_verified_add.py).
    "--no-verify",
]

OWN_ADD = ["own" if arg == "partner" else arg for arg in ADD]
BOTH_STDIN = ["--password-stdin", "--api-key-stdin"]


@pytest.fixture
def cli_env(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The CLI's configuration in the environment; the settings cache and logging restored."""
    with cli_environment(
        monkeypatch,
        PMSGATE_DATABASE_URL=database_url,
        PMSGATE_SECRET_KEYS=KEY_1,
        PMSGATE_PARTNER_API_KEY=PARTNER_KEY.get_secret_value(),
        # Nothing listens on the discard port: a reconnect cannot be verified there.
        PMSGATE_KROSS_BASE_URL="http://127.0.0.1:9",
        PMSGATE_KROSS_TIMEOUT_S="5",
    ):
        yield database_url


def one_json(result: Result) -> dict[str, Any]:
    """The single JSON object a --json command printed."""
    assert result.exit_code == 0, result.stderr
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def assert_failed_with(result: Result, code: str) -> None:
    """Exit status 2 and `error <code>:` plus a hint on standard error, nothing on stdout."""
    failed_with(result, code)
    assert result.stdout == ""


# --- add ------------------------------------------------------------------------------------


async def test_add_reads_the_password_from_stdin_and_prints_one_json_object_with_the_key(
    cli_env: str,
) -> None:
    result = await pmsgate(*ADD, "--password-stdin", "--json", input=f"{PASSWORD}\n")
    body = one_json(result)
    assert set(body) == {"facility", "gateway_key"}
    assert body["facility"]["hotel_id"] == "123456"
    assert body["facility"]["status"] == "unverified"
    assert body["gateway_key"].startswith("pgw_")
    assert PASSWORD not in result.stdout + result.stderr
    stored = await all_stored_text(cli_env)
    assert PASSWORD not in stored
    assert body["gateway_key"] not in stored


async def test_add_without_json_shows_the_facility_and_the_key_once(
    cli_env: str, clock: ManualClock
) -> None:
    result = await pmsgate(*ADD, "--password-stdin", input=f"{PASSWORD}\n")
    assert result.exit_code == 0, result.stderr
    assert "123456" in result.stdout
    keys = [word for word in result.stdout.split() if word.startswith("pgw_")]
    assert len(keys) == 1
    assert PASSWORD not in result.stdout + result.stderr
    async with facility_service(cli_env, clock) as service:
        assert (await service.authenticate(keys[0])).hotel_id == "123456"


async def test_without_password_stdin_the_password_is_read_from_a_hidden_prompt(
    cli_env: str, clock: ManualClock
) -> None:
    result = await pmsgate(*ADD, "--json", input=f"{PASSWORD}\n")
    body = one_json(result)
    # The prompt goes to stderr, so stdout stays one JSON object; the answer is not echoed.
    assert "API password" in result.stderr
    assert PASSWORD not in result.stdout + result.stderr
    async with facility_service(cli_env, clock) as service:
        credentials = await service.credentials(body["facility"]["hotel_id"])
    assert credentials.password.get_secret_value() == PASSWORD


async def test_add_own_reads_the_password_then_the_api_key_from_stdin(
    cli_env: str, clock: ManualClock
) -> None:
    result = await pmsgate(*OWN_ADD, *BOTH_STDIN, "--json", input=f"{PASSWORD}\n{OWN_API_KEY}\n")
    body = one_json(result)
    assert body["facility"]["kind"] == "own"
    assert OWN_API_KEY not in result.stdout + result.stderr
    assert OWN_API_KEY not in await all_stored_text(cli_env)
    async with facility_service(cli_env, clock) as service:
        credentials = await service.credentials("123456")
    assert credentials.api_key.get_secret_value() == OWN_API_KEY


async def pmsgate_process(*args: str, input: str) -> tuple[int, str, str]:
    """Run `pmsgate <args>` as a real process with ``input`` piped to its standard input.

    In a process, ``sys.stdin`` is not the strict UTF-8 stream click expects (it uses
    ``surrogateescape``), so click wraps it anew on each ``get_text_stream`` call —
    which the in-process runner does not reproduce.
    """
    done = await anyio.run_process(
        [sys.executable, "-c", "from pmsgate.cli import app; app()", *args],
        input=input.encode(),
        check=False,
        env={**os.environ, "LC_ALL": "C.UTF-8", "COLUMNS": "200"},
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_a_piped_password_and_api_key_are_the_first_and_second_lines_of_stdin(
    cli_env: str, clock: ManualClock
) -> None:
    code, out, err = await pmsgate_process(
        *OWN_ADD, *BOTH_STDIN, "--json", input=f"{PASSWORD}\n{OWN_API_KEY}\n"
    )

    assert code == 0, err
    assert json.loads(out)["facility"]["kind"] == "own"
    assert PASSWORD not in out + err and OWN_API_KEY not in out + err
    async with facility_service(cli_env, clock) as service:
        credentials = await service.credentials("123456")
    assert credentials.password.get_secret_value() == PASSWORD
    assert credentials.api_key.get_secret_value() == OWN_API_KEY


async def test_a_piped_api_key_alone_is_the_first_line_of_stdin(
    cli_env: str, clock: ManualClock
) -> None:
    # The password comes from its (hidden) prompt, answered first by the runner's input.
    result = await pmsgate(
        *OWN_ADD, "--api-key-stdin", "--json", input=f"{PASSWORD}\n{OWN_API_KEY}\n"
    )

    assert one_json(result)["facility"]["kind"] == "own"
    assert PASSWORD not in result.stdout + result.stderr
    assert OWN_API_KEY not in result.stdout + result.stderr
    async with facility_service(cli_env, clock) as service:
        credentials = await service.credentials("123456")
    assert credentials.api_key.get_secret_value() == OWN_API_KEY


async def test_a_missing_api_key_line_is_missing_api_key_with_the_stdin_rule(
    cli_env: str,
) -> None:
    result = await pmsgate(*OWN_ADD, *BOTH_STDIN, "--json", input=f"{PASSWORD}\n")

    assert_failed_with(result, "missing_api_key")
    assert "second" in result.stderr and PASSWORD not in result.stderr


async def test_add_own_accepts_the_api_key_as_a_flag(cli_env: str) -> None:
    result = await pmsgate(
        *OWN_ADD, "--password-stdin", "--api-key", OWN_API_KEY, "--json", input=f"{PASSWORD}\n"
    )
    assert one_json(result)["facility"]["kind"] == "own"


async def test_the_password_cannot_be_given_as_a_flag(cli_env: str) -> None:
    result = await pmsgate(*ADD, "--password", PASSWORD, "--json")
    assert result.exit_code == 2
    assert "No such option" in result.stderr
    assert await row_counts(cli_env) == (0, 0)


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        (["--username", "owner@example.com"], "username_is_email"),
        (["--hotel-id", "12ab"], "invalid_hotel_id"),
        (["--kind", "reseller"], "invalid_kind"),
        (["--per-minute", "0"], "invalid_limits"),
        (["--per-minute", "500"], "invalid_limits"),
        (["--api-key", OWN_API_KEY], "api_key_not_allowed_for_partner"),
    ],
)
async def test_bad_input_prints_its_code_on_stderr_exits_2_and_writes_nothing(
    cli_env: str, changes: list[str], code: str
) -> None:
    result = await pmsgate(*ADD, *changes, "--password-stdin", "--json", input=f"{PASSWORD}\n")
    assert_failed_with(result, code)
    assert PASSWORD not in result.stderr
    assert await row_counts(cli_env) == (0, 0)


async def test_an_empty_password_line_is_missing_password(cli_env: str) -> None:
    result = await pmsgate(*ADD, "--password-stdin", input="\n")
    assert_failed_with(result, "missing_password")


async def test_adding_the_same_hotel_id_twice_is_facility_exists(cli_env: str) -> None:
    one_json(await pmsgate(*ADD, "--password-stdin", "--json", input=f"{PASSWORD}\n"))
    again = await pmsgate(*ADD, "--password-stdin", "--json", input=f"{PASSWORD}\n")
    assert_failed_with(again, "facility_exists")
    assert await row_counts(cli_env) == (1, 1)


# --- list, show, limits, keys ---------------------------------------------------------------


async def test_list_and_show_print_the_facility_and_key_prefixes_but_no_secret(
    cli_env: str,
) -> None:
    added = one_json(await pmsgate(*ADD, "--password-stdin", "--json", input=f"{PASSWORD}\n"))
    raw_key = added["gateway_key"]

    listed = one_json(await pmsgate("facilities", "list", "--json"))
    shown = one_json(await pmsgate("facilities", "show", "123456", "--json"))
    table = await pmsgate("facilities", "list")
    details = await pmsgate("facilities", "show", "123456")

    assert listed == {"facilities": [added["facility"]]}
    assert shown["facility"] == added["facility"]
    assert [k["label"] for k in shown["keys"]] == ["initial"]
    assert raw_key.startswith(shown["keys"][0]["prefix"])
    assert "123456" in table.stdout
    assert shown["keys"][0]["prefix"] in details.stdout
    for result in (table, details):
        assert result.exit_code == 0
    everything = "".join(r.stdout + r.stderr for r in (table, details)) + json.dumps(
        [listed, shown]
    )
    assert raw_key not in everything
    assert PASSWORD not in everything


async def test_show_of_an_unknown_facility_is_facility_not_found(cli_env: str) -> None:
    assert_failed_with(await pmsgate("facilities", "show", "999", "--json"), "facility_not_found")


async def test_set_limits_changes_only_the_windows_given(cli_env: str) -> None:
    one_json(await pmsgate(*ADD, "--password-stdin", "--json", input=f"{PASSWORD}\n"))
    changed = one_json(
        await pmsgate("facilities", "set-limits", "123456", "--per-minute", "20", "--json")
    )
    assert changed["facility"]["limits"] == {"per_minute": 20, "per_hour": 300, "per_day": 5000}
    refused = await pmsgate("facilities", "set-limits", "123456", "--per-day", "100")
    assert_failed_with(refused, "invalid_limits")


async def test_mint_key_prints_a_new_key_once_and_revoke_key_stops_it(
    cli_env: str, clock: ManualClock
) -> None:
    one_json(await pmsgate(*ADD, "--password-stdin", "--json", input=f"{PASSWORD}\n"))
    minted = one_json(
        await pmsgate("facilities", "mint-key", "123456", "--label", "assistant", "--json")
    )
    assert set(minted) == {"key", "gateway_key"}
    assert minted["key"]["label"] == "assistant"
    async with facility_service(cli_env, clock) as service:
        assert (await service.authenticate(minted["gateway_key"])).hotel_id == "123456"

    revoked = one_json(
        await pmsgate("facilities", "revoke-key", "123456", str(minted["key"]["id"]), "--json")
    )
    assert revoked["key"]["revoked_at"] is not None
    assert minted["gateway_key"] not in json.dumps(revoked)
    async with facility_service(cli_env, clock) as service:
        with pytest.raises(PmsgateError) as caught:
            await service.authenticate(minted["gateway_key"])
    assert caught.value.code == "invalid_gateway_key"
    missing = await pmsgate("facilities", "revoke-key", "123456", "999")
    assert_failed_with(missing, "gateway_key_not_found")


async def test_keys_get_scopes_an_expiry_wider_scopes_and_a_rotation(
    cli_env: str, clock: ManualClock
) -> None:
    """docs/gateway.md, Scopes: the CLI shape of scoped keys."""
    added = one_json(await pmsgate(*ADD, "--password-stdin", "--json", input=f"{PASSWORD}\n"))
    pay = "operations:write:reservations/add-payment"
    minted = one_json(
        await pmsgate(
            "facilities", "mint-key", "123456", "--scope", pay, "--expires-in", "30d", "--json"
        )
    )
    assert minted["key"]["scopes"] == [pay]
    assert minted["key"]["expires_at"] is not None
    assert_failed_with(
        await pmsgate("facilities", "mint-key", "123456", "--scope", "payments"), "invalid_scope"
    )
    assert_failed_with(
        await pmsgate("facilities", "mint-key", "123456", "--expires-in", "soon"),
        "invalid_duration",
    )
    shown = one_json(await pmsgate("facilities", "show", "123456", "--json"))
    first = shown["keys"][0]
    assert first["scopes"] == ["tools:read"]  # the default, also for the first key
    granted = one_json(
        await pmsgate("facilities", "grant-scopes", "123456", str(first["id"]), "--all-scopes",
                      "--json")
    )  # fmt: skip
    assert granted["key"]["scopes"] == list(all_scopes())
    async with facility_service(cli_env, clock) as service:
        view = await service.authenticate(added["gateway_key"], pay)
        assert view.hotel_id == "123456"

    ambiguous = await pmsgate("facilities", "rotate-key", "123456", "--grace", "1d")
    assert_failed_with(ambiguous, "gateway_key_ambiguous")
    rotated = one_json(
        await pmsgate("facilities", "rotate-key", "123456", str(first["id"]), "--grace", "1d",
                      "--json")
    )  # fmt: skip
    assert set(rotated) == {"old_key", "key", "gateway_key"}
    assert rotated["key"]["scopes"] == list(all_scopes())
    assert rotated["old_key"]["expires_at"] is not None


# --- reconnect ------------------------------------------------------------------------------


async def test_reconnect_that_cannot_reach_the_booking_system_changes_nothing(
    cli_env: str, clock: ManualClock
) -> None:
    one_json(await pmsgate(*ADD, "--password-stdin", "--json", input=f"{PASSWORD}\n"))
    result = await pmsgate(
        "facilities", "reconnect", "123456", "--password-stdin", "--json", input="new-pw-1\n"
    )
    assert_failed_with(result, "pms_unavailable")
    assert "new-pw-1" not in result.stderr
    async with facility_service(cli_env, clock) as service:
        credentials = await service.credentials("123456")
    assert credentials.password.get_secret_value() == PASSWORD


async def test_reconnect_validates_the_new_credentials_before_calling_out(cli_env: str) -> None:
    one_json(await pmsgate(*ADD, "--password-stdin", "--json", input=f"{PASSWORD}\n"))
    result = await pmsgate(
        "facilities",
        "reconnect",
        "123456",
        "--username",
        "owner@example.com",
        "--password-stdin",
        input="new-pw-1\n",
    )
    assert_failed_with(result, "username_is_email")


# --- configuration and secrets --------------------------------------------------------------


async def test_without_secret_keys_the_cli_says_how_to_make_one(
    cli_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PMSGATE_SECRET_KEYS")
    result = await pmsgate(*ADD, "--password-stdin", "--json", input=f"{PASSWORD}\n")
    assert_failed_with(result, "missing_secret_keys")
    assert "pmsgate secrets generate-key" in result.stderr


async def test_an_unreachable_database_is_a_clear_error_that_does_not_leak_its_url(
    cli_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PMSGATE_DATABASE_URL", "postgresql+asyncpg://u:db-pw-9@127.0.0.1:9/x")
    result = await pmsgate("facilities", "list", "--json")
    assert_failed_with(result, "database_unavailable")
    assert "db-pw-9" not in result.stderr


async def test_generate_key_prints_one_usable_vault_entry(cli_env: str) -> None:
    plain = await pmsgate("secrets", "generate-key", "--key-id", "k7")
    as_json = one_json(await pmsgate("secrets", "generate-key", "--json"))
    assert plain.exit_code == 0
    entry = plain.stdout.strip()
    assert entry.startswith("k7:")
    vault = Vault(f"{entry},{as_json['key_spec']}")
    assert vault.decrypt(vault.encrypt("x", context="c"), context="c") == "x"
    assert "PMSGATE_SECRET_KEYS" in plain.stderr
    bad_id = await pmsgate("secrets", "generate-key", "--key-id", "k-7")
    assert_failed_with(bad_id, "invalid_key_id")


async def test_rotate_re_encrypts_everything_under_the_new_first_key(
    cli_env: str, monkeypatch: pytest.MonkeyPatch, clock: ManualClock
) -> None:
    one_json(await pmsgate(*OWN_ADD, *BOTH_STDIN, "--json", input=f"{PASSWORD}\n{OWN_API_KEY}\n"))
    monkeypatch.setenv("PMSGATE_SECRET_KEYS", f"{KEY_2},{KEY_1}")
    assert one_json(await pmsgate("secrets", "rotate", "--json")) == {"rotated": 2}
    assert one_json(await pmsgate("secrets", "rotate", "--json")) == {"rotated": 0}
    async with facility_service(cli_env, clock, keys=KEY_2) as service:
        credentials = await service.credentials("123456")
    assert credentials.password == SecretStr(PASSWORD)
    assert credentials.api_key.get_secret_value() == OWN_API_KEY


async def test_a_fresh_generated_key_can_be_used_right_away(
    cli_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PMSGATE_SECRET_KEYS", generate_key_spec())
    one_json(await pmsgate(*ADD, "--password-stdin", "--json", input=f"{PASSWORD}\n"))
