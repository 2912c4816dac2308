"""`pmsgate demo --serve` tells the team too: its settings name a team address whose notices
land in the outbox next to the customer's, and the welcome says where to read them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from pmsgate.demo.serve import TEAM_EMAIL, DemoLogin, _print_welcome, serve_settings
from pmsgate.jobs.connections import CHECK_CONNECTIONS
from pmsgate.jobs.notify import NOTIFY_INCIDENTS
from pmsgate.jobs.scheduler import build_scheduler
from pmsgate.mail import outbox_dir
from pmsgate.sandbox.app import Sandbox
from tests.customers.support import enrolled_sandbox

pytestmark = pytest.mark.anyio


def welcome(width: int, **details: Any) -> str:
    """The demo's welcome (the sandbox of seed 1 on :8090, the app on :8080) with ``details``
    (logins, gateway key, invitations, outbox), as a ``width``-column terminal shows it."""
    console = Console(record=True, width=width)
    _print_welcome(
        console,
        sandbox=Sandbox(seed=1),
        sandbox_url="http://127.0.0.1:8090",
        app_url="http://127.0.0.1:8080",
        **details,
    )
    return console.export_text()


def test_the_welcome_names_the_team_inbox(tmp_path: Path) -> None:
    settings = serve_settings(tmp_path, "http://127.0.0.1:8080")
    assert settings.notify_team_email == TEAM_EMAIL
    text = welcome(
        width=100, logins=[], gateway_key="pgw_demo", invitations=[], outbox=outbox_dir(settings)
    )
    assert str(tmp_path / "outbox") in text and TEAM_EMAIL in text


def test_the_welcome_reads_at_80_columns_with_logins_keys_and_links_whole(
    tmp_path: Path,
) -> None:
    login = DemoLogin("owner-1@example.com", "a-demo-password-1", "customer", "stu-1", "Route A")
    key = "pgw_" + "k" * 43
    link = "http://127.0.0.1:8080/login/link/" + "t" * 43
    outbox = tmp_path / ("a-long-directory-name-" * 4) / "outbox"
    text = welcome(
        width=80, logins=[login], gateway_key=key, invitations=[(login.email, link)], outbox=outbox
    )
    lines = [line.rstrip() for line in text.splitlines()]
    assert [line for line in lines if len(line) > 80 and len(line.split()) != 1] == []
    for whole in (key, link, str(outbox), "http://127.0.0.1:8080/console"):
        assert whole in [line.strip() for line in lines], whole
    assert f"e-mail:   {login.email}" in text and f"password: {login.password}" in text


async def test_a_broken_password_in_the_served_demo_reaches_customer_and_team(
    database_url: str, tmp_path: Path
) -> None:
    served = serve_settings(tmp_path, "http://127.0.0.1:8080")
    overrides = {"data_dir": tmp_path, "notify_team_email": served.notify_team_email}
    async with enrolled_sandbox(database_url, settings_overrides=overrides) as enrolled:
        scheduler = build_scheduler(enrolled.container.web, sleep=enrolled.sleep)
        await scheduler.run_once(CHECK_CONNECTIONS)
        enrolled.sandbox.kross.change_password(enrolled.hotel_id, "changed-upstream-42")
        await scheduler.run_once(CHECK_CONNECTIONS)
        await scheduler.run_once(NOTIFY_INCIDENTS)
        notices = sorted(p.name for p in outbox_dir(served).glob("incident-*.eml"))
        assert [name.rsplit(".", 2)[-2] for name in notices] == ["customer", "team"], notices
