"""The command line as a new user meets it: demo, db upgrade, and the sandbox over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from typer.testing import CliRunner

from pmsgate.cli import app
from pmsgate.config import get_settings
from tests.e2e.processes import free_port, serving

BROWSER_UA = {"User-Agent": "Mozilla/5.0 (test)"}


@pytest.fixture
def env(tmp_path, monkeypatch) -> Iterator[None]:
    monkeypatch.setenv("PMSGATE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("PMSGATE_DATABASE_URL", raising=False)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_db_upgrade_creates_the_sqlite_database_under_the_data_directory(env, tmp_path):
    result = CliRunner().invoke(app, ["db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert "revision" in result.output
    assert (tmp_path / "data" / "pmsgate.db").exists()


@pytest.fixture
def sandbox_url() -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/kross"
    with serving(
        "sandbox", "--port", str(port), "--seed", "3", ready_url=f"{url}/_sandbox/facilities"
    ):
        yield url


def test_sandbox_serves_the_booking_system_with_its_documented_behaviour(sandbox_url):
    facilities = httpx.get(f"{sandbox_url}/_sandbox/facilities").json()
    facility = facilities[0]
    body = {key: facility[key] for key in ("hotel_id", "username", "password", "api_key")}

    blocked = httpx.post(f"{sandbox_url}/v5/auth/get-token", json=body)
    assert blocked.status_code == 403
    assert "error code: 1010" in blocked.text

    reference = httpx.get(f"{sandbox_url}/apiv5", headers=BROWSER_UA)
    assert reference.headers["content-type"].startswith("text/html")

    token = httpx.post(f"{sandbox_url}/v5/auth/get-token", json=body, headers=BROWSER_UA)
    assert token.status_code == 200
    bearer = token.json()["data"]["auth_token"]
    missing = httpx.post(
        f"{sandbox_url}/v5/calendar/get-calendar",
        json={},
        headers={**BROWSER_UA, "Authorization": f"Bearer {bearer}"},
    )
    assert missing.status_code == 404
    assert missing.json()["error_code"] == "OPERATION_NOT_FOUND"
