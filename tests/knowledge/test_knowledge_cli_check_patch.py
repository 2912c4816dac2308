"""`pmsgate knowledge check|patch` through the real command line, on an enrolled in-process sandbox.

The CLI opens its own services from the environment (database, vault key, upstream
URLs); its httpx clients reach the sandbox's ASGI app through the
``knowledge.cli.upstreams`` seam, with the sandbox's ManualClock and a sleep that
moves it, so the notes throttle and the emulator's rate limit never wait for real.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from typer.testing import Result

from pmsgate.cli import knowledge as knowledge_cli
from pmsgate.sandbox.app import Sandbox
from tests.cli_support import CliRecorder, assert_failed_with
from tests.customers.support import (
    EnrolledSandbox,
    enrolled_sandbox,
)
from tests.support.cli import cli_on_sandbox

pytestmark = pytest.mark.anyio

SEED = 7
# Seed 7's customer with a page without WiFi, a section written as a heading, a misleading
# first toggle and WiFi callouts saying "wifi"/"internet".
STUDENT_INDEX = next(
    i
    for i, facility in enumerate(Sandbox(seed=SEED).kross.facility_summaries())
    if any(
        not page["wifi_on_page"]
        for workspace in Sandbox(seed=SEED).notion.workspaces()
        if workspace["hotel_id"] == facility["hotel_id"]
        for page in workspace["pages"]
    )
    and len(facility["apartments"]) > 2
)


class Cli(CliRecorder):
    """The enrolled sandbox and a way to run `pmsgate` on it, keeping everything printed."""

    def __init__(self, enrolled: EnrolledSandbox) -> None:
        super().__init__()
        self.enrolled = enrolled

    async def patch_wifi(self, page_id: str, *, network: str, password: str) -> Result:
        """`pmsgate knowledge patch --apply` of one page with WiFi credentials (the password
        on standard input)."""
        return await self.run(
            "knowledge", "patch", "--student", self.student, "--page", page_id,
            "--wifi-network", network, "--wifi-password-stdin", "--apply",
            input=password + "\n",
        )  # fmt: skip

    @property
    def student(self) -> str:
        return self.enrolled.student_id

    @property
    def pages(self) -> list[dict[str, Any]]:
        return self.enrolled.notes_pages

    def writes(self) -> int:
        blocks = self.enrolled.sandbox.notion.stats.as_dict()["blocks"]
        return int(blocks["created"] + blocks["updated"] + blocks["archived"])

    def passwords(self) -> list[str]:
        return [page["wifi"]["password"] for page in self.pages]


@pytest.fixture
async def cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Cli]:
    """The enrolled customer; the CLI configured by the environment and the upstreams seam."""
    async with enrolled_sandbox(database_url, seed=SEED, student_index=STUDENT_INDEX) as enrolled:
        with cli_on_sandbox(monkeypatch, enrolled, knowledge_cli):
            yield Cli(enrolled)


def assert_no_password(cli: Cli) -> None:
    printed = "\n".join(cli.printed)
    for password in cli.passwords():
        assert password not in printed


# --- check -------------------------------------------------------------------------------------


async def test_check_prints_a_row_per_page_and_the_complete_and_incomplete_counts(
    cli: Cli,
) -> None:
    result = await cli.run("knowledge", "check", "--student", cli.student)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    for page in cli.pages:
        assert page["page_id"] in result.stdout
        assert page["title"] in result.stdout
    incomplete = sum(1 for p in cli.pages if p["sections_missing"])
    complete = len(cli.pages) - incomplete
    assert f"{len(cli.pages)} pages: {complete} complete, {incomplete} incomplete" in result.stdout
    assert "House rules" in result.stdout  # a column per canonical section
    assert_no_password(cli)


async def test_check_json_reports_each_page_like_the_ground_truth_without_passwords(
    cli: Cli,
) -> None:
    body = await cli.json("knowledge", "check", "--student", cli.student)
    by_id = {page["page_id"]: page for page in body["pages"]}
    assert set(by_id) == {p["page_id"] for p in cli.pages}
    for truth in cli.pages:
        row = by_id[truth["page_id"]]
        assert row["in_registry"] is True
        assert row["apartment"] == truth["title"]
        check = row["check"]
        assert check["complete"] == (not truth["sections_missing"])
        assert len(check["missing"]) == len(truth["sections_missing"])
        if truth["wifi_on_page"]:
            assert check["wifi"] == {"network": truth["wifi"]["network"], "password": "found"}
        else:
            assert check["wifi"] is None
    assert body["summary"]["pages"] == len(cli.pages)
    assert body["summary"]["failed"] == 0
    assert_no_password(cli)


async def test_check_of_one_page_and_of_an_unknown_page(cli: Cli) -> None:
    page = cli.pages[0]["page_id"]
    body = await cli.json("knowledge", "check", "--student", cli.student, "--page", page)
    assert [row["page_id"] for row in body["pages"]] == [page]
    undashed = page.replace("-", "")
    body = await cli.json("knowledge", "check", "--student", cli.student, "--page", undashed)
    assert [row["page_id"] for row in body["pages"]] == [page]
    missing = await cli.run("knowledge", "check", "--student", cli.student, "--page", "nope")
    assert_failed_with(missing, "page_not_found")


async def test_check_of_an_unknown_customer_fails_with_its_code(cli: Cli) -> None:
    result = await cli.run("knowledge", "check", "--student", "stu-nobody")
    assert_failed_with(result, "customer_not_found")


# --- patch -------------------------------------------------------------------------------------


async def test_patch_without_apply_shows_the_changes_with_the_password_masked_and_writes_nothing(
    cli: Cli,
) -> None:
    before = cli.writes()
    result = await cli.run("knowledge", "patch", "--student", cli.student)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "set the WiFi title" in result.stdout
    assert "Password: ********" in result.stdout
    assert "blocked (wifi_credentials_unknown)" in result.stdout
    assert "Run again with --apply" in result.stdout
    assert cli.writes() == before
    assert_no_password(cli)


async def test_patch_apply_makes_every_page_canonical_and_a_second_apply_changes_nothing(
    cli: Cli,
) -> None:
    without_wifi = [p for p in cli.pages if not p["wifi_on_page"]]
    assert without_wifi

    first = await cli.json("knowledge", "patch", "--student", cli.student, "--apply")
    assert first["summary"]["failed"] == 0
    assert first["summary"]["blocked"] == len(without_wifi)
    assert first["summary"]["applied"] == first["summary"]["changes"] > 0
    for row in first["pages"]:
        assert row["outcome"] is None or row["outcome"]["failed"] is None

    for truth in without_wifi:
        wifi = truth["wifi"]
        result = await cli.patch_wifi(
            truth["page_id"], network=wifi["network"], password=wifi["password"]
        )
        assert result.exit_code == 0, (result.stdout, result.stderr)
        assert "after: complete, canonical" in result.stdout

    checked = await cli.json("knowledge", "check", "--student", cli.student)
    assert checked["summary"]["complete"] == len(cli.pages)
    for row in checked["pages"]:
        assert row["check"]["canonical"], row
        truth = next(p for p in cli.pages if p["page_id"] == row["page_id"])
        assert row["check"]["wifi"]["network"] == truth["wifi"]["network"]

    writes = cli.writes()
    again = await cli.run("knowledge", "patch", "--student", cli.student, "--apply")
    assert again.exit_code == 0, (again.stdout, again.stderr)
    assert again.stdout.count("canonical: nothing to change") == len(cli.pages)
    assert "0 to change: 0 changes applied" in again.stdout
    assert cli.writes() == writes
    assert_no_password(cli)


async def test_wifi_credentials_need_a_page_and_both_parts(cli: Cli) -> None:
    truth = cli.pages[0]
    args = ["knowledge", "patch", "--student", cli.student]
    no_page = await cli.run(*args, "--wifi-network", "Net", "--wifi-password-stdin", input="pw\n")
    assert_failed_with(no_page, "wifi_needs_page")
    page = ["--page", truth["page_id"]]
    no_network = await cli.run(*args, *page, "--wifi-password", "pw")
    assert_failed_with(no_network, "wifi_network_missing")
    twice = await cli.run(
        *args, *page, "--wifi-network", "N", "--wifi-password", "pw", "--wifi-password-stdin"
    )
    assert_failed_with(twice, "wifi_password_twice")
    blank = await cli.run(*args, *page, "--wifi-network", "N", "--wifi-password-stdin", input="\n")
    assert_failed_with(blank, "wifi_credentials_invalid")


async def test_given_credentials_override_the_page_and_are_never_printed(cli: Cli) -> None:
    truth = next(p for p in cli.pages if p["wifi_on_page"])
    secret = "Given-Secret-8812"
    result = await cli.patch_wifi(truth["page_id"], network="Given-Net", password=secret)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "Given-Net" in result.stdout
    assert secret not in result.stdout + result.stderr
    body = await cli.json(
        "knowledge", "check", "--student", cli.student, "--page", truth["page_id"]
    )
    assert body["pages"][0]["check"]["wifi"] == {"network": "Given-Net", "password": "found"}
    assert secret not in json.dumps(body)
    assert_no_password(cli)
