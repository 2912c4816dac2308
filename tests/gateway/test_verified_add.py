"""Credentials proven before `connected` (issue 14 item 2) and their audit events.

Everything runs on a real container against the booking-system emulator: the admin API
through the app, `pmsgate facilities add` through the command line, the reconnect
through its one path. A wrong password stores nothing; `--no-verify` / `"verify": false`
stores the facility `unverified` until its first upstream answer settles it; the
verification takes a permit of the facility's budget; every action leaves an audit event
and no event holds a secret.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import pytest
import structlog
from pydantic import SecretStr
from typer.testing import CliRunner, Result

from pmsgate.cli import app as cli_app
from pmsgate.cli import facilities as gateway_cli
from pmsgate.cli.support import Upstreams
from pmsgate.clock import ManualClock
from pmsgate.config import get_settings
from pmsgate.customers.reconnect import reconnect_facility
from pmsgate.errors import PmsgateError
from pmsgate.gateway.facilities import Limits
from pmsgate.gateway.limiter import Priority
from pmsgate.sandbox.kross.app import create_kross_app
from pmsgate.sandbox.kross.seed import SANDBOX_PARTNER_API_KEY
from pmsgate.sandbox.kross.store import KrossStore
from pmsgate.storage.audit import AuditEventView, AuditFilter
from tests.support.facilities import ServedGateway, emulator_settings, served_gateway

pytestmark = pytest.mark.anyio

ADMIN_TOKEN = "admin-token-for-verify-tests-0123"
AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
WRONG_PASSWORD = "not-the-password-9z"
BASE_URL = "http://gw.test"


@dataclass
class Box(ServedGateway):
    def body(self, **changes: Any) -> dict[str, Any]:
        """The admin API's registration of the emulator's first facility."""
        body: dict[str, Any] = {
            "hotel_id": self.hotel_id,
            "username": self.record["username"],
            "password": self.record["password"],
            "kind": self.record["kind"],
            "integration_id": f"int-{self.hotel_id}",
            "name": "Verified",
        }
        if self.record["kind"] == "own":
            body["api_key"] = self.record["api_key"]
        body.update(changes)
        return body

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app), base_url=BASE_URL)

    def token_requests(self) -> int:
        return self.store.stats.tokens_issued[self.hotel_id]

    def upstream_requests(self) -> int:
        return self.store.stats.requests_by_hotel[self.hotel_id]

    async def events(self, prefix: str | None = None) -> list[AuditEventView]:
        page = await self.container.audit.page(AuditFilter(action_prefix=prefix), limit=500)
        return list(reversed(page.events))  # oldest first

    async def stored(self) -> list[str]:
        return [f.hotel_id for f in await self.container.gateway.facilities.list()]


@pytest.fixture
async def box(
    database_url: str, kross_http: httpx.AsyncClient, kross_store: KrossStore, clock: ManualClock
) -> AsyncIterator[Box]:
    settings = emulator_settings(database_url, kross_http, admin_token=SecretStr(ADMIN_TOKEN))
    async with served_gateway(
        settings, kross_http, kross_store, clock, register=False, view=Box
    ) as box:
        yield box


async def _secret_free(box: Box, *secrets: str) -> None:
    """No audit event holds any of ``secrets`` (nor the emulator's password or a token)."""
    text = json.dumps([event.as_json() for event in await box.events()])
    for secret in (*secrets, str(box.record["password"]), WRONG_PASSWORD):
        assert secret not in text
    assert "eyJ" not in text  # no JWT-looking token


# --- the admin API ---------------------------------------------------------------------------


async def test_a_wrong_password_is_422_and_stores_nothing(box: Box) -> None:
    async with box.client() as client:
        answer = await client.post(
            "/admin/facilities", json=box.body(password=WRONG_PASSWORD), headers=AUTH
        )
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "pms_auth_failed"
    assert "refused these credentials" in error["message"]
    assert "nothing was stored" in error["message"]
    assert error["hint"]
    assert await box.stored() == []
    assert box.token_requests() == 0  # refused: no token was issued
    [event] = await box.events("credentials.")
    assert (event.action, event.outcome, event.actor_kind) == (
        "credentials.stored",
        "refused",
        "admin",
    )
    assert event.details["stored"] is False and event.details["error"] == "pms_auth_failed"
    await _secret_free(box)


async def test_right_credentials_are_tried_once_and_their_token_is_kept(box: Box) -> None:
    async with box.client() as client:
        answer = await client.post("/admin/facilities", json=box.body(), headers=AUTH)
        assert answer.status_code == 201, answer.text
        assert answer.json()["facility"]["status"] == "connected"
        raw_key = answer.json()["gateway_key"]
        assert box.token_requests() == 1
        called = await client.post(
            "/v1/tools/get-in-house-guests",
            json={},
            headers={"Authorization": f"Bearer {raw_key}"},
        )
    assert called.status_code == 200, called.text
    assert box.token_requests() == 1  # the verification's token served the call
    actions = [(e.action, e.outcome) for e in await box.events()]
    assert ("credentials.stored", "success") in actions
    assert ("key.minted", "success") in actions
    stored = next(e for e in await box.events("credentials.stored"))
    assert stored.details["verified"] is True and stored.facility_id is not None
    await _secret_free(box, raw_key)


async def test_verify_false_is_unverified_until_the_first_call_connects_it(box: Box) -> None:
    async with box.client() as client:
        answer = await client.post("/admin/facilities", json=box.body(verify=False), headers=AUTH)
        assert answer.status_code == 201, answer.text
        assert answer.json()["facility"]["status"] == "unverified"
        assert box.upstream_requests() == 0  # nothing was tried
        raw_key = answer.json()["gateway_key"]
        called = await client.post(
            "/v1/tools/get-in-house-guests",
            json={},
            headers={"Authorization": f"Bearer {raw_key}"},
        )
    assert called.status_code == 200, called.text
    assert (await box.container.gateway.facilities.get(box.hotel_id)).status == "connected"
    [changed] = await box.events("facility.status_changed")
    assert changed.details["from"] == "unverified" and changed.details["to"] == "connected"
    assert changed.details["cause"] == "verified on first use"
    await _secret_free(box, raw_key)


async def test_an_unverified_facility_refused_on_first_use_goes_to_error(box: Box) -> None:
    async with box.client() as client:
        answer = await client.post(
            "/admin/facilities",
            json=box.body(password=WRONG_PASSWORD, verify=False),
            headers=AUTH,
        )
        assert answer.json()["facility"]["status"] == "unverified"
        called = await client.post(
            "/v1/tools/get-in-house-guests",
            json={},
            headers={"Authorization": f"Bearer {answer.json()['gateway_key']}"},
        )
    assert called.json()["error"]["code"] == "pms_auth_failed"
    facility = await box.container.gateway.facilities.get(box.hotel_id)
    assert facility.status == "error"
    [changed] = await box.events("facility.status_changed")
    assert (changed.details["from"], changed.details["to"]) == ("unverified", "error")
    assert changed.details["cause"] == "token refused by the booking system"
    assert changed.outcome == "failure"
    await _secret_free(box)


async def test_the_verification_takes_a_permit_and_a_spent_budget_stores_nothing(
    box: Box,
) -> None:
    limits = Limits(per_minute=1, per_hour=10, per_day=100)
    # The facility's minute is spent before it is registered (another replica, a retry…).
    await box.container.gateway.limiter.acquire(
        box.hotel_id, limits, Priority.INTERACTIVE, wait_s=0.0
    )
    async with box.client() as client:
        answer = await client.post(
            "/admin/facilities", json=box.body(limits=limits.model_dump()), headers=AUTH
        )
    assert answer.status_code == 429, answer.text
    error = answer.json()["error"]
    assert error["code"] == "upstream_budget_exhausted"
    assert "nothing was stored" in error["message"]
    assert "--no-verify" in error["hint"]
    assert await box.stored() == []
    assert box.upstream_requests() == 0
    [event] = await box.events("credentials.")
    assert event.outcome == "failure" and event.details["error"] == "upstream_budget_exhausted"


async def test_a_successful_verification_spends_one_permit(box: Box) -> None:
    limits = Limits(per_minute=1, per_hour=10, per_day=100)
    view, _ = await box.container.gateway.gateway.add_facility(
        _new(box, limits=limits), verify=True
    )
    assert view.status == "connected"
    with pytest.raises(PmsgateError) as refused:
        await box.container.gateway.limiter.acquire(
            box.hotel_id, limits, Priority.INTERACTIVE, wait_s=0.0
        )
    assert refused.value.code == "upstream_budget_exhausted"


def _new(box: Box, **changes: Any) -> Any:
    from pmsgate.gateway.facilities import NewFacility

    body = box.body(**changes)
    return NewFacility(**body)


async def test_key_events_name_the_admin_api_as_actor(box: Box) -> None:
    async with box.client() as client:
        created = await client.post("/admin/facilities", json=box.body(), headers=AUTH)
        base = f"/admin/facilities/{box.hotel_id}/keys"
        minted = await client.post(base, json={"label": "second"}, headers=AUTH)
        key_id = minted.json()["key"]["id"]
        scoped = await client.put(
            f"{base}/{key_id}/scopes", json={"scopes": ["operations:read"]}, headers=AUTH
        )
        rotated = await client.post(f"{base}/{key_id}/rotate", json={}, headers=AUTH)
        revoked = await client.delete(f"{base}/{rotated.json()['key']['id']}", headers=AUTH)
    for answer in (created, minted, scoped, rotated, revoked):
        assert answer.is_success, answer.text
    keys = [(e.action, e.actor_kind, e.actor) for e in await box.events("key.")]
    assert [action for action, _, _ in keys] == [
        "key.minted",
        "key.minted",
        "key.scopes_changed",
        "key.rotated",
        "key.revoked",
    ]
    assert {(kind, actor) for _, kind, actor in keys} == {("admin", "admin-api")}
    await _secret_free(
        box,
        created.json()["gateway_key"],
        minted.json()["gateway_key"],
        rotated.json()["gateway_key"],
    )


# --- the reconnect ---------------------------------------------------------------------------


async def test_a_refused_reconnect_keeps_the_old_credentials_and_is_recorded(box: Box) -> None:
    services = box.container
    await services.gateway.gateway.add_facility(_new(box), verify=True)
    await services.gateway.facilities.mark_error(box.hotel_id, "pms_auth_failed")
    with pytest.raises(PmsgateError) as refused:
        await reconnect_facility(
            services.customers,
            services.gateway,
            box.hotel_id,
            username=str(box.record["username"]),
            password=SecretStr(WRONG_PASSWORD),
            api_key=None,
        )
    assert (refused.value.status, refused.value.code) == (422, "pms_auth_failed")
    assert (await services.gateway.facilities.get(box.hotel_id)).status == "error"
    [event] = await box.events("credentials.changed")
    assert event.outcome == "refused" and event.details["error"] == "pms_auth_failed"

    # The right password again: the same credentials proven, back to connected.
    await reconnect_facility(
        services.customers,
        services.gateway,
        box.hotel_id,
        username=str(box.record["username"]),
        password=SecretStr(str(box.record["password"])),
        api_key=None,
    )
    assert (await services.gateway.facilities.get(box.hotel_id)).status == "connected"
    [proven] = await box.events("credentials.reconnected")
    assert proven.outcome == "success"
    causes = [e.details["cause"] for e in await box.events("facility.status_changed")]
    assert causes == ["token refused by the booking system", "reconnected"]
    await _secret_free(box)


# --- the command line ------------------------------------------------------------------------


@pytest.fixture
def cli_env(
    box: Box, database_url: str, monkeypatch: pytest.MonkeyPatch, clock: ManualClock
) -> Iterator[None]:
    monkeypatch.setenv("PMSGATE_DATABASE_URL", database_url)
    monkeypatch.setenv(
        "PMSGATE_SECRET_KEYS",
        box.container.settings.secret_keys.get_secret_value(),  # type: ignore[union-attr]
    )
    monkeypatch.setenv("PMSGATE_PARTNER_API_KEY", SANDBOX_PARTNER_API_KEY)
    monkeypatch.setenv("PMSGATE_KROSS_BASE_URL", "http://kross.test")
    monkeypatch.setenv("PMSGATE_LIMITER_WAIT_S", "0")
    kross_app = create_kross_app(box.store)

    def factory() -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=kross_app))

    monkeypatch.setattr(gateway_cli, "upstreams", Upstreams(http_factory=factory, clock=clock))
    get_settings.cache_clear()
    saved_logging = structlog.get_config()
    yield
    structlog.configure(**saved_logging)
    get_settings.cache_clear()


async def _pmsgate(*args: str, input: str) -> Result:
    get_settings.cache_clear()

    def invoke() -> Result:
        return CliRunner().invoke(cli_app, list(args), input=input)

    return await anyio.to_thread.run_sync(invoke)


def _add_args(box: Box) -> list[str]:
    args = [
        "facilities",
        "add",
        "--hotel-id",
        box.hotel_id,
        "--username",
        str(box.record["username"]),
        "--kind",
        str(box.record["kind"]),
        "--integration-id",
        f"int-{box.hotel_id}",
        "--password-stdin",
        "--json",
    ]
    if box.record["kind"] == "own":
        args += ["--api-key", str(box.record["api_key"])]
    return args


async def test_cli_add_with_a_wrong_password_says_so_and_stores_nothing(
    box: Box, cli_env: None
) -> None:
    result = await _pmsgate(*_add_args(box), input=f"{WRONG_PASSWORD}\n")
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert "error pms_auth_failed:" in result.stderr
    assert "refused these credentials" in result.stderr
    assert "hint:" in result.stderr
    assert result.stdout == ""
    assert WRONG_PASSWORD not in result.stderr
    assert await box.stored() == []
    [event] = await box.events("credentials.")
    assert (event.outcome, event.actor_kind, event.actor) == (
        "refused",
        "cli",
        "pmsgate facilities add",
    )


async def test_cli_add_tries_the_credentials_or_stores_them_unverified(
    box: Box, cli_env: None
) -> None:
    password = f"{box.record['password']}\n"
    unverified = await _pmsgate(*_add_args(box), "--no-verify", input=password)
    assert unverified.exit_code == 0, unverified.stderr
    assert json.loads(unverified.stdout)["facility"]["status"] == "unverified"
    assert box.upstream_requests() == 0

    # The same facility again, tried this time: it exists, so no token is requested.
    again = await _pmsgate(*_add_args(box), input=password)
    assert again.exit_code == 2 and "error facility_exists:" in again.stderr
    assert box.upstream_requests() == 0

    other = box.store.facility_summaries()[1]
    box.record = other
    verified = await _pmsgate(*_add_args(box), input=f"{other['password']}\n")
    assert verified.exit_code == 0, verified.stderr
    assert json.loads(verified.stdout)["facility"]["status"] == "connected"
    assert box.token_requests() == 1
    await _secret_free(box, str(other["password"]))


async def test_the_admin_apis_reconnect_names_the_admin_api(box: Box) -> None:
    async with box.client() as client:
        created = await client.post("/admin/facilities", json=box.body(), headers=AUTH)
        assert created.status_code == 201, created.text
        refused = await client.post(
            f"/admin/facilities/{box.hotel_id}/reconnect",
            json={"username": box.record["username"], "password": WRONG_PASSWORD},
            headers=AUTH,
        )
    assert (refused.status_code, refused.json()["error"]["code"]) == (422, "pms_auth_failed")
    assert (await box.container.gateway.facilities.get(box.hotel_id)).status == "connected"
    [event] = await box.events("credentials.changed")
    assert (event.outcome, event.actor_kind, event.actor) == ("refused", "admin", "admin-api")
    await _secret_free(box, created.json()["gateway_key"])
