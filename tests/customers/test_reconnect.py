"""The kross reconnect (connect_kross) and the facility/integration-row status link (spec §3)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import SecretStr

from pmsgate.customers.reconnect import KrossConnection, connect_kross
from pmsgate.errors import PmsgateError
from pmsgate.gateway.context import GatewayServices
from pmsgate.gateway.facilities import Limits
from pmsgate.storage.integrations import IntegrationView
from tests.customers.support import EnrolledSandbox, enrolled_sandbox

pytestmark = pytest.mark.anyio

NEW_PASSWORD = "a-brand-new-api-password-2217"
TOOL = "get-in-house-guests"


@dataclass
class Reconnectable:
    """An enrolled customer and the gateway's services on the same sandbox and database."""

    enrolled: EnrolledSandbox
    gateway: GatewayServices

    @property
    def hotel_id(self) -> str:
        return self.enrolled.hotel_id

    async def row(self) -> IntegrationView:
        ctx = await self.enrolled.context()
        assert ctx.kross is not None
        return ctx.kross

    async def call_tool(self) -> Any:
        facility = await self.gateway.facilities.get(self.hotel_id)
        return await self.gateway.tools.call(facility, TOOL, {})

    async def connect(self, password: str = NEW_PASSWORD, **options: Any) -> KrossConnection:
        return await connect_kross(
            self.enrolled.services,
            self.gateway,
            self.enrolled.student_id,
            username=options.pop("username", self.enrolled.facility["username"]),
            password=SecretStr(password),
            api_key=options.pop("api_key", None),
            **options,
        )


@asynccontextmanager
async def reconnectable(database_url: str, **options: Any) -> AsyncIterator[Reconnectable]:
    """The seeded partner customer with four apartments, and a gateway on its sandbox."""
    options.setdefault("seed", 7)
    options.setdefault("student_index", 1)
    async with enrolled_sandbox(database_url, **options) as enrolled:
        yield Reconnectable(enrolled, enrolled.container.gateway)


async def test_a_gateway_call_failing_authentication_puts_the_customers_row_in_error(
    database_url: str,
) -> None:
    async with reconnectable(database_url) as r:
        before = await r.row()
        r.enrolled.clock.advance(60)
        r.enrolled.sandbox.kross.change_password(r.hotel_id, NEW_PASSWORD)

        with pytest.raises(PmsgateError) as failed:
            await r.call_tool()

        assert failed.value.code == "pms_auth_failed"
        row = await r.row()
        facility = await r.gateway.facilities.get(r.hotel_id)
        assert (facility.status, row.status) == ("error", "error")
        assert row.last_error == facility.last_error and row.last_error
        assert row.status_changed_at > before.status_changed_at


async def test_the_row_follows_the_facility_back_to_connected_when_authentication_recovers(
    database_url: str,
) -> None:
    async with reconnectable(database_url) as r:
        original = r.enrolled.facility["password"]
        r.enrolled.sandbox.kross.change_password(r.hotel_id, NEW_PASSWORD)
        with pytest.raises(PmsgateError):
            await r.call_tool()
        # The customer changes the password back; the gateway tries again after its interval.
        r.enrolled.sandbox.kross.change_password(r.hotel_id, original)
        r.enrolled.clock.advance(r.gateway.settings.reauth_interval_s + 1)

        await r.call_tool()

        row = await r.row()
        assert (row.status, row.last_error) == ("connected", None)


async def test_repeated_failures_keep_the_time_the_row_went_to_error(database_url: str) -> None:
    async with reconnectable(database_url) as r:
        await r.gateway.facilities.mark_error(r.hotel_id, "first reason")
        first = await r.row()
        r.enrolled.clock.advance(120)

        await r.gateway.facilities.mark_error(r.hotel_id, "second reason")

        second = await r.row()
        assert (second.status, second.last_error) == ("error", "second reason")
        assert second.status_changed_at == first.status_changed_at
        r.enrolled.clock.advance(120)
        await r.gateway.facilities.mark_connected(r.hotel_id)
        third = await r.row()
        assert (third.status, third.last_error) == ("connected", None)
        assert third.status_changed_at > second.status_changed_at


async def test_a_reconnect_stores_verified_credentials_and_restarts_the_listings_sync(
    database_url: str,
) -> None:
    async with reconnectable(database_url) as r:
        warm = await r.call_tool()  # fills the read cache under the old credentials
        assert warm.meta["source"] == "upstream"
        r.enrolled.sandbox.kross.change_password(r.hotel_id, NEW_PASSWORD)
        await r.gateway.facilities.mark_error(r.hotel_id, "authentication failed")
        ctx = await r.enrolled.context()
        assert ctx.workspace_id is not None
        assert r.enrolled.sandbox.assistant.listings(ctx.workspace_id) == []

        result = await r.connect()

        apartments = len(r.enrolled.facility["apartments"])
        assert (result.status, result.listings_sync, result.listings) == (
            "connected",
            "restarted",
            apartments,
        )
        assert result.registry is not None and result.registry.apartments == apartments
        assert (await r.row()).status == "connected"
        credentials = await r.gateway.facilities.credentials(r.hotel_id)
        assert credentials.password.get_secret_value() == NEW_PASSWORD
        # The answers read with the old credentials are gone: the next call goes upstream.
        assert (await r.call_tool()).meta["source"] == "upstream"
        assert len(r.enrolled.sandbox.assistant.listings(ctx.workspace_id)) == apartments
        assert NEW_PASSWORD not in repr(result) + str(result.as_json())


async def test_a_refused_reconnect_raises_kross_credentials_rejected_and_stores_nothing(
    database_url: str,
) -> None:
    async with reconnectable(database_url) as r:
        before_row = await r.row()
        before_facility = await r.gateway.facilities.get(r.hotel_id)

        with pytest.raises(PmsgateError) as refused:
            await r.connect("definitely-the-wrong-password")

        assert (refused.value.code, refused.value.status) == ("pms_credentials_rejected", 422)
        assert "definitely-the-wrong-password" not in str(refused.value)
        assert await r.row() == before_row
        assert await r.gateway.facilities.get(r.hotel_id) == before_facility
        credentials = await r.gateway.facilities.credentials(r.hotel_id)
        assert credentials.password.get_secret_value() == r.enrolled.facility["password"]


async def test_a_customer_without_a_registered_facility_cannot_be_reconnected(
    database_url: str,
) -> None:
    async with reconnectable(database_url, register_facility=False) as r:
        with pytest.raises(PmsgateError) as refused:
            await r.connect()

        assert (refused.value.code, refused.value.status) == ("pms_facility_not_registered", 409)


async def test_an_unknown_customer_is_customer_not_found(database_url: str) -> None:
    async with reconnectable(database_url) as r:
        with pytest.raises(PmsgateError) as refused:
            await connect_kross(
                r.enrolled.services,
                r.gateway,
                "stu-nobody",
                username="api12345",
                password=SecretStr(NEW_PASSWORD),
                api_key=None,
            )

        assert refused.value.code == "customer_not_found"


async def test_a_partner_facility_refuses_an_api_key_of_its_own(database_url: str) -> None:
    async with reconnectable(database_url) as r:
        before = await r.row()

        with pytest.raises(PmsgateError) as refused:
            await r.connect(api_key=SecretStr("0123456789abcdef0123456789abcdef"))

        assert refused.value.code == "api_key_not_allowed_for_partner"
        assert await r.row() == before


async def test_the_assistant_client_reads_and_sets_the_workspace_connection_without_echoes(
    database_url: str,
) -> None:
    async with reconnectable(database_url) as r:
        assistant = r.enrolled.services.assistant
        ctx = await r.enrolled.context()
        assert ctx.workspace_id is not None

        current = await assistant.get_kross_connection(ctx.workspace_id)
        r.enrolled.sandbox.assistant.clear_kross_connection(ctx.workspace_id)
        missing = await assistant.get_kross_connection(ctx.workspace_id)
        r.enrolled.sandbox.kross.change_password(r.hotel_id, NEW_PASSWORD)
        updated = await assistant.set_kross_connection(
            ctx.workspace_id,
            hotel_id=r.hotel_id,
            username=r.enrolled.facility["username"],
            password=SecretStr(NEW_PASSWORD),
        )

        assert current is not None and current.healthy and current.hotel_id == r.hotel_id
        assert missing is None
        assert (updated.hotel_id, updated.healthy) == (r.hotel_id, True)
        assert NEW_PASSWORD not in updated.model_dump_json()
        assert len(r.enrolled.sandbox.assistant.listings(ctx.workspace_id)) == len(
            r.enrolled.facility["apartments"]
        )


def token_requests(r: Reconnectable) -> int:
    """auth/get-token requests the booking-system emulator has seen."""
    return r.enrolled.sandbox.kross.stats.requests_by_operation["auth/get-token"]


async def test_reconnect_attempts_spend_the_facilitys_budget_and_end_in_its_budget_error(
    database_url: str,
) -> None:
    async with reconnectable(database_url) as r:
        await r.gateway.facilities.set_limits(
            r.hotel_id, Limits(per_minute=2, per_hour=2, per_day=2)
        )
        before_row = await r.row()
        before_facility = await r.gateway.facilities.get(r.hotel_id)
        requests = token_requests(r)
        codes: list[str] = []
        counts: list[int] = []

        for _ in range(5):
            with pytest.raises(PmsgateError) as refused:
                await r.connect("definitely-the-wrong-password")
            codes.append(refused.value.code)
            counts.append(token_requests(r) - requests)
        with pytest.raises(PmsgateError) as spent:
            await r.connect(r.enrolled.facility["password"])

        assert codes == ["pms_credentials_rejected"] * 2 + ["upstream_budget_exhausted"] * 3
        assert counts == [1, 2, 2, 2, 2]  # the emulator saw no token request once spent
        assert (spent.value.code, spent.value.status) == ("upstream_budget_exhausted", 429)
        assert int(spent.value.headers["Retry-After"]) > 0
        assert token_requests(r) - requests == 2
        assert await r.row() == before_row
        assert await r.gateway.facilities.get(r.hotel_id) == before_facility
        credentials = await r.gateway.facilities.credentials(r.hotel_id)
        assert credentials.password.get_secret_value() == r.enrolled.facility["password"]


@pytest.mark.parametrize(
    ("password", "options", "code"),
    [
        ("x" * 5000, {}, "password_too_long"),
        ("a-password\x00with-a-nul", {}, "invalid_password"),
        ("a-password\x7fwith-del", {}, "invalid_password"),
        (NEW_PASSWORD, {"username": "api1\x00"}, "invalid_username"),
        (NEW_PASSWORD, {"api_key": SecretStr("\x00" * 32)}, "invalid_api_key"),
    ],
)
async def test_an_oversized_password_or_a_control_character_is_refused_before_any_request(
    database_url: str, password: str, options: dict[str, Any], code: str
) -> None:
    async with reconnectable(database_url) as r:
        before = await r.row()
        requests = token_requests(r)

        with pytest.raises(PmsgateError) as refused:
            await r.connect(password, **options)

        assert (refused.value.code, refused.value.status) == (code, 422)
        assert password not in str(refused.value)
        assert token_requests(r) == requests
        assert await r.row() == before
