"""Facilities: validation, atomic writes, gateway keys, credentials, reconnect, key rotation."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
import structlog
from pydantic import SecretStr
from sqlalchemy import select

from pmsgate.clock import ManualClock
from pmsgate.errors import InvalidInput, PmsgateError
from pmsgate.gateway.facilities import Limits
from pmsgate.gateway.facility_service import FacilityService
from pmsgate.gateway.keys import KEY_PREFIX
from pmsgate.gateway.vault import Vault, VaultError, facility_context, generate_key_spec
from pmsgate.gateway.verification import Verifier
from pmsgate.integrations.kross.credentials import Credentials
from pmsgate.logs import configure_logging
from pmsgate.storage.db import open_database, session_factory
from pmsgate.storage.models import Facility, FacilityToken, GatewayKey

from .facility_support import (
    KEY_1,
    KEY_2,
    OWN_API_KEY,
    PARTNER_KEY,
    all_stored_text,
    emulator_verifier,
    facility_service,
    new_facility,
    new_facility_from_seed,
    new_own_facility,
    row_counts,
    seeded_facilities,
)

pytestmark = pytest.mark.anyio

KEY_3 = generate_key_spec("k3")


@pytest.fixture
async def service(database_url: str, clock: ManualClock) -> AsyncIterator[FacilityService]:
    async with facility_service(database_url, clock) as built:
        yield built


async def _error_code(call: Any) -> str:
    with pytest.raises(PmsgateError) as caught:
        await call
    return caught.value.code


async def _store_token(database_url: str, hotel_id: str, token: str, vault: Vault) -> None:
    """Put a token row as the token manager would (encrypted, bound to the facility)."""
    async with (
        open_database(database_url, migrate=False) as engine,
        session_factory(engine).begin() as session,
    ):
        facility = (
            await session.execute(select(Facility).where(Facility.hotel_id == hotel_id))
        ).scalar_one()
        now = ManualClock().now()
        session.add(
            FacilityToken(
                facility_id=facility.id,
                token_enc=vault.encrypt(token, context=facility_context(hotel_id, "token")),
                expires_at=now + timedelta(days=7),
                obtained_at=now,
            )
        )


async def _facility_row(database_url: str, hotel_id: str) -> Facility:
    async with (
        open_database(database_url, migrate=False) as engine,
        session_factory(engine)() as session,
    ):
        return (
            await session.execute(select(Facility).where(Facility.hotel_id == hotel_id))
        ).scalar_one()


async def _token_rows(database_url: str) -> list[FacilityToken]:
    async with (
        open_database(database_url, migrate=False) as engine,
        session_factory(engine)() as session,
    ):
        return list((await session.execute(select(FacilityToken))).scalars())


# --- registration ---------------------------------------------------------------------------


async def test_adding_a_facility_stores_it_connected_with_default_limits_and_returns_a_key(
    service: FacilityService, clock: ManualClock
) -> None:
    view, raw_key = await service.add(new_facility())
    assert view.hotel_id == "123456"
    assert view.kind == "partner"
    assert view.status == "connected"
    assert view.last_error is None
    assert view.limits == Limits(per_minute=10, per_hour=300, per_day=5000)
    assert view.created_at == clock.now()
    assert raw_key.startswith(KEY_PREFIX)
    assert await service.get("123456") == view
    assert [f.hotel_id for f in await service.list()] == ["123456"]


async def test_the_facility_view_holds_no_secret(service: FacilityService) -> None:
    view, _ = await service.add(new_own_facility("pw-abc-123"))
    dumped = view.model_dump_json()
    assert "pw-abc-123" not in dumped
    assert OWN_API_KEY not in dumped
    assert "password" not in dumped
    assert "api_key" not in dumped


async def test_fields_are_trimmed_and_a_hotel_id_may_arrive_as_a_number(
    service: FacilityService,
) -> None:
    view, _ = await service.add(
        new_facility(hotel_id=" 123456 ", username=" api12345 ", integration_id=" int-1 ")
    )
    assert (view.hotel_id, view.username, view.integration_id) == ("123456", "api12345", "int-1")
    assert new_facility(hotel_id=654321).hotel_id == "654321"


async def test_a_blank_api_key_counts_as_none_and_the_kind_is_case_insensitive(
    service: FacilityService,
) -> None:
    view, _ = await service.add(new_facility(kind=" Partner ", api_key=SecretStr("  ")))
    assert view.kind == "partner"
    with pytest.raises(InvalidInput) as caught:
        await service.add(new_facility(hotel_id="222", kind="own", api_key=SecretStr("")))
    assert caught.value.code == "api_key_required"


BAD_INPUT = [
    ({"hotel_id": "12ab"}, "invalid_hotel_id"),
    ({"hotel_id": ""}, "invalid_hotel_id"),
    ({"hotel_id": "1" * 40}, "invalid_hotel_id"),
    ({"username": "owner@example.com"}, "username_is_email"),
    ({"username": "admin"}, "invalid_username"),
    ({"username": "api" + "1" * 70}, "invalid_username"),
    ({"password": SecretStr("")}, "missing_password"),
    ({"password": SecretStr("   ")}, "missing_password"),
    ({"kind": "own", "api_key": SecretStr("not-hex")}, "invalid_api_key"),
    ({"kind": "own", "api_key": SecretStr(OWN_API_KEY[:-1])}, "invalid_api_key"),
    ({"kind": "own", "api_key": None}, "api_key_required"),
    ({"kind": "partner", "api_key": SecretStr(OWN_API_KEY)}, "api_key_not_allowed_for_partner"),
    ({"kind": "reseller"}, "invalid_kind"),
    ({"integration_id": "  "}, "invalid_integration_id"),
    ({"integration_id": "i" * 65}, "invalid_integration_id"),
    ({"name": "n" * 201}, "invalid_name"),
]


@pytest.mark.parametrize(("overrides", "code"), BAD_INPUT, ids=[c for _, c in BAD_INPUT])
async def test_bad_input_gets_its_own_code_and_writes_nothing(
    service: FacilityService, database_url: str, overrides: dict[str, Any], code: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        await service.add(new_facility(**overrides))
    assert caught.value.code == code
    assert caught.value.status == 422
    assert caught.value.hint
    assert await row_counts(database_url) == (0, 0)


async def test_an_e_mail_username_is_explained_with_the_api_user_format(
    service: FacilityService,
) -> None:
    with pytest.raises(InvalidInput) as caught:
        await service.add(new_facility(username="owner@example.com"))
    assert caught.value.code == "username_is_email"
    assert "apiNNNNN" in caught.value.hint
    assert "owner@example.com" not in caught.value.message


@pytest.mark.parametrize(
    "limits",
    [
        {"per_minute": 0},
        {"per_hour": -1},
        {"per_minute": 400, "per_hour": 300},
        {"per_hour": 6000, "per_day": 5000},
    ],
)
async def test_inconsistent_limits_are_refused_with_invalid_limits(limits: dict[str, int]) -> None:
    with pytest.raises(InvalidInput) as caught:
        Limits(**limits)
    assert caught.value.code == "invalid_limits"


async def test_a_duplicate_hotel_id_is_a_conflict_and_leaves_the_first_facility_untouched(
    service: FacilityService, database_url: str
) -> None:
    first, first_key = await service.add(new_facility())
    with pytest.raises(PmsgateError) as caught:
        await service.add(new_facility(username="api99999", name="Other"))
    assert (caught.value.code, caught.value.status) == ("facility_exists", 409)
    assert await row_counts(database_url) == (1, 1)
    assert await service.get("123456") == first
    assert (await service.authenticate(first_key)).hotel_id == "123456"


async def test_concurrent_adds_of_one_hotel_id_register_it_exactly_once(
    service: FacilityService, database_url: str
) -> None:
    outcomes = await asyncio.gather(
        *(service.add(new_facility()) for _ in range(3)), return_exceptions=True
    )
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(failures) == 2
    assert all(isinstance(f, PmsgateError) and f.code == "facility_exists" for f in failures)
    assert await row_counts(database_url) == (1, 1)


# --- gateway keys ---------------------------------------------------------------------------


async def test_a_gateway_key_is_stored_only_as_its_sha256_with_a_short_prefix(
    service: FacilityService, database_url: str
) -> None:
    _, raw_key = await service.add(new_facility())
    async with (
        open_database(database_url, migrate=False) as engine,
        session_factory(engine)() as session,
    ):
        stored = (await session.execute(select(GatewayKey))).scalar_one()
    assert stored.key_hash == hashlib.sha256(raw_key.encode()).hexdigest()
    assert raw_key.startswith(stored.prefix)
    assert len(stored.prefix) < len(raw_key) // 2
    assert raw_key not in await all_stored_text(database_url)


async def test_a_key_of_facility_a_authenticates_only_as_a(service: FacilityService) -> None:
    _, key_a = await service.add(new_facility(hotel_id="111111"))
    _, key_b = await service.add(new_facility(hotel_id="222222"))
    _, key_a2 = await service.mint_key("111111", "second")
    assert (await service.authenticate(key_a)).hotel_id == "111111"
    assert (await service.authenticate(key_a2)).hotel_id == "111111"
    assert (await service.authenticate(key_b)).hotel_id == "222222"


@pytest.mark.parametrize(
    "presented",
    ["", "pgw_", "Bearer pgw_x", "pgw_" + "A" * 43, "pgw_" + "A" * 42 + "!", "x" * 5000],
    ids=["empty", "prefix only", "with scheme", "unknown", "bad alphabet", "huge"],
)
async def test_unknown_or_malformed_keys_are_refused_with_invalid_gateway_key(
    service: FacilityService, presented: str
) -> None:
    await service.add(new_facility())
    with pytest.raises(PmsgateError) as caught:
        await service.authenticate(presented)
    assert (caught.value.code, caught.value.status) == ("invalid_gateway_key", 401)


async def test_a_revoked_key_is_refused_and_the_facilitys_other_keys_keep_working(
    service: FacilityService, clock: ManualClock
) -> None:
    _, first = await service.add(new_facility())
    second_view, second = await service.mint_key("123456", "assistant")
    keys = await service.list_keys("123456")
    assert [k.label for k in keys] == ["initial", "assistant"]
    clock.advance(60)
    revoked = await service.revoke_key("123456", keys[0].id)
    assert revoked.revoked_at == clock.now()
    assert await _error_code(service.authenticate(first)) == "invalid_gateway_key"
    assert (await service.authenticate(second)).hotel_id == "123456"
    # Revoking again keeps the first revocation time.
    clock.advance(60)
    assert (await service.revoke_key("123456", keys[0].id)).revoked_at == revoked.revoked_at
    assert second_view.revoked_at is None


async def test_a_key_cannot_be_revoked_through_another_facility(service: FacilityService) -> None:
    _, key_a = await service.add(new_facility(hotel_id="111111"))
    await service.add(new_facility(hotel_id="222222"))
    key_a_id = (await service.list_keys("111111"))[0].id
    assert await _error_code(service.revoke_key("222222", key_a_id)) == "gateway_key_not_found"
    assert (await service.authenticate(key_a)).hotel_id == "111111"


async def test_a_too_long_key_label_is_refused(service: FacilityService) -> None:
    await service.add(new_facility())
    assert await _error_code(service.mint_key("123456", "l" * 101)) == "invalid_label"


@pytest.mark.parametrize(
    "action",
    [
        "get",
        "set_limits",
        "mint_key",
        "list_keys",
        "revoke_key",
        "credentials",
        "mark_error",
        "mark_connected",
        "record_auth_attempt",
    ],
)
async def test_an_unknown_facility_is_facility_not_found(
    service: FacilityService, action: str
) -> None:
    calls = {
        "get": lambda: service.get("999"),
        "set_limits": lambda: service.set_limits("999", Limits()),
        "mint_key": lambda: service.mint_key("999"),
        "list_keys": lambda: service.list_keys("999"),
        "revoke_key": lambda: service.revoke_key("999", 1),
        "credentials": lambda: service.credentials("999"),
        "mark_error": lambda: service.mark_error("999", "x"),
        "mark_connected": lambda: service.mark_connected("999"),
        "record_auth_attempt": lambda: service.record_auth_attempt("999"),
    }
    with pytest.raises(PmsgateError) as caught:
        await calls[action]()
    assert (caught.value.code, caught.value.status) == ("facility_not_found", 404)


# --- limits, status -------------------------------------------------------------------------


async def test_limits_are_set_per_facility(service: FacilityService) -> None:
    await service.add(new_facility(hotel_id="111111"))
    await service.add(new_facility(hotel_id="222222", limits=Limits(per_minute=5)))
    changed = await service.set_limits("111111", Limits(per_minute=20, per_hour=600, per_day=9000))
    assert changed.limits == Limits(per_minute=20, per_hour=600, per_day=9000)
    assert (await service.get("111111")).limits.per_day == 9000
    assert (await service.get("222222")).limits == Limits(per_minute=5)


async def test_status_changes_record_the_reason_and_the_attempt_time(
    service: FacilityService, clock: ManualClock
) -> None:
    await service.add(new_facility())
    await service.mark_error("123456", "pms_auth_failed: the booking system refused the password")
    failed = await service.get("123456")
    assert failed.status == "error"
    assert failed.last_error == "pms_auth_failed: the booking system refused the password"
    clock.advance(300)
    await service.record_auth_attempt("123456")
    assert (await service.get("123456")).last_auth_attempt_at == clock.now()
    await service.mark_connected("123456")
    recovered = await service.get("123456")
    assert (recovered.status, recovered.last_error) == ("connected", None)


# --- credentials ----------------------------------------------------------------------------


async def test_credentials_decrypt_with_the_own_key_or_the_shared_partner_key(
    service: FacilityService,
) -> None:
    await service.add(new_facility(hotel_id="111111", password=SecretStr("partner-pw")))
    await service.add(new_own_facility("own-pw", hotel_id="222222"))
    partner = await service.credentials("111111")
    own = await service.credentials("222222")
    assert partner.password.get_secret_value() == "partner-pw"
    assert partner.api_key == PARTNER_KEY
    assert own.password.get_secret_value() == "own-pw"
    assert own.api_key.get_secret_value() == OWN_API_KEY
    assert "own-pw" not in repr(own) + str(own)


@pytest.mark.parametrize(
    ("partner_key", "code"),
    [(None, "partner_api_key_missing"), (SecretStr("short"), "invalid_partner_api_key")],
)
async def test_partner_credentials_need_a_well_formed_shared_key_in_configuration(
    database_url: str, clock: ManualClock, partner_key: SecretStr | None, code: str
) -> None:
    async with facility_service(database_url, clock, partner_api_key=partner_key) as service:
        await service.add(new_facility())
        with pytest.raises(PmsgateError) as caught:
            await service.credentials("123456")
    assert (caught.value.code, caught.value.status) == (code, 500)
    if partner_key is not None:
        assert "short" not in caught.value.message


async def test_no_plaintext_secret_is_in_any_database_row(
    service: FacilityService, database_url: str
) -> None:
    _, partner_key = await service.add(
        new_facility(hotel_id="111111", password=SecretStr("partner-plain-pw"))
    )
    _, own_key = await service.add(new_own_facility("own-plain-pw", hotel_id="222222"))
    _, minted = await service.mint_key("222222", "extra")
    await _store_token(database_url, "222222", "plain-bearer-token-xyz", Vault(KEY_1))
    stored = await all_stored_text(database_url)
    for secret in (
        "partner-plain-pw",
        "own-plain-pw",
        OWN_API_KEY,
        OWN_API_KEY.lower(),
        partner_key,
        own_key,
        minted,
        "plain-bearer-token-xyz",
    ):
        assert secret not in stored


# --- reconnect, against the booking-system emulator -----------------------------------------


@pytest.fixture
async def seeds(kross_http: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    facilities = await seeded_facilities(kross_http)
    return {kind: next(f for f in facilities if f["kind"] == kind) for kind in ("own", "partner")}


async def registered_with_a_token(
    service: FacilityService, database_url: str, seed: dict[str, Any]
) -> str:
    """The emulator facility ``seed`` registered, with a token stored; its hotel_id."""
    await service.add(new_facility_from_seed(seed))
    await _store_token(database_url, seed["hotel_id"], "old-token", Vault(KEY_1))
    return str(seed["hotel_id"])


@pytest.fixture
def verifier(kross_http: httpx.AsyncClient, clock: ManualClock) -> Verifier:
    """Asks the booking-system emulator for a token with the credentials to verify."""
    return emulator_verifier(kross_http, clock)


async def test_reconnect_with_a_wrong_password_is_refused_and_changes_nothing(
    service: FacilityService,
    database_url: str,
    verifier: Verifier,
    seeds: dict[str, dict[str, Any]],
) -> None:
    seed = seeds["partner"]
    await registered_with_a_token(service, database_url, seed)
    await service.mark_error(seed["hotel_id"], "pms_auth_failed")
    before = await _facility_row(database_url, seed["hotel_id"])

    with pytest.raises(PmsgateError) as caught:
        await service.reconnect(
            seed["hotel_id"],
            username=seed["username"],
            password=SecretStr("definitely-wrong"),
            api_key=None,
            verify=verifier,
        )
    assert (caught.value.code, caught.value.status) == ("pms_auth_failed", 422)
    assert "definitely-wrong" not in str(caught.value)
    after = await _facility_row(database_url, seed["hotel_id"])
    assert (after.password_enc, after.username, after.status, after.updated_at) == (
        before.password_enc,
        before.username,
        "error",
        before.updated_at,
    )
    assert len(await _token_rows(database_url)) == 1


async def test_reconnect_with_the_new_password_returns_the_facility_to_connected(
    service: FacilityService,
    database_url: str,
    kross_http: httpx.AsyncClient,
    clock: ManualClock,
    verifier: Verifier,
    seeds: dict[str, dict[str, Any]],
) -> None:
    seed = seeds["own"]
    hotel_id = await registered_with_a_token(service, database_url, seed)
    # The customer changes the API password in the booking system: the stored one stops working.
    changed = await kross_http.post(
        f"/_sandbox/facilities/{hotel_id}/password", json={"password": "n3w-pa55word"}
    )
    changed.raise_for_status()
    await service.mark_error(hotel_id, "pms_auth_failed")
    clock.advance(60)

    view = await service.reconnect(
        hotel_id,
        username=seed["username"],
        password=SecretStr("n3w-pa55word"),
        api_key=None,
        verify=verifier,
    )
    assert (view.status, view.last_error, view.updated_at) == ("connected", None, clock.now())
    credentials = await service.credentials(hotel_id)
    assert credentials.password.get_secret_value() == "n3w-pa55word"
    assert credentials.api_key.get_secret_value() == seed["api_key"]
    # The old token belonged to the old credentials: the token manager must fetch a new one.
    assert await _token_rows(database_url) == []
    assert "n3w-pa55word" not in await all_stored_text(database_url)


class RecordingVerifier:
    """A verifier that accepts everything and remembers what it was asked."""

    def __init__(self) -> None:
        self.seen: list[Credentials] = []

    async def __call__(self, credentials: Credentials) -> None:
        self.seen.append(credentials)


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"username": "owner@example.com"}, "username_is_email"),
        ({"username": "admin"}, "invalid_username"),
        ({"password": SecretStr("")}, "missing_password"),
        ({"api_key": SecretStr(OWN_API_KEY)}, "api_key_not_allowed_for_partner"),
    ],
)
async def test_reconnect_validates_before_asking_the_booking_system(
    service: FacilityService, changes: dict[str, Any], code: str
) -> None:
    await service.add(new_facility())
    verifier = RecordingVerifier()
    arguments: dict[str, Any] = {
        "username": "api12345",
        "password": SecretStr("new"),
        "api_key": None,
        **changes,
    }
    with pytest.raises(InvalidInput) as caught:
        await service.reconnect("123456", verify=verifier, **arguments)
    assert caught.value.code == code
    assert verifier.seen == []


async def test_reconnect_of_an_own_facility_can_replace_or_keep_its_api_key(
    service: FacilityService,
) -> None:
    await service.add(new_facility(kind="own", api_key=SecretStr(OWN_API_KEY)))
    verifier = RecordingVerifier()
    await service.reconnect(
        "123456", username="api12345", password=SecretStr("pw2"), api_key=None, verify=verifier
    )
    assert verifier.seen[-1].api_key.get_secret_value() == OWN_API_KEY
    new_key = "f" * 32
    await service.reconnect(
        "123456",
        username="api54321",
        password=SecretStr("pw3"),
        api_key=SecretStr(new_key),
        verify=verifier,
    )
    stored = await service.credentials("123456")
    assert (stored.username, stored.api_key.get_secret_value()) == ("api54321", new_key)
    assert (await service.get("123456")).username == "api54321"


async def test_reconnect_that_cannot_reach_the_booking_system_changes_nothing(
    service: FacilityService, database_url: str, clock: ManualClock
) -> None:
    await service.add(new_facility())
    before = await _facility_row(database_url, "123456")

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async with httpx.AsyncClient(
        transport=httpx.MockTransport(refuse), base_url="http://kross.test"
    ) as unreachable:
        with pytest.raises(PmsgateError) as caught:
            await service.reconnect(
                "123456",
                username="api12345",
                password=SecretStr("new-pw"),
                api_key=None,
                verify=emulator_verifier(unreachable, clock),
            )
    assert caught.value.code == "pms_unavailable"
    assert caught.value.status == 503
    assert (await _facility_row(database_url, "123456")).password_enc == before.password_enc


# --- key rotation ---------------------------------------------------------------------------


async def test_rotation_re_encrypts_every_secret_under_the_new_first_key(
    database_url: str, clock: ManualClock
) -> None:
    async with facility_service(database_url, clock, keys=KEY_1) as old:
        await old.add(new_facility(hotel_id="111111", password=SecretStr("pw-one")))
        await old.add(new_own_facility("pw-two", hotel_id="222222"))
    await _store_token(database_url, "222222", "token-two", Vault(KEY_1))

    async with facility_service(database_url, clock, keys=f"{KEY_2},{KEY_1}") as both:
        # Before rotating, values under the old key still decrypt.
        assert (await both.credentials("111111")).password.get_secret_value() == "pw-one"
        assert await both.rotate_secrets() == 4  # two passwords, one api key, one token
        assert await both.rotate_secrets() == 0

    rows = [await _facility_row(database_url, h) for h in ("111111", "222222")]
    tokens = await _token_rows(database_url)
    ciphertexts = [r.password_enc for r in rows] + [rows[1].api_key_enc] + [tokens[0].token_enc]
    assert all(c is not None and c.startswith("k2:") for c in ciphertexts)
    async with facility_service(database_url, clock, keys=KEY_2) as new_only:
        own = await new_only.credentials("222222")
        assert own.password.get_secret_value() == "pw-two"
        assert own.api_key.get_secret_value() == OWN_API_KEY
    token = Vault(KEY_2).decrypt(tokens[0].token_enc, context=facility_context("222222", "token"))
    assert token == "token-two"


async def test_a_rotation_that_meets_an_unknown_key_changes_nothing(
    database_url: str, clock: ManualClock
) -> None:
    async with facility_service(database_url, clock, keys=KEY_1) as old:
        await old.add(new_facility(hotel_id="111111"))
        await old.add(new_facility(hotel_id="222222"))
    async with (
        open_database(database_url, migrate=False) as engine,
        session_factory(engine).begin() as session,
    ):
        row = (
            await session.execute(select(Facility).where(Facility.hotel_id == "222222"))
        ).scalar_one()
        # A value under a key that was dropped from the configuration too early.
        row.password_enc = Vault(KEY_2).encrypt("x", context=facility_context("222222", "password"))
    async with facility_service(database_url, clock, keys=f"{KEY_3},{KEY_1}") as rotating:
        with pytest.raises(VaultError):
            await rotating.rotate_secrets()
    assert (await _facility_row(database_url, "111111")).password_enc.startswith("k1:")


# --- logs -----------------------------------------------------------------------------------


@pytest.fixture
def restore_logging() -> Any:
    """Put the logging configuration back after a test that (re)configures it."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


async def test_no_secret_reaches_the_logs(
    service: FacilityService,
    restore_logging: None,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Configured here, not in a fixture: the captured stderr is replaced between test phases.
    configure_logging("DEBUG")
    _, raw = await service.add(new_own_facility("log-pw-1"))
    _, minted = await service.mint_key("123456")
    await service.reconnect(
        "123456",
        username="api12345",
        password=SecretStr("log-pw-2"),
        api_key=None,
        verify=RecordingVerifier(),
    )
    with pytest.raises(PmsgateError):
        await service.add(new_facility(kind="own", api_key=SecretStr("zz" + OWN_API_KEY[2:])))
    await service.mark_error("123456", "pms_auth_failed")
    captured = capsys.readouterr()
    logged = captured.out + captured.err + caplog.text
    assert "facility_added" in logged
    for secret in ("log-pw-1", "log-pw-2", OWN_API_KEY, raw, minted):
        assert secret not in logged
