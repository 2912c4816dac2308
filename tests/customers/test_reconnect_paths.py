"""The one reconnect path: the CLI, the admin API and the web app each restart the listings sync.

Each entry point runs :func:`pmsgate.customers.reconnect.reconnect_facility` on the
process's container: after the booking-system password changed, a reconnect with the
new one gives the emulated platform's connection the new credentials and runs the
registry's listings sync (the platform lists every apartment again). The web app's
path is covered in ``test_reconnect.py`` (``connect_kross``) and ``tests/web``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from pydantic import SecretStr

from pmsgate.app import create_app
from pmsgate.cli import facilities as gateway_cli
from tests.cli_support import pmsgate
from tests.customers.support import EnrolledSandbox, enrolled_sandbox
from tests.support.cli import cli_on_sandbox

pytestmark = pytest.mark.anyio

NEW_PASSWORD = "a-brand-new-api-password-2217"
ADMIN_TOKEN = "admin-token-for-reconnect-tests-0123"


@pytest.fixture
async def enrolled(database_url: str) -> AsyncIterator[EnrolledSandbox]:
    """The seeded partner customer with four apartments, its password changed upstream."""
    overrides = {"admin_token": SecretStr(ADMIN_TOKEN)}
    async with enrolled_sandbox(
        database_url, seed=7, student_index=1, settings_overrides=overrides
    ) as box:
        box.sandbox.kross.change_password(box.hotel_id, NEW_PASSWORD)
        ctx = await box.context()
        assert ctx.workspace_id is not None
        # The platform's own connection no longer authenticates: its listings are gone.
        assert box.sandbox.assistant.listings(ctx.workspace_id) == []
        yield box


async def listings_after_reconnect(box: EnrolledSandbox) -> int:
    """How many listings the platform shows, and the kross row connected again."""
    ctx = await box.context()
    assert ctx.kross is not None and ctx.kross.status == "connected"
    assert ctx.workspace_id is not None
    credentials = await box.container.gateway.facilities.credentials(box.hotel_id)
    assert credentials.password.get_secret_value() == NEW_PASSWORD
    return len(box.sandbox.assistant.listings(ctx.workspace_id))


async def test_the_admin_api_reconnect_restarts_the_listings_sync(
    enrolled: EnrolledSandbox,
) -> None:
    app = create_app(enrolled.settings, container=enrolled.container)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway.test") as http:
        answer = await http.post(
            f"/admin/facilities/{enrolled.hotel_id}/reconnect",
            json={"username": enrolled.facility["username"], "password": NEW_PASSWORD},
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "connected"
    assert NEW_PASSWORD not in answer.text
    assert await listings_after_reconnect(enrolled) == len(enrolled.facility["apartments"])


async def test_the_cli_reconnect_restarts_the_listings_sync(
    enrolled: EnrolledSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["facilities", "reconnect", enrolled.hotel_id, "--password-stdin", "--json"]
    with cli_on_sandbox(monkeypatch, enrolled, gateway_cli):
        result = await pmsgate(*args, input=f"{NEW_PASSWORD}\n")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert NEW_PASSWORD not in result.stdout + result.stderr
    assert await listings_after_reconnect(enrolled) == len(enrolled.facility["apartments"])
