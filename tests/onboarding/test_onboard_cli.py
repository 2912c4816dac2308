"""`pmsgate onboard …` through the real command line, end to end on the in-process sandbox.

The CLI opens its own services from the environment (database, vault key, upstream
URLs, data directory); its httpx clients reach the sandbox's ASGI app through the
``knowledge.cli.upstreams`` seam it shares with `pmsgate knowledge`, with the
sandbox's ManualClock and a sleep that moves it. The customer file's secrets are
``${ENV}`` references set in the environment; none may ever be printed.
"""

from __future__ import annotations

import email
import email.policy
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pmsgate.cli import knowledge as knowledge_cli
from tests.cli_support import CliRecorder
from tests.onboarding.sandbox_customer import OnboardingSandbox, onboarding_sandbox
from tests.support.cli import cli_on_sandbox

pytestmark = pytest.mark.anyio


class Cli(CliRecorder):
    """The sandbox and a way to run `pmsgate` on it, keeping everything printed."""

    def __init__(self, box: OnboardingSandbox, file: Path) -> None:
        super().__init__()
        self.box = box
        self.file = file

    def assert_no_secret_printed(self) -> None:
        printed = "\n".join(self.printed)
        for secret in self.box.secrets():
            assert secret not in printed


@pytest.fixture
async def cli(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Cli]:
    """A fresh sandbox customer, its file on disk, the CLI configured by the environment."""
    async with onboarding_sandbox(database_url, tmp_path / "data") as box:
        with cli_on_sandbox(
            monkeypatch,
            box,
            knowledge_cli,
            PMSGATE_DATA_DIR=str(box.settings.data_dir),
            PMSGATE_GATEWAY_PUBLIC_URL=str(box.settings.gateway_public_url),
            **box.env,
        ):
            yield Cli(box, box.write(tmp_path / "customer.yaml"))


async def test_onboard_then_status_then_confirm_then_a_rerun_that_writes_nothing(cli: Cli) -> None:
    box = cli.box
    box.prepare_route_a()
    result = await cli.run("onboard", str(cli.file))
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "Prerequisites" in result.stdout and "waiting for a person" in result.stdout
    assert "every automatable step is done" in result.stdout
    assert "Nothing changed" not in result.stdout

    status = await cli.json("onboard", "status", box.student_id)
    steps = {s["step"]: s for s in status["steps"]}
    assert status["route"] == "A" and len(steps) == 17
    assert steps["route-b-quick-setup"]["status"] == "skipped"
    channels = steps["channels"]
    assert channels["status"] == "waiting" and channels["due"] is not None
    assert "[whatsapp-number]" in channels["waiting_for"]
    assert all(
        s["status"] == "done"
        for s in steps.values()
        if s["kind"] != "manual" and s["step"] != "route-b-quick-setup"
    )
    # An account from day one: created, no password yet, invited once in Italian.
    [account] = (await cli.json("users", "list"))["users"]
    address = box.file().email.lower()
    assert (account["email"], account["role"], account["student_id"]) == (
        address,
        "customer",
        box.student_id,
    )
    assert account["invited_at"] is not None and account["password_set"] is False
    assert steps["onboarding-message"]["evidence"]["console_account"]["email"] == address
    outbox = box.settings.data_dir / "outbox"
    [invitation] = [
        email.message_from_bytes(p.read_bytes(), policy=email.policy.default)
        for p in outbox.glob("invite.*.eml")
    ]
    assert invitation["To"] == address and invitation["Content-Language"] == "it"
    # The onboarding message links the console's own sign-in page.
    sent = email.message_from_bytes(
        (outbox / f"{box.student_id}-onboarding.eml").read_bytes(), policy=email.policy.default
    )
    text = sent.get_body(preferencelist=("plain",)).get_content()  # type: ignore[attr-defined]
    assert f"{str(box.settings.gateway_public_url).rstrip('/')}/login" in text

    for item in channels["evidence"]["required_items"]:
        confirmed = await cli.json(
            "onboard",
            "confirm",
            box.student_id,
            "channels",
            "--item",
            item,
            "--evidence",
            f"{item}: checked with the owner",
            "--by",
            "ops",
        )
    assert confirmed["status"] == "done" and confirmed["person"] == "ops"

    writes = box.upstream_writes()
    rerun = await cli.json("onboard", "run", str(cli.file))
    assert rerun["status"] == "succeeded" and rerun["complete"] is True
    assert not any(step["applied"] for step in rerun["steps"])
    assert box.upstream_writes() == writes
    assert len(list(outbox.glob("invite.*.eml"))) == 1  # a second run sends nothing
    # Said in plain words on a terminal too.
    repeat = await cli.run("onboard", str(cli.file))
    assert repeat.exit_code == 0 and "Nothing changed" in repeat.stdout
    assert box.upstream_writes() == writes

    # A confirmation taken back: the item waits for a person again (audited, like confirm).
    reopened = await cli.json(
        "onboard", "reopen", box.student_id, "channels", "--item", item, "--note", "changed"
    )
    assert reopened["status"] == "waiting" and "changed" in reopened["message"]
    again = await cli.run("onboard", "reopen", box.student_id, "channels", "--item", item)
    assert again.exit_code == 2 and "step_not_confirmed" in again.stderr

    table = await cli.run("onboard", "status", box.student_id)
    assert table.exit_code == 0 and "checked with the owner" in table.stdout
    # The evidence in plain words (name: value lines), not the recorded JSON.
    assert f"email: {address}" in table.stdout and "console account:" in table.stdout
    assert '{"' not in table.stdout and '":' not in table.stdout
    cli.assert_no_secret_printed()


async def test_a_rejected_booking_system_password_exits_1_with_the_reason_and_the_fix(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    box = cli.box
    monkeypatch.setenv(f"KROSS_PASSWORD_{box.hotel_id}", "wrong-password-77")
    result = await cli.run("onboard", str(cli.file))
    assert result.exit_code == 1
    assert "run stopped at step prerequisites" in result.stdout
    assert "rejected the credentials" in result.stdout
    assert f"check the API user {box.facility['username']}" in result.stdout
    assert "wrong-password-77" not in result.stdout + result.stderr
    report = await cli.json("onboard", str(cli.file), exit_code=1)
    assert report["status"] == "stopped" and report["fix"]
    cli.assert_no_secret_printed()


async def test_an_invalid_customer_file_exits_2_naming_the_field(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(f"NOTION_TOKEN_{cli.box.hotel_id}")
    result = await cli.run("onboard", str(cli.file))
    assert result.exit_code == 2
    assert "invalid_customer_file" in result.stderr and "notes.token" in result.stderr
    missing = await cli.run("onboard", "status", "stu-nobody")
    assert missing.exit_code == 2 and "onboarding_not_found" in missing.stderr
    cli.assert_no_secret_printed()


async def test_dry_run_prints_what_would_be_done_and_writes_nothing(cli: Cli) -> None:
    report = await cli.json("onboard", "--dry-run", str(cli.file))
    assert report["dry_run"] is True and report["status"] == "succeeded"
    steps = {s["step"]: s for s in report["steps"]}
    assert steps["prerequisites"]["status"] == "done"
    assert steps["workspace-configuration"]["status"] == "would_do"
    assert steps["workspace-configuration"]["message"].startswith("would do: register customer")
    assert cli.box.upstream_writes() == {"platform": 0, "notes": 0}
    assert await cli.box.services.customers.customers.find(cli.box.student_id) is None
    cli.assert_no_secret_printed()
