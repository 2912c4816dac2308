"""The customer context and services, on the emulators through the real clients."""

from __future__ import annotations

import httpx
import pytest
from pydantic import SecretStr
from sqlalchemy import select

from pmsgate.container import open_container
from pmsgate.customers.context import CustomerServices
from pmsgate.errors import PmsgateError
from pmsgate.storage.db import open_database
from pmsgate.storage.integrations import token_context
from pmsgate.storage.models import CustomerIntegration

from ..gateway.facility_support import all_stored_text
from .support import enrolled_sandbox, sandbox_settings

pytestmark = pytest.mark.anyio


async def test_context_holds_the_customer_workspace_integrations_and_registry(
    database_url: str,
) -> None:
    async with enrolled_sandbox(database_url) as box:
        ctx = await box.context()
        workspaces = box.sandbox.assistant.workspaces()

    assert ctx.student_id == box.student_id
    assert ctx.customer.email == f"owner-{box.hotel_id}@example.com"
    assert ctx.customer.subscription_active_on_contract_price
    assert ctx.workspace is not None and ctx.workspace.billing_mode == "partner_markup"
    assert ctx.workspace_id == ctx.workspace.workspace_id
    assert ctx.workspace_id in {w.id for w in workspaces}
    assert ctx.kross is not None and ctx.kross.provider == "kross"
    assert ctx.kross.status == "connected" and ctx.kross_connected
    assert ctx.kross.facility_hotel_id == box.hotel_id == ctx.hotel_id
    assert ctx.kross.id != ctx.student_id
    assert ctx.notes is not None and ctx.notes.provider == "notes" and ctx.notes_connected
    assert ctx.apartments_database_id == box.notion_ground_truth["database_id"]
    assert sorted(a.pms_room_type_id for a in ctx.apartments) == box.room_type_ids


async def test_the_facility_is_linked_by_its_integration_id(database_url: str) -> None:
    async with enrolled_sandbox(database_url) as box:
        ctx = await box.context()
        facility = await box.services.facilities.get(box.hotel_id)
    assert ctx.kross is not None
    assert facility.integration_id == ctx.kross.id


async def test_an_unknown_student_is_customer_not_found_with_a_hint(database_url: str) -> None:
    async with enrolled_sandbox(database_url, sync=False) as box:
        with pytest.raises(PmsgateError) as caught:
            await box.services.context("stu-nobody")
    assert caught.value.code == "customer_not_found"
    assert caught.value.status == 404
    assert "customers add" in caught.value.hint


async def test_the_notion_token_is_stored_only_encrypted_and_used_decrypted(
    database_url: str,
) -> None:
    async with enrolled_sandbox(database_url, sync=False) as box:
        token = box.notion_ground_truth["token"]
        ctx = await box.context()
        assert ctx.notes is not None
        async with box.services.notion(ctx) as notes:
            pages = await notes.query_database(box.notion_ground_truth["database_id"])
            assert token not in repr(notes)
        vault = box.services.vault

    assert sorted(str(p.room_type_id) for p in pages) == box.room_type_ids
    assert token not in repr(ctx)
    stored = await all_stored_text(database_url)
    assert token not in stored
    async with open_database(database_url, migrate=False) as engine, engine.connect() as conn:
        ciphertext = (
            await conn.execute(
                select(CustomerIntegration.token_enc).where(CustomerIntegration.id == ctx.notes.id)
            )
        ).scalar_one()
    assert ciphertext is not None and ciphertext.startswith(f"{vault.primary_key_id}:")
    assert vault.decrypt(ciphertext, context=token_context(ctx.notes.id)) == token


async def test_each_notion_client_gets_its_own_http_client_closed_on_exit(
    database_url: str,
) -> None:
    async with enrolled_sandbox(database_url, sync=False) as box:
        made: list[httpx.AsyncClient] = []
        factory = box.services.http_factory

        def counting_factory() -> httpx.AsyncClient:
            client = factory()
            made.append(client)
            return client

        box.services.http_factory = counting_factory
        ctx = await box.context()
        async with box.services.notion(ctx) as first, box.services.notion(ctx) as second:
            assert first is not second
            await first.query_database(box.notion_ground_truth["database_id"])
            await second.query_database(box.notion_ground_truth["database_id"])
            assert len(made) == 2 and made[0] is not made[1]
            assert not any(client.is_closed for client in made)
            # Clients of one token share one throttle: together they keep its rate.
            assert first.throttle is second.throttle
    assert all(client.is_closed for client in made)


async def test_notion_without_a_notion_integration_is_notion_not_connected(
    database_url: str,
) -> None:
    async with enrolled_sandbox(database_url, with_notion=False, sync=False) as box:
        ctx = await box.context()
        assert ctx.notes is None and not ctx.notes_connected
        with pytest.raises(PmsgateError) as caught:
            async with box.services.notion(ctx):
                pass
    assert caught.value.code == "notes_not_connected"
    assert "connect-notion" in caught.value.hint


async def test_without_a_assistant_token_the_assistant_is_a_configuration_error(
    database_url: str,
) -> None:
    settings = sandbox_settings(database_url, assistant_api_token=None)
    async with open_container(settings) as container:
        services = container.customers
        assert isinstance(services, CustomerServices)
        with pytest.raises(PmsgateError) as caught:
            _ = services.assistant
    assert caught.value.code == "platform_not_configured"


async def test_the_services_never_show_a_secret_in_their_repr(database_url: str) -> None:
    secret = "platform-token-that-must-stay-hidden"
    settings = sandbox_settings(database_url, assistant_api_token=SecretStr(secret))
    async with open_container(settings) as container:
        services = container.customers
        assert secret not in repr(services)
        assert secret not in repr(services.assistant)
