"""`pmsgate customers …` through the real command line, against `pmsgate sandbox` on loopback."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from typer.testing import Result

from pmsgate.sandbox.assistant.seed import SANDBOX_ASSISTANT_TOKEN
from tests.cli_support import assert_failed_with as failed_with
from tests.cli_support import pmsgate
from tests.customers.support import give_pms_connection
from tests.support.cli import database_cli

from ..e2e.processes import free_port, serving
from ..gateway.facility_support import all_stored_text

pytestmark = pytest.mark.anyio

SEED = 7


@pytest.fixture(scope="module")
def sandbox_url() -> Iterator[str]:
    """`pmsgate sandbox` as a real process on a free loopback port."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with serving(
        "sandbox",
        "--port",
        str(port),
        "--seed",
        str(SEED),
        ready_url=f"{url}/assistant/_sandbox/config",
    ):
        yield url


@pytest.fixture
def cli_env(database_url: str, sandbox_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The CLI's configuration in the environment; the settings cache and logging restored."""
    with database_cli(
        monkeypatch,
        database_url,
        "c1",
        PMSGATE_ASSISTANT_API_URL=f"{sandbox_url}/assistant",
        PMSGATE_ASSISTANT_API_TOKEN=SANDBOX_ASSISTANT_TOKEN,
        PMSGATE_NOTION_API_URL=f"{sandbox_url}/notion",
    ) as url:
        yield url


def one_json(result: Result) -> dict[str, Any]:
    """The single JSON object a --json command printed."""
    assert result.exit_code == 0, (result.stdout, result.stderr)
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def assert_failed_with(result: Result, code: str) -> None:
    """Exit status 2 and `error <code>:` plus a hint on standard error, nothing on stdout."""
    failed_with(result, code)
    # A hidden prompt's newline is the only thing a runner may echo on stdout.
    assert result.stdout.strip() == ""


async def sandbox_truth(sandbox_url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The first seeded facility and its notes workspace, from the emulators' controls."""
    async with httpx.AsyncClient(base_url=sandbox_url) as http:
        facilities = (await http.get("/kross/_sandbox/facilities")).json()
        workspaces = (await http.get("/notion/_sandbox/workspaces")).json()
    facility = facilities[0]
    notes = next(w for w in workspaces if w["hotel_id"] == facility["hotel_id"])
    return facility, notes


def add_args(student: str, kind: str) -> list[str]:
    return [
        "customers",
        "add",
        student,
        "--email",
        f"{student}@example.com",
        "--name",
        "Casa CLI",
        "--kind",
        kind,
        "--contract-ref",
        "C-1",
        "--contract-price-id",
        "price_1",
        "--subscription-id",
        "sub_1",
        "--subscription-status",
        "active",
        "--subscription-price-id",
        "price_1",
        "--handles-upsell",
    ]


async def test_a_customer_is_enrolled_and_synced_from_the_command_line(
    cli_env: str, sandbox_url: str
) -> None:
    facility, notes = await sandbox_truth(sandbox_url)
    student = f"stu-cli-{uuid.uuid4().hex[:6]}"
    token = notes["token"]

    added = one_json(await pmsgate(*add_args(student, facility["kind"]), "--json"))
    assert added["customer"]["student_id"] == student
    assert added["customer"]["handles_upsell"] is True
    assert added["customer"]["subscription_status"] == "active"
    assert_failed_with(await pmsgate(*add_args(student, facility["kind"])), "customer_exists")

    configured = one_json(
        await pmsgate(
            "customers",
            "configure-workspace",
            student,
            "--plan-limit-usd",
            "150",
            "--slug",
            student,
            "--json",
        )
    )
    workspace_id = configured["workspace"]["workspace_id"]
    assert workspace_id and configured["workspace"]["billing_mode"] == "partner_markup"
    async with httpx.AsyncClient(base_url=sandbox_url) as http:
        await give_pms_connection(http, workspace_id, facility)

    linked = await pmsgate(
        "customers", "link-kross", student, "--hotel-id", facility["hotel_id"], "--json"
    )
    body = one_json(linked)
    assert body["linked"] is False and body["integration"]["status"] == "connected"
    assert body["integration"]["id"].startswith("int-")

    connected = await pmsgate(
        "customers",
        "connect-notion",
        student,
        "--database-id",
        notes["database_id"],
        "--token-stdin",
        "--json",
        input=f"{token}\n",
    )
    body = one_json(connected)
    assert body["apartment_pages"] == len(notes["pages"])
    assert body["integration"]["has_token"] is True
    assert token not in connected.stdout + connected.stderr

    rooms = len(facility["apartments"])
    synced = one_json(await pmsgate("customers", "sync-registry", student, "--json"))["sync"]
    assert (synced["listings"], synced["created"], synced["apartments"]) == (rooms, rooms, rooms)
    again = one_json(await pmsgate("customers", "sync-registry", student, "--json"))["sync"]
    assert (again["created"], again["updated"], again["unchanged"]) == (0, 0, rooms)

    shown = await pmsgate("customers", "show", student, "--json")
    body = one_json(shown)
    assert body["registry"]["apartments"] == rooms
    assert body["registry"]["with_listing"] == rooms == body["registry"]["with_notes_page"]
    assert body["integrations"]["notes"]["has_token"] is True
    assert body["workspace"]["workspace_id"] == workspace_id
    human = await pmsgate("customers", "show", student)
    assert human.exit_code == 0, human.stderr
    assert "stored (encrypted)" in human.stdout
    assert f"Registry: {rooms} apartments" in human.stdout
    listed = one_json(await pmsgate("customers", "list", "--json"))
    assert [c["student_id"] for c in listed["customers"]] == [student]
    for result in (shown, human):
        assert token not in result.stdout + result.stderr
    assert token not in await all_stored_text(cli_env)


async def test_the_token_prompt_is_hidden_and_a_wrong_token_stores_nothing(
    cli_env: str, sandbox_url: str
) -> None:
    facility, notes = await sandbox_truth(sandbox_url)
    student = f"stu-cli-{uuid.uuid4().hex[:6]}"
    assert (await pmsgate(*add_args(student, facility["kind"]))).exit_code == 0
    wrong = "ntn_" + "w" * 46

    refused = await pmsgate(
        "customers",
        "connect-notion",
        student,
        "--database-id",
        notes["database_id"],
        input=f"{wrong}\n",
    )
    assert_failed_with(refused, "notes_token_refused")
    assert "Notes integration token" in refused.stderr
    assert wrong not in refused.stdout + refused.stderr
    shown = one_json(await pmsgate("customers", "show", student, "--json"))
    assert shown["integrations"]["notes"] is None
    assert wrong not in await all_stored_text(cli_env)


async def test_errors_are_a_code_a_message_and_a_hint_with_exit_status_2(cli_env: str) -> None:
    assert_failed_with(await pmsgate("customers", "show", "stu-ghost"), "customer_not_found")
    assert_failed_with(
        await pmsgate("customers", "sync-registry", "stu-ghost", "--json"), "customer_not_found"
    )
    assert_failed_with(
        await pmsgate(
            "customers",
            "connect-notion",
            "stu-ghost",
            "--database-id",
            "db",
            "--token-stdin",
            input="\n",
        ),
        "missing_notes_token",
    )
    assert_failed_with(
        await pmsgate(
            "customers", "add", "stu-x", "--email", "nope", "--name", "X", "--kind", "own"
        ),
        "invalid_email",
    )
