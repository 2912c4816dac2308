"""``pmsgate secrets rotate`` re-encrypts the webhook signing secrets with every other secret."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import select

from pmsgate.config import get_settings
from pmsgate.gateway.vault import Vault, generate_key_spec
from pmsgate.storage.db import open_database, session_factory
from pmsgate.storage.models import WebhookSubscription
from pmsgate.storage.webhooks import secret_context
from tests.cli_support import pmsgate
from tests.support.cli import cli_environment

pytestmark = pytest.mark.anyio

OLD_KEY = generate_key_spec("w1")
NEW_KEY = generate_key_spec("w2")


@pytest.fixture
def cli_env(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with cli_environment(
        monkeypatch, PMSGATE_DATABASE_URL=database_url, PMSGATE_SECRET_KEYS=OLD_KEY
    ):
        yield database_url


async def _subscription(database_url: str) -> WebhookSubscription:
    async with (
        open_database(database_url, migrate=False) as engine,
        session_factory(engine)() as session,
    ):
        return (await session.execute(select(WebhookSubscription))).scalar_one()


async def test_rotation_re_encrypts_the_current_and_previous_webhook_secrets(
    cli_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    added = await pmsgate(
        "webhooks", "add", "https://team.example.com/hook", "--team", "-e", "onboarding.completed"
    )
    assert added.exit_code == 0, added.stderr
    first = added.stdout.strip()
    subscription_id = (await _subscription(cli_env)).id
    rotated = await pmsgate("webhooks", "rotate", str(subscription_id), "--overlap", "3600")
    assert rotated.exit_code == 0, rotated.stderr
    second = rotated.stdout.strip()

    monkeypatch.setenv("PMSGATE_SECRET_KEYS", f"{NEW_KEY},{OLD_KEY}")
    get_settings.cache_clear()
    first_run = await pmsgate("secrets", "rotate", "--json")
    assert first_run.exit_code == 0, first_run.stderr
    assert '"rotated": 2' in first_run.stdout  # the secret and the previous one
    assert '"rotated": 0' in (await pmsgate("secrets", "rotate", "--json")).stdout

    row = await _subscription(cli_env)
    assert row.secret_enc.startswith("w2:")
    assert row.previous_secret_enc is not None and row.previous_secret_enc.startswith("w2:")
    new_only = Vault(NEW_KEY)
    secret = new_only.decrypt(row.secret_enc, context=secret_context(row.id, "secret"))
    previous = new_only.decrypt(row.previous_secret_enc, context=secret_context(row.id, "previous"))
    assert (secret, previous) == (second, first)
